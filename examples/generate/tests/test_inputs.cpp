// Bad inputs: a clear error naming the problem, and nothing written (not even half a file).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app.hpp"
#include "checkpoint_model.hpp"
#include "prompt.hpp"
#include "safetensors.hpp"
#include "tiny_model.hpp"

using namespace generate;

namespace {

// Runs fp8_generate's main with these arguments; returns (exit code, log).
std::pair<int, std::string> run_main(std::vector<std::string> args) {
  args.insert(args.begin(), "fp8_generate");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, log;
  const int code = generate_main(int(argv.size()), argv.data(), out, log);
  return {code, log.str()};
}

// A copy of the tiny checkpoint with `edit` applied, the checksum recomputed unless `keep_checksum`.
template <class Edit>
std::string edited_checkpoint(const std::string& name, Edit edit, bool fix_checksum = true) {
  trainer::safetensors_file file = trainer::read_safetensors(generate_tests::checkpoint_path());
  edit(file);
  if (fix_checksum) file.metadata["checksum.fnv1a64"] = checkpoint_checksum(file);
  const std::string path = generate_tests::temporary_path(name);
  trainer::write_safetensors(path, file);
  return path;
}

void check_refused(const std::string& path, const std::string& expected) {
  CAPTURE(path);
  CHECK_THROWS_WITH(load_checkpoint_model(path), doctest::Contains(expected.c_str()));
}

}  // namespace

TEST_CASE("checkpoints that cannot be served are refused with the reason") {
  REQUIRE_NOTHROW(load_checkpoint_model(generate_tests::checkpoint_path()));
  // Another model shape: tensors of d_model 32 under metadata that says 64.
  check_refused(
      edited_checkpoint("other_shape.safetensors", [](auto& f) { f.metadata["model.d_model"] = "64"; }),
      "another shape");
  check_refused(edited_checkpoint("mlp.safetensors", [](auto& f) { f.metadata["model.model"] = "mlp"; }),
                "transformer only");
  // A missing tensor (with a valid checksum, so the loader reaches the tensor check).
  check_refused(edited_checkpoint("missing.safetensors",
                                  [](auto& f) {
                                    f.tensors.erase(std::remove_if(f.tensors.begin(), f.tensors.end(),
                                                                   [](const auto& t) {
                                                                     return t.name == "params/blocks.1.wo";
                                                                   }),
                                                    f.tensors.end());
                                  }),
                "'params/blocks.1.wo' is missing");
  // Corrupt: one weight byte flipped (checksum), a truncated file, a file that is not safetensors.
  check_refused(edited_checkpoint(
                    "flipped.safetensors", [](auto& f) { f.tensors[0].bytes[5] ^= 0x40; }, false),
                "corrupted");
  const std::string truncated = generate_tests::temporary_path("truncated.safetensors");
  {
    std::ifstream in(generate_tests::checkpoint_path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  CHECK_THROWS_AS(load_checkpoint_model(truncated), fp8::checkpoint_error);
  const std::string garbage = generate_tests::temporary_path("garbage.safetensors");
  std::ofstream(garbage) << "this is not a checkpoint";
  CHECK_THROWS_AS(load_checkpoint_model(garbage), fp8::checkpoint_error);
  // A weight with NaN: refused rather than served.
  check_refused(edited_checkpoint("nan.safetensors",
                                  [](auto& f) {
                                    for (auto& t : f.tensors) {
                                      if (t.name == "params/blocks.0.wo") {
                                        const float nan = std::nanf("");
                                        std::memcpy(t.bytes.data(), &nan, 4);
                                      }
                                    }
                                  }),
                "NaN");
}

TEST_CASE("prompts: empty, too long, or not UTF-8 are refused") {
  CHECK_THROWS_WITH(prompt_tokens("", 32), doctest::Contains("empty"));
  CHECK_THROWS_WITH(prompt_tokens(std::string(33, 'a'), 32),
                    doctest::Contains("more than the model's context of 32"));
  CHECK(prompt_tokens(std::string(32, 'a'), 32).size() == 32);
  CHECK_THROWS_WITH(prompt_tokens("ab\xff", 32), doctest::Contains("byte 0xFF at offset 2"));
  CHECK_THROWS_WITH(prompt_tokens("\xc3", 32), doctest::Contains("offset 0"));          // truncated sequence
  CHECK_THROWS_WITH(prompt_tokens("\xc0\xaf", 32), doctest::Contains("offset 0"));      // overlong '/'
  CHECK_THROWS_WITH(prompt_tokens("\xed\xa0\x80", 32), doctest::Contains("offset 0"));  // a surrogate
  CHECK_THROWS_WITH(prompt_tokens("\xf4\x90\x80\x80", 32), doctest::Contains("offset 0"));  // > U+10FFFF
  const std::string text = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82";  // é, €, an emoji
  CHECK(first_invalid_utf8(text) == std::string::npos);
  CHECK(prompt_tokens(text, 32).size() == text.size());
}

TEST_CASE("a refused run writes nothing: no model file, no report, no temporary") {
  const std::string saved = generate_tests::temporary_path("refused.safetensors");
  const std::string report = generate_tests::temporary_path("refused.json");
  std::filesystem::remove(saved);
  std::filesystem::remove(report);
  const std::vector<std::string> common{"--checkpoint",
                                        generate_tests::checkpoint_path(),
                                        "--data",
                                        FP8_GENERATE_TEST_TEXT,
                                        "--batch",
                                        "2",
                                        "--eval-batches",
                                        "1",
                                        "--calibration-batches",
                                        "1",
                                        "--weights",
                                        "fp8-channel",
                                        "--activations",
                                        "dynamic",
                                        "--kv-cache",
                                        "fp8",
                                        "--save",
                                        saved,
                                        "--report",
                                        report,
                                        "--threads",
                                        "1"};
  for (const std::string& prompt : {std::string(""), std::string(40, 'x'), std::string("\xfe")}) {
    auto args = common;
    args.push_back("--prompt");
    args.push_back(prompt);
    const auto [code, log] = run_main(args);
    CHECK(code == 1);
    CHECK(log.find("--prompt") != std::string::npos);
    CHECK(!std::filesystem::exists(saved));
    CHECK(!std::filesystem::exists(saved + ".tmp"));
    CHECK(!std::filesystem::exists(report));
  }
  // A checkpoint of another shape: refused before anything is written.
  auto args = common;
  args[1] =
      edited_checkpoint("other_shape2.safetensors", [](auto& f) { f.metadata["model.hidden"] = "128"; });
  auto [code, log] = run_main(args);
  CHECK(code == 1);
  CHECK(!std::filesystem::exists(saved));
  // An output directory that does not exist: a clear error, no temporary left behind.
  args = common;
  const std::string nowhere = generate_tests::temporary_path("no_such_dir") + "/model.safetensors";
  args[std::size_t(std::find(args.begin(), args.end(), "--save") - args.begin()) + 1] = nowhere;
  std::tie(code, log) = run_main(args);
  CHECK(code == 1);
  CHECK(log.find("cannot write") != std::string::npos);
  CHECK(!std::filesystem::exists(nowhere + ".tmp"));
  // The same run with good inputs writes both files.
  std::tie(code, log) = run_main(common);
  CHECK(code == 0);
  CHECK(std::filesystem::exists(saved));
  CHECK(std::filesystem::exists(report));
}

TEST_CASE("--data takes a directory of cookie files as the trainer does") {
  // The checkpoint was trained on the test text; the same bytes as the one cookie file of a
  // directory (with its .dat index beside it) have the same fingerprint: no warning.
  const std::filesystem::path folder = generate_tests::temporary_path("cookie_dir");
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(FP8_GENERATE_TEST_TEXT, folder / "cookies");
  std::ofstream(folder / "cookies.dat") << "index";
  const std::vector<std::string> args{"--checkpoint",   generate_tests::checkpoint_path(),
                                      "--data",         folder.string(),
                                      "--batch",        "2",
                                      "--eval-batches", "1",
                                      "--threads",      "1"};
  auto [code, log] = run_main(args);
  CHECK(code == 0);
  CHECK(log.find("validation: loss") != std::string::npos);  // it evaluated on that text
  CHECK(log.find("trained on other text") == std::string::npos);
  // A directory without cookie files: the trainer's error, naming it.
  const std::filesystem::path empty = generate_tests::temporary_path("empty_cookie_dir");
  std::filesystem::create_directories(empty);
  std::tie(code, log) = run_main(
      {"--checkpoint", generate_tests::checkpoint_path(), "--data", empty.string(), "--eval-batches", "1"});
  CHECK(code == 1);
  CHECK(log.find("no fortune cookie files") != std::string::npos);
}

TEST_CASE("the command line checks ranges and choices") {
  const std::string ckpt = generate_tests::checkpoint_path();
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--checkpoint", ckpt, "--top-p", "1.5"},
           {"--checkpoint", ckpt, "--temperature", "-1"},
           {"--checkpoint", ckpt, "--weights", "int8"},
           {"--checkpoint", ckpt, "--top-k", "300"},
           {"--checkpoint", generate_tests::temporary_path("absent.safetensors")},
           {"--weights", "bf16"}}) {
    const std::pair<int, std::string> result = run_main(bad);
    CAPTURE(result.second);
    CHECK(result.first != 0);
    CHECK(!result.second.empty());
  }
  // FP8 activations without FP8 weights make no sense: refused with the fix.
  const auto [code, log] = run_main(
      {"--checkpoint", ckpt, "--weights", "bf16", "--activations", "dynamic", "--eval-batches", "0"});
  CHECK(code == 1);
  CHECK(log.find("needs FP8 weights") != std::string::npos);
}

// Checkpoints: a safetensors round trip, and every kind of corrupt or mismatched file refused with a
// message that names the problem, leaving the running state exactly as it was.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "checkpoint.hpp"
#include "run_checks.hpp"
#include "safetensors.hpp"
#include "tiny_options.hpp"
#include "trainer.hpp"

using namespace trainer;
using trainer_tests::temporary_path;

namespace {

run_options tiny_options() {
  run_options o = trainer_tests::tiny_options(FP8_TRAINER_TEST_TEXT, trainer_tests::one_layer_of_16, 2, 6);
  o.base_precision = precision::fp8;
  o.recipe.amax_history_length = 8;
  return o;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_all(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::uint64_t header_length(const std::vector<char>& bytes) {
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= std::uint64_t(std::uint8_t(bytes[std::size_t(i)])) << (8 * i);
  return length;
}

// Loading `path` into a trained run must fail with a message containing `expected`, and leave the
// run's weights, optimizer state, step and later losses exactly as they were.
void check_refused(const std::string& path, const std::string& expected,
                   run_options options = tiny_options()) {
  training_run run(options);
  run.train_step();
  const std::vector<float> master = run.net().parameters().master;
  const std::vector<float> moments = run.net().parameters().adam_v;
  training_run reference(options);
  reference.train_step();
  std::string message;
  try {
    run.load(path);
  } catch (const fp8::checkpoint_error& e) { message = e.what(); }
  CAPTURE(message);
  CHECK(message.find(expected) != std::string::npos);
  CHECK(message.find(path) != std::string::npos);
  CHECK(run.step() == 1);
  CHECK(run.net().parameters().master == master);
  CHECK(run.net().parameters().adam_v == moments);
  CHECK(run.train_step().train_loss == reference.train_step().train_loss);
}

// A valid checkpoint of tiny_options() after two steps.
std::string good_checkpoint(const std::string& name) {
  training_run run(tiny_options());
  run.train_step();
  run.train_step();
  const std::string path = temporary_path(name);
  run.save(path);
  return path;
}

}  // namespace

TEST_CASE("safetensors files round-trip tensors and metadata") {
  safetensors_file file;
  file.metadata["note"] = "hello";
  const float values[] = {1.5f, -2.0f, 0.25f, 8.0f, 0.0f, -0.0f};
  const std::uint64_t words[] = {1, 0xFFFFFFFFFFFFFFFFull};
  const std::uint8_t bytes[] = {7, 8, 9};
  file.tensors.push_back(make_tensor("a/values", {2, 3}, values));
  file.tensors.push_back(make_tensor("b", {2}, words));
  file.tensors.push_back(make_tensor("c", {3}, bytes));
  const std::string path = temporary_path("round_trip.safetensors");
  write_safetensors(path, file);
  // The header is padded to a multiple of 8 bytes, as the reference implementation writes it.
  const std::vector<char> raw = read_all(path);
  CHECK(header_length(raw) % 8 == 0);
  const safetensors_file back = read_safetensors(path);
  CHECK(back.metadata.at("note") == "hello");
  REQUIRE(back.tensors.size() == 3);
  const named_tensor* a = back.find("a/values");
  REQUIRE(a != nullptr);
  CHECK(a->dtype == tensor_dtype::f32);
  CHECK(a->shape == std::vector<std::int64_t>{2, 3});
  CHECK(std::memcmp(a->bytes.data(), values, sizeof(values)) == 0);
  CHECK(std::memcmp(back.find("b")->bytes.data(), words, sizeof(words)) == 0);
  CHECK(back.find("c")->bytes == std::vector<std::uint8_t>{7, 8, 9});
}

TEST_CASE("a missing, empty or foreign file is refused") {
  check_refused(temporary_path("does_not_exist.safetensors"), "cannot open");
  const std::string empty = temporary_path("empty.safetensors");
  write_all(empty, {});
  check_refused(empty, "fewer than the 8-byte header length");
  const std::string text = temporary_path("text.safetensors");
  write_all(text, std::vector<char>(64, 'x'));
  check_refused(text, "header length field");
  // A valid safetensors file that is not a trainer checkpoint.
  safetensors_file other;
  const float one = 1.0f;
  other.tensors.push_back(make_tensor("weight", {1}, &one));
  const std::string foreign = temporary_path("foreign.safetensors");
  write_safetensors(foreign, other);
  check_refused(foreign, "not a checkpoint of this trainer");
}

TEST_CASE("a truncated or corrupted checkpoint is refused") {
  const std::string good = good_checkpoint("good.safetensors");
  const std::vector<char> bytes = read_all(good);
  const std::size_t data_start = 8 + std::size_t(header_length(bytes));

  SUBCASE("truncated in the tensor data") {
    const std::string path = temporary_path("truncated.safetensors");
    write_all(path, std::vector<char>(bytes.begin(), bytes.begin() + std::ptrdiff_t(data_start + 100)));
    check_refused(path, "truncated");
  }
  SUBCASE("truncated in the header") {
    const std::string path = temporary_path("truncated_header.safetensors");
    write_all(path, std::vector<char>(bytes.begin(), bytes.begin() + 40));
    check_refused(path, "header length field");
  }
  SUBCASE("a flipped bit in the weights") {
    std::vector<char> flipped = bytes;
    flipped[data_start + 17] = char(flipped[data_start + 17] ^ 0x10);
    const std::string path = temporary_path("flipped.safetensors");
    write_all(path, flipped);
    check_refused(path, "checksum");
  }
  SUBCASE("a damaged header") {
    std::vector<char> damaged = bytes;
    damaged[8] = '[';  // the header's opening brace
    damaged[9] = '!';
    const std::string path = temporary_path("bad_json.safetensors");
    write_all(path, damaged);
    check_refused(path, "not valid JSON");
  }
  SUBCASE("trailing bytes after the last tensor") {
    std::vector<char> longer = bytes;
    longer.push_back('\0');
    const std::string path = temporary_path("trailing.safetensors");
    write_all(path, longer);
    check_refused(path, "trailing bytes");
  }
  SUBCASE("a tensor whose bytes do not match its shape") {
    safetensors_file file = read_safetensors(good);
    for (named_tensor& t : file.tensors) {
      if (t.name == "train/step") t.shape = {2};  // 8 bytes of I64 claimed as two elements
    }
    const std::string path = temporary_path("bad_shape.safetensors");
    write_safetensors(path, file);
    check_refused(path, "needs 16");
  }
  SUBCASE("a missing tensor") {
    safetensors_file file = read_safetensors(good);
    file.tensors.erase(file.tensors.begin());  // params/wte
    const std::string path = temporary_path("missing.safetensors");
    write_safetensors(path, file);
    check_refused(path, "checksum");  // the checksum covers the set of tensors too
  }
}

TEST_CASE("a checkpoint of another model, other data or another recipe is refused") {
  const std::string good = good_checkpoint("good_for_mismatch.safetensors");
  SUBCASE("another model shape") {
    run_options wider = tiny_options();
    wider.model.channels = 32;
    check_refused(good, "d_model: checkpoint 16, this run 32", wider);
  }
  SUBCASE("other training data") {
    const std::string other_text = temporary_path("other.txt");
    std::ofstream(other_text) << std::string(4000, 'a') << std::string(4000, 'b');
    run_options other = tiny_options();
    other.data_file = other_text;
    check_refused(good, "other data", other);
  }
  SUBCASE("another delayed-scaling history length") {
    run_options longer = tiny_options();
    longer.recipe.amax_history_length = 16;
    check_refused(good, "history_length", longer);
    // ... which --reset-scaling accepts, starting the scaling state afresh.
    longer.reset_scaling = true;
    longer.resume_from = good;
    training_run resumed(longer);
    CHECK(resumed.step() == 2);
    CHECK(resumed.scaling().delayed().scale(0) == 1.0f);
  }
  SUBCASE("another format mix") {
    run_options e4m3 = tiny_options();
    e4m3.recipe.formats = fp8::format_mix::e4m3;
    check_refused(good, "format_mix", e4m3);
  }
}

TEST_CASE("checkpoints are readable as plain safetensors, with every piece of state") {
  const std::string path = good_checkpoint("contents.safetensors");
  const safetensors_file file = read_safetensors(path);
  CHECK(file.metadata.at("format") == "fp8-trainer-checkpoint");
  CHECK(file.metadata.at("model.d_model") == "16");
  for (const char* name : {"params/wte", "adam_m/wte", "adam_v/wte", "params/blocks.0.wqkv", "train/step",
                           "data/epoch", "data/index", "rng/data_epoch", "scaling/state"}) {
    CAPTURE(name);
    CHECK(file.find(name) != nullptr);
  }
  std::int64_t step = 0;
  std::memcpy(&step, file.find("train/step")->bytes.data(), sizeof(step));
  CHECK(step == 2);
  // The scaling state is the library's versioned format.
  CHECK(std::memcmp(file.find("scaling/state")->bytes.data(), "FP8SCALE", 8) == 0);
}

TEST_CASE("a header number outside double's range is refused as a corrupt header") {
  // nlohmann::json reports 1e400 as out_of_range, not as a parse error.
  const std::string header = "{\"x\":{\"dtype\":\"U8\",\"shape\":[1e400],\"data_offsets\":[0,0]}}";
  std::vector<char> bytes(8, '\0');
  bytes[0] = char(header.size());
  bytes.insert(bytes.end(), header.begin(), header.end());
  const std::string path = temporary_path("huge_number.safetensors");
  write_all(path, bytes);
  check_refused(path, "not valid JSON");
}

TEST_CASE("what is not a regular file is refused before it is read") {
  SUBCASE("a directory") {
    const std::string dir = temporary_path("a_directory.safetensors");
    std::filesystem::create_directories(dir);
    check_refused(dir, "is a directory");
  }
  SUBCASE("an endless device") { check_refused("/dev/zero", "not a regular file"); }
  SUBCASE("a FIFO, whose open would block") {
    const std::string fifo = temporary_path("a_fifo.safetensors");
    std::filesystem::remove(fifo);
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    check_refused(fifo, "not a regular file");
  }
}

TEST_CASE("the temporary file of an unfinished save is never loaded") {
  const std::string good = good_checkpoint("for_tmp.safetensors");
  const std::string temporary = good + ".tmp";
  std::filesystem::copy_file(good, temporary, std::filesystem::copy_options::overwrite_existing);
  check_refused(temporary, "unfinished save");
}

TEST_CASE("the byte entry point of the loaders throws only checkpoint_error") {
  const std::string good = good_checkpoint("for_bytes.safetensors");
  const std::vector<char> raw = read_all(good);
  const std::vector<std::uint8_t> bytes(raw.begin(), raw.end());
  const safetensors_file file = parse_safetensors(bytes.data(), bytes.size(), "in memory");
  CHECK(file.find("train/step") != nullptr);
  training_run run(tiny_options());
  CHECK(read_checkpoint(bytes.data(), bytes.size(), "in memory", run.net(), run.data()).step == 2);
  // Every truncation of a valid file is refused with the project's error type and the name given.
  for (std::size_t size = 0; size < bytes.size(); size += 97) {
    CAPTURE(size);
    try {
      parse_safetensors(bytes.data(), size, "in memory");
      FAIL("a truncated file was accepted");
    } catch (const fp8::checkpoint_error& e) {
      CHECK(std::string(e.what()).find("in memory") != std::string::npos);
    }
  }
  // Random damage to the header and the bytes around it: accepted or refused, never another exception.
  training_run model_run(tiny_options());
  std::mt19937 generator(7);
  const std::size_t span = std::min<std::size_t>(bytes.size(), 8 + std::size_t(header_length(raw)) + 64);
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::uint8_t> damaged = bytes;
    for (int flips = 1 + int(generator() % 4); flips > 0; --flips) {
      damaged[generator() % span] = std::uint8_t(generator());
    }
    try {
      read_checkpoint(damaged.data(), damaged.size(), "damaged", model_run.net(), model_run.data());
    } catch (const fp8::checkpoint_error&) { ++refused; }
  }
  CHECK(refused > 2900);  // nearly every damage breaks the JSON, a length or the checksum
}

// The trainer's files: a --data directory is read as fortune cookie files, other inputs that are not
// regular files are refused, every failed write fails the run, a resumed run trims its logs, a
// finished run is not overwritten unless asked, and the debris of an interrupted save is cleaned up.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "data.hpp"
#include "file_io.hpp"
#include "logging.hpp"
#include "tensor_stats.hpp"
#include "tiny_options.hpp"
#include "trainer.hpp"

using namespace trainer;
namespace fs = std::filesystem;

namespace {

fs::path fresh_directory(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "fp8_trainer_file_tests" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

template <class Function>
std::string error_of(Function&& function) {
  try {
    function();
  } catch (const std::exception& e) { return e.what(); }
  return "";
}

run_options tiny_run(const fs::path& out, long steps) {
  run_options o =
      trainer_tests::tiny_options(FP8_TRAINER_TEST_TEXT, trainer_tests::one_layer_of_16, 2, steps);
  o.eval_every = 2;
  o.log_every = 1000;
  o.recipe.amax_history_length = 4;
  o.out_dir = out.string();
  return o;
}

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// How many rows of a CSV file (after its header) have each value of the first column.
std::map<long, int> rows_per_step(const fs::path& path) {
  std::map<long, int> rows;
  const std::vector<std::string> lines = lines_of(path);
  for (std::size_t i = 1; i < lines.size(); ++i) ++rows[std::stol(lines[i])];
  return rows;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.flush());
}

std::string as_text(const std::vector<std::uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

TEST_CASE("text that is not a regular file is refused before it is read") {
  const fs::path dir = fresh_directory("inputs");
  CHECK(error_of([&] { load_text_file(dir.string()); }).find("is a directory") != std::string::npos);
  CHECK(error_of([&] { load_text_file("/dev/zero"); }).find("'/dev/zero' is not a regular file") !=
        std::string::npos);
  const fs::path fifo = dir / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_of([&] { load_text_file(fifo.string()); }).find("not a regular file") != std::string::npos);
  CHECK(error_of([&] { load_text_file((dir / "missing.txt").string()); }).find("missing.txt") !=
        std::string::npos);
}

TEST_CASE("--data takes a directory of fortune cookie files, read as the default text is") {
  const fs::path dir = fresh_directory("cookies");
  // Two cookie files (each with the .dat index the fortune program keeps beside it), and the files
  // load_fortunes skips: an extension (the .dat indexes, .u8 links), no index, the ASCII art.
  write_text(dir / "beta", std::string(300, 'b'));
  write_text(dir / "beta.dat", "index");
  write_text(dir / "alpha", std::string(200, 'a'));
  write_text(dir / "alpha.dat", "index");
  write_text(dir / "alpha.u8", std::string(50, 'u'));
  write_text(dir / "no_index", std::string(70, 'n'));
  write_text(dir / "ascii-art", std::string(90, '#'));
  write_text(dir / "ascii-art.dat", "index");
  const text_data fortunes = load_fortunes(dir.string());
  const text_data data = load_text(dir.string());
  CHECK(data.description == fortunes.description);
  CHECK(data.description.find("2 cookie files in " + dir.string()) != std::string::npos);
  CHECK(data.train == fortunes.train);
  CHECK(data.validation == fortunes.validation);
  CHECK(data.fingerprint == fortunes.fingerprint);
  // The first 90% of each file, in name order, then the last 10% of each.
  CHECK(as_text(data.train) == std::string(180, 'a') + std::string(270, 'b'));
  CHECK(as_text(data.validation) == std::string(20, 'a') + std::string(30, 'b'));

  // The trainer's --data: a directory holding the test text as its one cookie file trains on the
  // same bytes (the same fingerprint, so its checkpoints resume either way) as the file itself.
  const fs::path one = fresh_directory("one_cookie");
  fs::copy_file(FP8_TRAINER_TEST_TEXT, one / "sample");
  write_text(one / "sample.dat", "index");
  run_options o = tiny_run(fresh_directory("cookie_run"), 2);
  o.data_file = one.string() + "/";  // a trailing slash too
  const training_run from_directory(o);
  CHECK(from_directory.data().description.find("1 cookie files in " + o.data_file) != std::string::npos);
  CHECK(from_directory.data().fingerprint == load_text_file(FP8_TRAINER_TEST_TEXT).fingerprint);
  CHECK(run_name(o).find("-one_cookie-") != std::string::npos);
}

TEST_CASE("a --data directory without cookie files, or a path that is not there, is a clear error") {
  const fs::path empty = fresh_directory("no_cookies");
  const std::string none = error_of([&] { load_text(empty.string()); });
  CHECK(none.find("no fortune cookie files") != std::string::npos);
  CHECK(none.find(empty.string()) != std::string::npos);
  // Text files that have no .dat index are not cookie files: the same error, not a silent mix.
  const fs::path plain = fresh_directory("plain_text");
  write_text(plain / "notes", "some text");
  write_text(plain / "story.txt", "more text");
  const std::string unindexed = error_of([&] { load_text(plain.string()); });
  CHECK(unindexed.find("no fortune cookie files") != std::string::npos);
  CHECK(unindexed.find(plain.string()) != std::string::npos);
  // In the trainer as well, before the model is made.
  run_options o = tiny_run(fresh_directory("no_cookie_run"), 2);
  o.data_file = plain.string();
  CHECK(error_of([&] { training_run run(o); }).find("no fortune cookie files") != std::string::npos);
  const std::string missing = (empty / "missing").string();
  const std::string absent = error_of([&] { load_text(missing); });
  CHECK(absent.find("cannot open '" + missing + "'") != std::string::npos);
  CHECK(absent.find("No such file or directory") != std::string::npos);
}

TEST_CASE("a write that fails is an error, not a silently empty file") {
  // /dev/full accepts open() and fails every write with ENOSPC, as a full disk does.
  CHECK(error_of([] { csv_log log("/dev/full", 0); }).find("/dev/full") != std::string::npos);
  CHECK(error_of([] {
          tensor_stats_log stats("/dev/full", 0);
          stats.set_step(1);
          stats.add("layer", "fprop_input", "e4m3", "fp8", "tensor", tensor_stats{});
          stats.flush();
        }).find("/dev/full") != std::string::npos);
  const std::uint8_t byte = 1;
  CHECK(error_of([&] {
          write_file_atomically("/dev/full/x", {{&byte, 1}});
        }).find("/dev/full/x") != std::string::npos);
}

TEST_CASE("a resumed run trims stats.csv like log.csv, and cleans up an interrupted save") {
  const fs::path out = fresh_directory("resume");
  run_options first = tiny_run(out, 4);
  first.stats_every = 1;
  first.save_every = 2;
  {
    training_run run(first);
    run.run();
  }
  const std::map<long, int> once = rows_per_step(out / "stats.csv");
  REQUIRE(once.size() == 4);
  // The debris of a save killed before its rename.
  std::ofstream(out / "step_000004.safetensors.tmp") << "torn";
  std::ofstream(out / "notes.tmp") << "not the trainer's";

  run_options resumed = first;
  resumed.resume_from = (out / "step_000002.safetensors").string();
  {
    training_run run(resumed);
    run.run();
  }
  CHECK(rows_per_step(out / "stats.csv") == once);
  const std::map<long, int> log_rows = rows_per_step(out / "log.csv");
  CHECK(log_rows == std::map<long, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}});
  CHECK_FALSE(fs::exists(out / "step_000004.safetensors.tmp"));
  CHECK(fs::exists(out / "notes.tmp"));
}

TEST_CASE("a finished run is not overwritten unless asked") {
  const fs::path out = fresh_directory("overwrite");
  run_options o = tiny_run(out, 2);
  {
    training_run run(o);
    run.run();
  }
  const std::vector<std::string> log = lines_of(out / "log.csv");
  const std::string message = error_of([&] { check_output_directory(o); });
  CHECK(message.find(out.string()) != std::string::npos);
  CHECK(message.find("--overwrite") != std::string::npos);
  CHECK(lines_of(out / "log.csv") == log);
  o.overwrite = true;
  CHECK(error_of([&] { check_output_directory(o); }).empty());
  // Resuming into the run's own directory continues it: that is not overwriting.
  run_options resume = tiny_run(out, 3);
  resume.resume_from = (out / "final.safetensors").string();
  CHECK(error_of([&] { check_output_directory(resume); }).empty());
}

TEST_CASE("the default output directory tells runs with other rates, lengths or data apart") {
  run_options a;
  run_options lr = a, steps = a, data = a;
  lr.learning_rate = 1e-3f;
  steps.steps = 900;
  data.data_file = "/some/where/shakespeare.txt";
  CHECK(run_name(a) != run_name(lr));
  CHECK(run_name(a) != run_name(steps));
  CHECK(run_name(a) != run_name(data));
  CHECK(run_name(data).find("shakespeare") != std::string::npos);
}

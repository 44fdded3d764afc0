// A tiny transformer trained in BF16 for a few seconds on the trainer's test text, saved once per
// test binary: the model every fp8_generate test runs.
#pragma once

#include <filesystem>
#include <string>

#include <unistd.h>

#include "options.hpp"
#include "trainer.hpp"

namespace generate_tests {

inline trainer::run_options tiny_options() {
  trainer::run_options o;
  o.data_file = FP8_GENERATE_TEST_TEXT;
  o.base_precision = trainer::precision::bf16;
  o.model.context = 32;
  o.model.channels = 32;
  o.model.layers = 2;
  o.model.heads = 2;
  o.model.hidden = 64;
  o.batch = 4;
  o.steps = 80;
  o.eval_batches = 2;
  o.threads = 1;
  o.progress_bar = false;
  return o;
}

// One directory per test process, so that test binaries run in parallel (ctest -j) never share files.
inline std::string temporary_path(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fp8_generate_tests_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// Trains (once) and returns the run; its checkpoint is at checkpoint_path().
inline trainer::training_run& tiny_run() {
  static trainer::training_run* run = [] {
    auto* r = new trainer::training_run(tiny_options());
    for (long s = 0; s < tiny_options().steps; ++s) r->train_step();
    return r;
  }();
  return *run;
}

inline std::string checkpoint_path() {
  static const std::string path = [] {
    const std::string p = temporary_path("tiny.safetensors");
    tiny_run().save(p);
    return p;
  }();
  return path;
}

}  // namespace generate_tests

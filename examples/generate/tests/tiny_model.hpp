// A tiny transformer trained in BF16 for a few seconds on the trainer's test text, saved once per
// test binary: the model every fp8_generate test runs.
#pragma once

#include <filesystem>
#include <string>

#include <unistd.h>

#include "options.hpp"
#include "tiny_options.hpp"
#include "trainer.hpp"

namespace generate_tests {

inline trainer::run_options tiny_options() {
  trainer::run_options o =
      trainer_tests::tiny_options(FP8_GENERATE_TEST_TEXT, trainer_tests::two_layers_of_32, 4, 80);
  o.base_precision = trainer::precision::bf16;
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

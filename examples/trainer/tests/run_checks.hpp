// What the trainer's training tests share: the losses of a run's next steps, bitwise equality of
// loss and weight sequences, and scratch paths for checkpoints and run folders.
#pragma once

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "trainer.hpp"

namespace trainer_tests {

// The training losses of the run's next `steps` steps.
inline std::vector<double> train_losses(trainer::training_run& run, long steps) {
  std::vector<double> losses;
  for (long s = 0; s < steps; ++s) losses.push_back(run.train_step().train_loss);
  return losses;
}

// Bitwise equality of two loss sequences (== on doubles would also accept -0 == 0; these are losses).
inline bool identical(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

inline bool identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The path of `name` in `folder` (created) of the system's temporary directory. Test programs that
// may run at the same time use different folders.
inline std::string temporary_path(const std::string& name, const std::string& folder = "fp8_trainer_tests") {
  const auto dir = std::filesystem::temp_directory_path() / folder;
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

}  // namespace trainer_tests

// Per-GEMM tensor statistics for FP8 debugging: for each operand of each linear layer on a logging
// step, its amax, its scales, and the fractions of elements that saturated or were flushed to zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

namespace trainer {

struct tensor_stats {
  float amax = 0.0f;
  float scale_min = 0.0f;  // smallest and largest scale of the operand's blocks
  float scale_max = 0.0f;  // (equal for per-tensor scaling)
  double saturated = 0.0;  // fraction of elements with |x| * scale above the FP8 maximum (clamped)
  double flushed = 0.0;    // fraction of nonzero x whose FP8 code is zero (underflow)
};

// stats.csv: one row per (step, layer, operand).
class tensor_stats_log {
 public:
  // Opens `path` for writing; when resuming after `resume_step` > 0 steps, keeps the rows of the
  // earlier run up to that step and drops later ones, as csv_log does. Throws std::runtime_error
  // naming the file if it cannot be written.
  tensor_stats_log(const std::string& path, long resume_step);

  void set_step(long step) { step_ = step; }
  void add(const std::string& layer, const char* operand, const char* format, const char* mode,
           const char* granularity, const tensor_stats& stats);
  // Writes the rows added so far; throws std::runtime_error naming the file if a write failed.
  void flush();

 private:
  std::string path_;
  std::ofstream out_;
  long step_ = 0;
};

}  // namespace trainer

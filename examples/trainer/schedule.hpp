// The learning-rate schedule: linear warmup, then a cosine decay to a floor.
#pragma once

#include <cmath>

namespace trainer {

struct lr_schedule {
  float peak = 3e-3f;
  long warmup_steps = 0;
  long total_steps = 1;
  float final_fraction = 0.1f;  // the rate at the last step, as a fraction of the peak

  // Step 0 of warmup W runs at peak / W, step W - 1 at the peak; then cosine from the peak at step W
  // to peak * final_fraction at the last step. Example: peak 1e-3, W 10, total 110, floor 0.1:
  // step 0 -> 1e-4, step 9 -> 1e-3, step 60 -> 5.5e-4, step 109 -> 1e-4.
  float at(long step) const {
    if (step < warmup_steps) return peak * float(step + 1) / float(warmup_steps);
    const long decay_steps = total_steps - 1 - warmup_steps;
    const double progress = decay_steps > 0 ? double(step - warmup_steps) / double(decay_steps) : 1.0;
    const double clamped = progress > 1.0 ? 1.0 : progress;
    constexpr double pi = 3.14159265358979323846;
    const double cosine = 0.5 * (1.0 + std::cos(pi * clamped));
    return float(double(peak) * (double(final_fraction) + (1.0 - double(final_fraction)) * cosine));
  }
};

}  // namespace trainer

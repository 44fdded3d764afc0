// AdamW on the FP32 master weights (decoupled weight decay, bias-corrected moments), and global
// gradient-norm clipping.
#pragma once

#include <optional>

#include "parameters.hpp"

namespace trainer {

struct adamw_options {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float epsilon = 1e-8f;
  float weight_decay = 0.1f;  // applied to tensors with tensor_spec::weight_decay only
};

// The L2 norm of all gradients, summed in double in a fixed order.
double gradient_norm(const parameter_set& params);

// The factor clipping multiplies every gradient by: float(max_norm / norm) when norm > max_norm,
// else none (max_norm <= 0 disables clipping). One rule for both devices.
std::optional<float> clip_factor(double norm, double max_norm);

// Scales all gradients by clip_factor(norm, max_norm), if any.
void clip_gradients(parameter_set& params, double norm, double max_norm);

// One AdamW update at step `step` (0-based; bias correction uses step + 1):
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
//   w -= lr * (m / (1 - b1^(t)) / (sqrt(v / (1 - b2^(t))) + eps) + wd * w).
void adamw_update(parameter_set& params, const adamw_options& options, float learning_rate, long step);

}  // namespace trainer

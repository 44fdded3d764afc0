// AdamW and gradient clipping over the parameter buffers.
#include "adamw.hpp"

#include <cmath>

namespace trainer {

double gradient_norm(const parameter_set& params) {
  double sum = 0.0;
  for (float g : params.grad) sum += double(g) * double(g);
  return std::sqrt(sum);
}

std::optional<float> clip_factor(double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return std::nullopt;
  return float(max_norm / norm);
}

void clip_gradients(parameter_set& params, double norm, double max_norm) {
  const std::optional<float> factor = clip_factor(norm, max_norm);
  if (!factor) return;
  for (float& g : params.grad) g *= *factor;
}

void adamw_update(parameter_set& params, const adamw_options& options, float learning_rate, long step) {
  const double t = double(step + 1);
  const float correction1 = float(1.0 - std::pow(double(options.beta1), t));
  const float correction2 = float(1.0 - std::pow(double(options.beta2), t));
  for (std::size_t i = 0; i < params.tensor_count(); ++i) {
    const tensor_spec& spec = params.specs()[i];
    const float decay = spec.weight_decay ? options.weight_decay : 0.0f;
    const std::size_t begin = params.offset(i), end = begin + spec.size();
    for (std::size_t j = begin; j < end; ++j) {
      const float g = params.grad[j];
      float& m = params.adam_m[j];
      float& v = params.adam_v[j];
      m = options.beta1 * m + (1.0f - options.beta1) * g;
      v = options.beta2 * v + (1.0f - options.beta2) * g * g;
      const float m_hat = m / correction1;
      const float v_hat = v / correction2;
      params.master[j] -=
          learning_rate * (m_hat / (std::sqrt(v_hat) + options.epsilon) + decay * params.master[j]);
    }
  }
}

}  // namespace trainer

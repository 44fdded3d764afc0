// GELU forward and backward, elementwise.
#include "gelu.hpp"

#include <cmath>

namespace trainer {

namespace {
constexpr float sqrt_2_over_pi = 0.7978845608028654f;
constexpr float cubic_coefficient = 0.044715f;
}  // namespace

void gelu_forward(float* out, const float* inp, std::size_t count, storage out_storage) {
  for (std::size_t i = 0; i < count; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(sqrt_2_over_pi * (x + cubic_coefficient * x * x * x)));
  }
  store(out_storage, out, count);
}

void gelu_backward(float* dinp, const float* dout, const float* inp, std::size_t count,
                   storage dinp_storage) {
  for (std::size_t i = 0; i < count; ++i) {
    const float x = inp[i];
    const float u = sqrt_2_over_pi * (x + cubic_coefficient * x * x * x);
    const float th = std::tanh(u);
    const float du_dx = sqrt_2_over_pi * (1.0f + 3.0f * cubic_coefficient * x * x);
    dinp[i] = dout[i] * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du_dx);
  }
  store(dinp_storage, dinp, count);
}

}  // namespace trainer

// GELU forward and backward, elementwise.
#include "gelu.hpp"

#include <cmath>

namespace trainer {

void gelu_forward(float* out, const float* inp, std::size_t count, storage out_storage) {
  for (std::size_t i = 0; i < count; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(gelu_sqrt_2_over_pi * (x + gelu_cubic_coefficient * x * x * x)));
  }
  store(out_storage, out, count);
}

void gelu_backward(float* dinp, const float* dout, const float* inp, std::size_t count,
                   storage dinp_storage) {
  for (std::size_t i = 0; i < count; ++i) {
    const float x = inp[i];
    const float u = gelu_sqrt_2_over_pi * (x + gelu_cubic_coefficient * x * x * x);
    const float th = std::tanh(u);
    const float du_dx = gelu_sqrt_2_over_pi * (1.0f + 3.0f * gelu_cubic_coefficient * x * x);
    dinp[i] = dout[i] * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du_dx);
  }
  store(dinp_storage, dinp, count);
}

}  // namespace trainer

// SwiGLU forward and backward, elementwise per token.
#include "swiglu.hpp"

#include <cmath>
#include <cstddef>

#include "parallel.hpp"

namespace trainer {

namespace {
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
}  // namespace

void swiglu_forward(float* out, const float* inp, int n, int f, storage out_storage) {
  FP8_TRAINER_PARALLEL_FOR
  for (int row = 0; row < n; ++row) {
    const float* gate = inp + std::size_t(row) * 2 * std::size_t(f);
    const float* up = gate + f;
    float* y = out + std::size_t(row) * std::size_t(f);
    for (int j = 0; j < f; ++j) y[j] = gate[j] * sigmoid(gate[j]) * up[j];
  }
  store(out_storage, out, std::size_t(n) * std::size_t(f));
}

void swiglu_backward(float* dinp, const float* dout, const float* inp, int n, int f, storage dinp_storage) {
  FP8_TRAINER_PARALLEL_FOR
  for (int row = 0; row < n; ++row) {
    const float* gate = inp + std::size_t(row) * 2 * std::size_t(f);
    const float* up = gate + f;
    const float* dy = dout + std::size_t(row) * std::size_t(f);
    float* dgate = dinp + std::size_t(row) * 2 * std::size_t(f);
    float* dup = dgate + f;
    for (int j = 0; j < f; ++j) {
      const float s = sigmoid(gate[j]);
      dgate[j] = dy[j] * up[j] * s * (1.0f + gate[j] * (1.0f - s));
      dup[j] = dy[j] * gate[j] * s;
    }
  }
  store(dinp_storage, dinp, std::size_t(n) * 2 * std::size_t(f));
}

}  // namespace trainer

// GELU (tanh approximation, as GPT-2 and llm.c use), the activation of the small MLP model:
// gelu(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
#pragma once

#include <cstddef>

#include "precision.hpp"

namespace trainer {

// The tanh approximation's constants, shared with the device twin (cuda/gelu.cu).
inline constexpr float gelu_sqrt_2_over_pi = 0.7978845608028654f;
inline constexpr float gelu_cubic_coefficient = 0.044715f;

// out[i] = gelu(inp[i]) for i < count.
void gelu_forward(float* out, const float* inp, std::size_t count, storage out_storage);

// dinp[i] = gelu'(inp[i]) * dout[i] (overwritten).
void gelu_backward(float* dinp, const float* dout, const float* inp, std::size_t count, storage dinp_storage);

}  // namespace trainer

// RMSNorm (LLaMA's normalisation): y = x / sqrt(mean(x^2) + eps) * weight, forward and backward.
// Shapes: N rows (tokens) of C channels.
#pragma once

#include "precision.hpp"

namespace trainer {

inline constexpr float rmsnorm_epsilon = 1e-5f;

// out[N, C] = inp[N, C] * rstd[N] * weight[C], with rstd[N] = 1 / sqrt(mean_c(inp^2) + eps) kept
// for the backward pass. `out` is stored in `out_storage`.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int n, int c,
                     storage out_storage);

// dinp[N, C] += d(out)/d(inp) . dout; dweight[C] += sum over rows of dout * inp * rstd.
// With normalised n = inp * rstd and g = dout * weight: dinp = rstd * (g - n * mean_c(g * n)).
// `dinp` is accumulated (it is the residual stream's gradient) and then stored in `dinp_storage`.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int n, int c, storage dinp_storage);

}  // namespace trainer

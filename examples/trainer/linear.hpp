// A linear layer without bias, Y = X W^T, and its backward pass: the three GEMMs (fprop, dgrad,
// wgrad) that the precision policy and the FP8 recipes act on.
#pragma once

#include <cstddef>

#include "pass_context.hpp"

namespace trainer {

// Which linear layer this is: its precision unit (for per-layer overrides) and its index in the
// scaling state (one entry per linear layer, six FP8 operands each).
struct linear_site {
  int unit = 0;
  std::size_t scaling_index = 0;
};

// y[M, N] = x[M, K] . w[N, K]^T   (fprop), stored in the activation precision.
void linear_forward(const pass_context& pass, const linear_site& site, float* y, const float* x,
                    const float* w, int m, int k, int n);

// dx[M, K] = dy[M, N] . w[N, K]  (dgrad, overwritten, activation precision);
// dw[N, K] += dy^T[N, M] . x[M, K]  (wgrad, accumulated in FP32 into the master gradient, as
// Transformer Engine's fused wgrad accumulation does).
void linear_backward(const pass_context& pass, const linear_site& site, float* dx, float* dw, const float* dy,
                     const float* x, const float* w, int m, int k, int n);

}  // namespace trainer

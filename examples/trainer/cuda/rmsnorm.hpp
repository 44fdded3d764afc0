// RMSNorm on the device: y = x / sqrt(mean(x^2) + eps) * weight, forward and backward. Mirrors
// ../rmsnorm.hpp (same shapes, same epsilon, same storage rule); all pointers are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "../precision.hpp"
#include "../rmsnorm.hpp"
#include "fp8_output.hpp"

namespace trainer::cuda {

// out[N, C] = inp[N, C] * rstd[N] * weight[C], rstd[N] = 1 / sqrt(mean_c(inp^2) + eps) kept for the
// backward pass; `out` is stored in `out_storage`. One block per row.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int n, int c,
                     storage out_storage, cudaStream_t stream);

// The BF16 form (bf16 and fp8 runs, where the output feeds a linear layer, which reads BF16): out is
// raw __nv_bfloat16 bits, each the float form's value with storage::bf16 (the same kernel), so its
// bits equal what to_bf16 makes of the float form's output. rstd stays float. out_amax (or null):
// max |out| max-accumulated into it as the kernel writes out (fp8::cuda::amax_tracker; zero it
// first), for the linear layer that reads out (its x_amax).
void rmsnorm_forward(std::uint16_t* out, float* rstd, const float* inp, const float* weight, int n, int c,
                     cudaStream_t stream, float* out_amax = nullptr);
// The FP8 form (fp8 runs, where wqkv or w_gate_up takes its X as codes written here: the layer only
// transposes them): out written as FP8 codes (fp8_output) of the BF16 form's values, the codes the
// layer's cast of those values would make, bit for bit; the amax recorded into out.amax (when set)
// is the BF16 form's. rstd as the other forms'.
void rmsnorm_forward(const fp8_output& out, float* rstd, const float* inp, const float* weight, int n, int c,
                     cudaStream_t stream);

// Rows summed per partial weight-gradient row of the backward pass's workspace.
inline constexpr int rmsnorm_rows_per_partial = 64;

// Floats of device workspace rmsnorm_backward needs: [ceil(N / 64), C] partial weight gradients.
inline std::size_t rmsnorm_backward_workspace_size(int n, int c) {
  const std::size_t partials = (std::size_t(n) + rmsnorm_rows_per_partial - 1) / rmsnorm_rows_per_partial;
  return partials * std::size_t(c);
}

// dinp[N, C] += d(out)/d(inp) . dout, then stored in `dinp_storage`; dweight[C] += sum over rows of
// dout * inp * rstd. With n = inp * rstd and g = dout * weight: dinp = rstd * (g - n * mean_c(g * n)).
// The weight gradient is summed in a fixed order (64-row partials, then the partials in order), so it
// is reproducible, without atomics. workspace: rmsnorm_backward_workspace_size(n, c) floats.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int n, int c, storage dinp_storage, float* workspace,
                      cudaStream_t stream);
// The same with dout as raw __nv_bfloat16 bits (the BF16 dx a linear layer writes, read as it is):
// the float form's results given dout's widened values, bit for bit.
void rmsnorm_backward(float* dinp, float* dweight, const std::uint16_t* dout, const float* inp,
                      const float* weight, const float* rstd, int n, int c, storage dinp_storage,
                      float* workspace, cudaStream_t stream);

}  // namespace trainer::cuda

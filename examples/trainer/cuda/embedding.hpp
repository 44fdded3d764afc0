// Token embedding on the device: the lookup of one row of a [V, C] table per token, and its
// backward (a scatter-add into the table's gradient). Mirrors ../embedding.hpp; all pointers are
// device pointers, and the work is queued on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace trainer::cuda {

// out: [N, C] = table[tokens[n], :]; table: [V, C] (already in the compute precision); tokens: [N].
// A token outside [0, V) gives a row of NaN (so the loss reports it) instead of reading out of bounds.
void embedding_forward(float* out, const float* table, const std::int32_t* tokens, int n, int c, int v,
                       cudaStream_t stream);

// dtable: [V, C] += dout[n, :] at row tokens[n], for n in token order per table element: the same
// additions in the same order as the CPU layer, so the result is bit-identical and reproducible (no
// atomics). Tokens outside [0, V) add nothing.
void embedding_backward(float* dtable, const float* dout, const std::int32_t* tokens, int n, int c, int v,
                        cudaStream_t stream);

}  // namespace trainer::cuda

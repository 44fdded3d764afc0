// GELU (tanh approximation) on the device, forward and backward: the MLP model's activation.
// Mirrors ../gelu.hpp (same formula, constants and storage rule); all pointers are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "../precision.hpp"

namespace trainer::cuda {

// out[i] = gelu(inp[i]) for i < count, stored in `out_storage`; out may alias inp.
void gelu_forward(float* out, const float* inp, std::size_t count, storage out_storage, cudaStream_t stream);

// dinp[i] = gelu'(inp[i]) * dout[i] (overwritten), stored in `dinp_storage`.
void gelu_backward(float* dinp, const float* dout, const float* inp, std::size_t count, storage dinp_storage,
                   cudaStream_t stream);

}  // namespace trainer::cuda

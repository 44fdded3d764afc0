// The BF16 rounding of stored tensors and compute weights on the device: the CUDA form of
// trainer::round_to_bf16 and trainer::store (precision.hpp), bit-identical to them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "../precision.hpp"

namespace trainer::cuda {

// data: [count], rounded in place to the nearest BF16 value (ties to even; NaN -> canonical NaN).
void round_to_bf16(float* data, std::size_t count, cudaStream_t stream);

// Applies a storage precision to a freshly computed buffer: rounds when `where` is storage::bf16.
void store(storage where, float* data, std::size_t count, cudaStream_t stream);

// out: [count] = in, rounded when `where` is storage::bf16 (the compute copy of the master weights).
void store_copy(storage where, float* out, const float* in, std::size_t count, cudaStream_t stream);

}  // namespace trainer::cuda

// A residual connection on the device: out = a + b, stored in the activation precision (the CPU
// trainer's residual_forward in ../transformer.cpp). Its backward needs no kernel: the residual
// stream's gradient is passed on as it is, and RMSNorm's backward accumulates into it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "../precision.hpp"

namespace trainer::cuda {

// out: [count] = a + b, stored in `stored`; out may alias a or b.
void residual_forward(float* out, const float* a, const float* b, std::size_t count, storage stored,
                      cudaStream_t stream);
// The same with b as raw __nv_bfloat16 bits (a linear layer's BF16 output, read as it is): the
// values of the float form given b's widened values (which a staging copy would make), bit for bit.
void residual_forward(float* out, const float* a, const std::uint16_t* b, std::size_t count, storage stored,
                      cudaStream_t stream);

}  // namespace trainer::cuda

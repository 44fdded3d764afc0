// The BF16 rounding of stored tensors and compute weights on the device: the CUDA form of
// trainer::round_to_bf16 and trainer::store (precision.hpp), bit-identical to them; and the copies
// of float tensors into the BF16 or FP8 operands of linear layers (the staging copies).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "../precision.hpp"
#include "fp8_output.hpp"

namespace trainer::cuda {

// data: [count], rounded in place to the nearest BF16 value (ties to even; NaN -> canonical NaN).
void round_to_bf16(float* data, std::size_t count, cudaStream_t stream);

// Applies a storage precision to a freshly computed buffer: rounds when `where` is storage::bf16.
void store(storage where, float* data, std::size_t count, cudaStream_t stream);

// out: [count] = in, rounded when `where` is storage::bf16 (the compute copy of the master weights).
void store_copy(storage where, float* out, const float* in, std::size_t count, cudaStream_t stream);

// out: [count] raw __nv_bfloat16 bits of in: [count], rounded to nearest even. Exact when the floats
// hold BF16 values (every stored tensor of a bf16 or fp8 run): the operands of BF16 and FP8 products.
// amax (or null): max |out| max-accumulated into it as the copy is written (fp8::cuda::amax_tracker;
// zero it first), for the linear layer that reads out.
void to_bf16(std::uint16_t* out, const float* in, std::size_t count, cudaStream_t stream,
             float* amax = nullptr);

// The staging copy straight to a linear layer's FP8 codes (fp8_output), where the layer takes them:
// out.codes[count] are the codes the layer's cast makes of to_bf16's copy of in, and the amax
// recorded into out.amax (when set) is that copy's, bit for bit.
void to_fp8(const fp8_output& out, const float* in, std::size_t count, cudaStream_t stream);

// out: [count] = the BF16 values in: [count] (raw __nv_bfloat16 bits) as floats, exactly.
void from_bf16(float* out, const std::uint16_t* in, std::size_t count, cudaStream_t stream);

}  // namespace trainer::cuda

// SwiGLU on the device: out = silu(gate) * up, silu(g) = g * sigmoid(g). Mirrors ../swiglu.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../precision.hpp"
#include "fp8_output.hpp"

namespace trainer::cuda {

// inp: [N, 2F], per token gate (F values) then up (F values); out: [N, F], stored in `out_storage`.
void swiglu_forward(float* out, const float* inp, int n, int f, storage out_storage, cudaStream_t stream);

// dinp: [N, 2F] (overwritten), stored in `dinp_storage`; dout: [N, F].
// d gate = dout * up * sigmoid(g) * (1 + g * (1 - sigmoid(g))),  d up = dout * silu(g).
void swiglu_backward(float* dinp, const float* dout, const float* inp, int n, int f, storage dinp_storage,
                     cudaStream_t stream);

// The BF16 forms (bf16 and fp8 runs, whose MLP keeps these tensors as the linear layers read and
// write them): every buffer raw __nv_bfloat16 bits, results rounded as storage::bf16 rounds them.
// The same kernels as the float forms: the values equal theirs with BF16 storage, bit for bit.
// out_amax / dinp_amax (or null): the amax of the tensor written, max-accumulated into it as the
// kernel writes (fp8::cuda::amax_tracker; zero it first), for the linear layer that reads it.
void swiglu_forward(std::uint16_t* out, const std::uint16_t* inp, int n, int f, cudaStream_t stream,
                    float* out_amax = nullptr);
void swiglu_backward(std::uint16_t* dinp, const std::uint16_t* dout, const std::uint16_t* inp, int n, int f,
                     cudaStream_t stream, float* dinp_amax = nullptr);

// The FP8 forms (fp8 runs, where w_down takes its X and w_gate_up its dY as codes written here: the
// layer only transposes them): inputs as the BF16 forms', the result written as FP8 codes
// (fp8_output) of the BF16 form's values, which are the codes the layer's cast of those values
// would make, bit for bit; the amax recorded into the output's (when set) is the BF16 form's.
void swiglu_forward(const fp8_output& out, const std::uint16_t* inp, int n, int f, cudaStream_t stream);
void swiglu_backward(const fp8_output& dinp, const std::uint16_t* dout, const std::uint16_t* inp, int n,
                     int f, cudaStream_t stream);

}  // namespace trainer::cuda

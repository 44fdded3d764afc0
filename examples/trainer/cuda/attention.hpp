// Causal multi-head self-attention with rotary positions on the device, forward and backward.
// Mirrors ../attention.hpp: the same buffers, shapes and storage rules, with the products through
// cuBLAS (batched over sequences x heads) and the causal softmax and its backward as kernels.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "../attention.hpp"
#include "../precision.hpp"
#include "device_buffer.hpp"
#include "rope.hpp"

namespace trainer::cuda {

// Scratch buffers of attention for one shape, reused by every layer and every pass (nothing in them
// outlives a call). BF16 buffers hold raw __nv_bfloat16 bits; they are used only in gemm_mode::bf16.
class attention_workspace {
 public:
  explicit attention_workspace(const attention_shape& shape);
  const attention_shape& shape() const { return shape_; }

  device_buffer<std::uint16_t> qkv_bf16;     // [3, B, H, T, D] q, k (rotated) and v as BF16 operands
  device_buffer<std::uint16_t> square_bf16;  // [B, H, T, T]    P (forward, dV) or dS (dq, dk) as BF16
  device_buffer<float> heads;                // [B, H, T, D]    y = P v (forward) or dO (backward)
  device_buffer<std::uint16_t> heads_bf16;   // [B, H, T, D]    dO as BF16
  device_buffer<float> dqkv;                 // [3, B, H, T, D] dq, dk, dv per head
  device_buffer<float> square;               // [B, H, T, T]    dP, then dS

 private:
  attention_shape shape_;
};

// inp:  [B, T, 3C]       the QKV projection: per token q (C), k (C), v (C); each is H heads of D.
// qkvr: [3, B, H, T, D]  q and k after RoPE, and v, per head (kept for the backward pass).
// att:  [B, H, T, T]     softmax probabilities (row t attends to columns <= t; the rest is 0).
// out:  [B, T, C]        heads merged back.
// The products run in `mode` (fp32 or bf16; in bf16 the operands must hold BF16 values, which the
// storage policy ensures); scores and softmax are FP32; stored tensors are kept in `stored`.
// `rope` must have T positions of D dimensions, `workspace` this shape.
void attention_forward(float* out, float* qkvr, float* att, const float* inp, const device_rope_table& rope,
                       const attention_shape& shape, gemm_mode mode, storage stored,
                       attention_workspace& workspace, cublasHandle_t handle, cudaStream_t stream);

// dinp: [B, T, 3C] (overwritten); dout: [B, T, C]; qkvr and att from the forward pass.
// With S = q k^T / sqrt(D), P = softmax(S): dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)),
// dq = dS k / sqrt(D), dk = dS^T q / sqrt(D) (the scale is folded into dS, as on the CPU), then the
// inverse rotation of RoPE on dq and dk.
void attention_backward(float* dinp, const float* dout, const float* qkvr, const float* att,
                        const device_rope_table& rope, const attention_shape& shape, gemm_mode mode,
                        storage stored, attention_workspace& workspace, cublasHandle_t handle,
                        cudaStream_t stream);

}  // namespace trainer::cuda

// Causal multi-head self-attention with rotary positions on the device, forward and backward.
// Mirrors ../attention.hpp: the same buffers, shapes and storage rules, with the products through
// cuBLAS (batched over sequences x heads) and the causal softmax and its backward as kernels. Beside
// it, the fused path: the same layer through cuDNN's flash attention (cudnn_attention.hpp), which keeps
// no T x T matrix in memory.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "../attention.hpp"
#include "../options.hpp"
#include "../precision.hpp"
#include "cudnn_attention.hpp"
#include "device_buffer.hpp"
#include "rope.hpp"

namespace trainer::cuda {

// A model's attention path: --attention resolved for its run.
struct attention_path {
  attention_kernel kernel = attention_kernel::materialized;  // never automatic
  std::string description;                                   // which, and why where automatic chose
  std::unique_ptr<cudnn_attention> fused;                    // the cuDNN graphs of the fused path
};

// Resolves `requested` for attention products in `mode` (fp32 or bf16) at `shape`: materialized as
// asked; fused builds cuDNN's graphs and throws fp8::invalid_argument in fp32 mode, fp8::error where
// this build or cuDNN has none for the shape or device; automatic takes fused where that succeeds in
// bf16 mode, else materialized, and says why in the description.
attention_path choose_attention(attention_kernel requested, gemm_mode mode, const attention_shape& shape);

// Scratch buffers of the materialised path for one shape, reused by every layer and every pass
// (nothing in them outlives a call). BF16 buffers hold raw __nv_bfloat16 bits; they are used only in
// gemm_mode::bf16. `kernel` (materialized or fused) says which path the workspace serves. The fused
// path keeps its tensors in the model's BF16 buffers and needs none of these (nothing T x T: the
// memory it saves): its workspace is empty.
class attention_workspace {
 public:
  explicit attention_workspace(const attention_shape& shape,
                               attention_kernel kernel = attention_kernel::materialized);
  const attention_shape& shape() const { return shape_; }
  attention_kernel kernel() const { return kernel_; }

  device_buffer<std::uint16_t> qkv_bf16;     // [3, B, H, T, D] q, k (rotated) and v as BF16 operands
  device_buffer<std::uint16_t> square_bf16;  // [B, H, T, T]    P (forward, dV) or dS (dq, dk) as BF16
  device_buffer<float> heads;                // [B, H, T, D]    y = P v (forward) or dO (backward)
  device_buffer<std::uint16_t> heads_bf16;   // [B, H, T, D]    dO as BF16
  device_buffer<float> dqkv;                 // [3, B, H, T, D] dq, dk, dv per head
  device_buffer<float> square;               // [B, H, T, T]    dP, then dS

 private:
  attention_shape shape_;
  attention_kernel kernel_;
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

// The fused path, through `kernels` (cuDNN's graphs made for this shape; null is refused), in the
// token layout throughout and on BF16 tensors (raw __nv_bfloat16 bits) only: cuDNN reads q, k, v and
// writes o through strides, so no head is split out or merged back, and the linear layers around it
// read and write these tensors as they are (no float copy, no staging).
// Forward: qkv16: [B, T, 3C], wqkv's output on entry; q and k are turned by RoPE in place (in FP32,
// then rounded to BF16 as the materialised path stores them), v is left as it is, and the result is
// kept for the backward pass in place of qkvr. out16: [B, T, C] the heads' outputs (wo's x, also kept
// for the backward pass), stats: [B, H, T] each score row's log-sum-exp (kept in place of att). The
// probabilities are rounded to BF16 inside cuDNN before they are normalised (the materialised bf16
// path rounds them after).
void fused_attention_forward(std::uint16_t* out16, float* stats, std::uint16_t* qkv16,
                             const device_rope_table& rope, const attention_shape& shape,
                             cudnn_attention* kernels, cudaStream_t stream);

// dinp16: [B, T, 3C] (overwritten; wqkv's dy) from dout16: [B, T, C] (wo's dx) and the forward pass's
// qkv16, out16 and stats. cuDNN writes dq, dk, dv into dinp16; dq and dk are then turned back in
// place (RoPE's inverse rotation, in FP32) and rounded to BF16, dv stays as cuDNN wrote it.
void fused_attention_backward(std::uint16_t* dinp16, const std::uint16_t* dout16, const std::uint16_t* qkv16,
                              const std::uint16_t* out16, const float* stats, const device_rope_table& rope,
                              const attention_shape& shape, cudnn_attention* kernels, cudaStream_t stream);

}  // namespace trainer::cuda

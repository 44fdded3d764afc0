// Causal multi-head self-attention with rotary positions, forward and backward. Shapes: B sequences
// of T tokens, C channels = H heads of D = C / H dimensions.
#pragma once

#include "precision.hpp"
#include "rope.hpp"

namespace trainer {

struct attention_shape {
  int batch = 0;     // B
  int context = 0;   // T
  int channels = 0;  // C
  int heads = 0;     // H
  int head_dim() const { return channels / heads; }
};

// inp:  [B, T, 3C]   the QKV projection: per token q (C), k (C), v (C); each is H heads of D.
// qkvr: [3, B, H, T, D]  q and k after RoPE, and v, per head (kept for the backward pass).
// att:  [B, H, T, T] softmax probabilities (row t attends to columns <= t; the rest is 0).
// out:  [B, T, C]    heads merged back.
// GEMMs (scores and values) run in `mode` (fp32 or bf16); scores and softmax stay FP32 and the
// probabilities, like every stored tensor, are kept in `storage`, as a flash-attention kernel does.
void attention_forward(float* out, float* qkvr, float* att, const float* inp, const rope_table& rope,
                       const attention_shape& shape, gemm_mode mode, storage stored);

// dinp: [B, T, 3C] (overwritten); dout: [B, T, C]; qkvr and att from the forward pass.
// With S = q k^T / sqrt(D), P = softmax(S): dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)),
// dq = dS k / sqrt(D), dk = dS^T q / sqrt(D), then the inverse rotation of RoPE on dq and dk.
void attention_backward(float* dinp, const float* dout, const float* qkvr, const float* att,
                        const rope_table& rope, const attention_shape& shape, gemm_mode mode, storage stored);

}  // namespace trainer

// Attention, one (sequence, head) pair at a time: the pairs are independent, so they run in parallel
// and each writes only its own slice.
#include "attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "gemm.hpp"
#include "parallel.hpp"

namespace trainer {

namespace {
std::size_t index4(int a, int b, int c, int d, int nb, int nc, int nd) {
  return ((std::size_t(a) * std::size_t(nb) + std::size_t(b)) * std::size_t(nc) + std::size_t(c)) *
             std::size_t(nd) +
         std::size_t(d);
}
}  // namespace

void attention_forward(float* out, float* qkvr, float* att, const float* inp, const rope_table& rope,
                       const attention_shape& shape, gemm_mode mode, storage stored) {
  const int B = shape.batch, T = shape.context, C = shape.channels, H = shape.heads;
  const int D = shape.head_dim();
  const std::size_t head_block = std::size_t(B) * std::size_t(H) * std::size_t(T) * std::size_t(D);
  float* q = qkvr;                   // [B, H, T, D]
  float* k = qkvr + head_block;      // [B, H, T, D]
  float* v = qkvr + 2 * head_block;  // [B, H, T, D]

  // 1. Split the heads out of [B, T, 3C] and rotate q and k.
  FP8_TRAINER_PARALLEL_FOR
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const float* token = inp + (std::size_t(b) * std::size_t(T) + std::size_t(t)) * 3 * std::size_t(C);
      for (int h = 0; h < H; ++h) {
        const std::size_t at = index4(b, h, t, 0, H, T, D);
        for (int d = 0; d < D; ++d) {
          q[at + std::size_t(d)] = token[std::size_t(h * D + d)];
          k[at + std::size_t(d)] = token[std::size_t(C + h * D + d)];
          v[at + std::size_t(d)] = token[std::size_t(2 * C + h * D + d)];
        }
        rope_forward(q + at, rope, t);
        rope_forward(k + at, rope, t);
      }
    }
  }
  store(stored, qkvr, 2 * head_block);  // q and k after the rotation; v is already stored

  // 2. Per (sequence, head): P = softmax(q k^T / sqrt(D)) with a causal mask, then P v.
  const float scale = 1.0f / std::sqrt(float(D));
  FP8_TRAINER_PARALLEL_FOR
  for (int bh = 0; bh < B * H; ++bh) {
    const int b = bh / H, h = bh % H;
    const std::size_t at = std::size_t(bh) * std::size_t(T) * std::size_t(D);
    float* p = att + std::size_t(bh) * std::size_t(T) * std::size_t(T);  // [T, T]
    gemm_call scores;
    scores.mode = mode;
    scores.a = {q + at, T, D};
    scores.b = {k + at, T, D};
    scores.c = p;
    gemm(scores);
    for (int i = 0; i < T; ++i) {
      float* row = p + std::size_t(i) * std::size_t(T);
      float row_max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j <= i; ++j) row_max = std::max(row_max, row[j] * scale);
      float sum = 0.0f;
      for (int j = 0; j <= i; ++j) {
        row[j] = std::exp(row[j] * scale - row_max);
        sum += row[j];
      }
      for (int j = 0; j <= i; ++j) row[j] /= sum;
      for (int j = i + 1; j < T; ++j) row[j] = 0.0f;
    }
    store(stored, p, std::size_t(T) * std::size_t(T));

    std::vector<float> y(std::size_t(T) * std::size_t(D));  // [T, D]
    gemm_call values;
    values.mode = mode;
    values.a = {p, T, T};
    values.b = {v + at, T, D, /*transposed=*/true};
    values.c = y.data();
    values.out = stored;
    gemm(values);
    for (int t = 0; t < T; ++t) {
      float* dst =
          out + (std::size_t(b) * std::size_t(T) + std::size_t(t)) * std::size_t(C) + std::size_t(h * D);
      for (int d = 0; d < D; ++d) dst[d] = y[std::size_t(t) * std::size_t(D) + std::size_t(d)];
    }
  }
}

void attention_backward(float* dinp, const float* dout, const float* qkvr, const float* att,
                        const rope_table& rope, const attention_shape& shape, gemm_mode mode,
                        storage stored) {
  const int B = shape.batch, T = shape.context, C = shape.channels, H = shape.heads;
  const int D = shape.head_dim();
  const std::size_t head_block = std::size_t(B) * std::size_t(H) * std::size_t(T) * std::size_t(D);
  const float* q = qkvr;
  const float* k = qkvr + head_block;
  const float* v = qkvr + 2 * head_block;
  const float scale = 1.0f / std::sqrt(float(D));

  FP8_TRAINER_PARALLEL_FOR
  for (int bh = 0; bh < B * H; ++bh) {
    const int b = bh / H, h = bh % H;
    const std::size_t at = std::size_t(bh) * std::size_t(T) * std::size_t(D);
    const float* p = att + std::size_t(bh) * std::size_t(T) * std::size_t(T);
    const std::size_t td = std::size_t(T) * std::size_t(D);
    std::vector<float> dy(td), dq(td), dk(td), dv(td);       // [T, D] each
    std::vector<float> ds(std::size_t(T) * std::size_t(T));  // [T, T]
    for (int t = 0; t < T; ++t) {
      const float* src =
          dout + (std::size_t(b) * std::size_t(T) + std::size_t(t)) * std::size_t(C) + std::size_t(h * D);
      for (int d = 0; d < D; ++d) dy[std::size_t(t) * std::size_t(D) + std::size_t(d)] = src[d];
    }
    // dV[T, D] = P^T dO
    gemm_call dvalues;
    dvalues.mode = mode;
    dvalues.a = {p, T, T, /*transposed=*/true};
    dvalues.b = {dy.data(), T, D, /*transposed=*/true};
    dvalues.c = dv.data();
    dvalues.out = stored;
    gemm(dvalues);
    // dP[T, T] = dO V^T, kept in FP32 like the scores.
    gemm_call dprobs;
    dprobs.mode = mode;
    dprobs.a = {dy.data(), T, D};
    dprobs.b = {v + at, T, D};
    dprobs.c = ds.data();
    gemm(dprobs);
    // dS = P (dP - sum_j P dP) * scale, row by row (the softmax backward).
    for (int i = 0; i < T; ++i) {
      const float* p_row = p + std::size_t(i) * std::size_t(T);
      float* row = ds.data() + std::size_t(i) * std::size_t(T);
      float dot = 0.0f;
      for (int j = 0; j <= i; ++j) dot += p_row[j] * row[j];
      for (int j = 0; j <= i; ++j) row[j] = p_row[j] * (row[j] - dot) * scale;
      for (int j = i + 1; j < T; ++j) row[j] = 0.0f;
    }
    store(stored, ds.data(), ds.size());
    // dq[T, D] = dS k, dk[T, D] = dS^T q (FP32 here: the inverse rotation follows, then one rounding)
    gemm_call dquery;
    dquery.mode = mode;
    dquery.a = {ds.data(), T, T};
    dquery.b = {k + at, T, D, /*transposed=*/true};
    dquery.c = dq.data();
    gemm(dquery);
    gemm_call dkey;
    dkey.mode = mode;
    dkey.a = {ds.data(), T, T, /*transposed=*/true};
    dkey.b = {q + at, T, D, /*transposed=*/true};
    dkey.c = dk.data();
    gemm(dkey);
    for (int t = 0; t < T; ++t) {
      float* dq_t = dq.data() + std::size_t(t) * std::size_t(D);
      float* dk_t = dk.data() + std::size_t(t) * std::size_t(D);
      rope_backward(dq_t, rope, t);
      rope_backward(dk_t, rope, t);
      float* token = dinp + (std::size_t(b) * std::size_t(T) + std::size_t(t)) * 3 * std::size_t(C);
      for (int d = 0; d < D; ++d) {
        token[std::size_t(h * D + d)] = dq_t[d];
        token[std::size_t(C + h * D + d)] = dk_t[d];
        token[std::size_t(2 * C + h * D + d)] = dv[std::size_t(t) * std::size_t(D) + std::size_t(d)];
      }
    }
  }
  store(stored, dinp, std::size_t(B) * std::size_t(T) * 3 * std::size_t(C));
}

}  // namespace trainer

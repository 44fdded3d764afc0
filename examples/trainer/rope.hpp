// Rotary position embedding (RoPE, as in LLaMA): each query/key head vector is rotated pairwise by
// angles proportional to its position, so attention scores depend on relative positions only.
#pragma once

#include <vector>

namespace trainer {

inline constexpr double rope_base = 10000.0;

// cos and sin of every (position, frequency) pair: [T, D/2] each.
// Pair i of a head vector is (x[i], x[i + D/2]) ("rotate half" layout) and turns by
// angle = position * rope_base^(-2i/D). Example, D = 4, position 3: pair 0 turns by 3 rad, pair 1 by
// 3 / 100 rad.
struct rope_table {
  int context = 0;
  int head_dim = 0;
  std::vector<float> cos;  // [T, D/2]
  std::vector<float> sin;  // [T, D/2]
};

rope_table make_rope_table(int context, int head_dim);

// Rotates one head vector x[D] at `position` in place.
void rope_forward(float* x, const rope_table& table, int position);

// The backward of a rotation is the rotation by the opposite angle: dx = R^T dy, in place.
void rope_backward(float* dx, const rope_table& table, int position);

}  // namespace trainer

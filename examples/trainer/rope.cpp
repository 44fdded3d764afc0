// RoPE tables and the per-vector rotation.
#include "rope.hpp"

#include <cmath>
#include <cstddef>
#include <stdexcept>

namespace trainer {

rope_table make_rope_table(int context, int head_dim) {
  if (head_dim % 2 != 0) throw std::invalid_argument("RoPE needs an even head dimension");
  rope_table table;
  table.context = context;
  table.head_dim = head_dim;
  const int half = head_dim / 2;
  table.cos.resize(std::size_t(context) * std::size_t(half));
  table.sin.resize(table.cos.size());
  for (int t = 0; t < context; ++t) {
    for (int i = 0; i < half; ++i) {
      const double angle = double(t) * std::pow(rope_base, -2.0 * double(i) / double(head_dim));
      table.cos[std::size_t(t) * std::size_t(half) + std::size_t(i)] = float(std::cos(angle));
      table.sin[std::size_t(t) * std::size_t(half) + std::size_t(i)] = float(std::sin(angle));
    }
  }
  return table;
}

namespace {
// (a, b) -> (a cos - b sin, a sin + b cos) for every pair, with sin negated when `inverse`.
void rotate(float* x, const rope_table& table, int position, float sin_sign) {
  const int half = table.head_dim / 2;
  const float* cos_row = table.cos.data() + std::size_t(position) * std::size_t(half);
  const float* sin_row = table.sin.data() + std::size_t(position) * std::size_t(half);
  for (int i = 0; i < half; ++i) {
    const float a = x[i];
    const float b = x[i + half];
    const float s = sin_sign * sin_row[i];
    x[i] = a * cos_row[i] - b * s;
    x[i + half] = a * s + b * cos_row[i];
  }
}
}  // namespace

void rope_forward(float* x, const rope_table& table, int position) { rotate(x, table, position, 1.0f); }

void rope_backward(float* dx, const rope_table& table, int position) { rotate(dx, table, position, -1.0f); }

}  // namespace trainer

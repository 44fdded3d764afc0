// Rotary position embedding on the device. The table is the CPU layer's (../rope.hpp), computed on
// the host in double and copied, so both devices rotate by bit-identical cos and sin values.
#pragma once

#include <cuda_runtime_api.h>

#include "../precision.hpp"
#include "../rope.hpp"
#include "device_buffer.hpp"

namespace trainer::cuda {

// The device copy of a rope_table: cos and sin of every (position, frequency) pair, [T, D/2] each.
struct device_rope_table {
  explicit device_rope_table(const rope_table& host)
      : context(host.context), head_dim(host.head_dim), cos(host.cos), sin(host.sin) {}

  int context = 0;           // T
  int head_dim = 0;          // D
  device_buffer<float> cos;  // [T, D/2]
  device_buffer<float> sin;  // [T, D/2]
};

// Throws fp8::invalid_argument, naming `function`, unless the table has an even head dimension, a
// context of at least 1 and T * D/2 values in each of cos and sin (what every rotation reads).
void check_rope_table(const char* function, const device_rope_table& table);

// x: [G, T, D], G groups (for attention: sequences x heads, for q and k together) of T head vectors
// whose row t sits at position t. Rotates every vector in place ("rotate half" pairs (i, i + D/2)),
// as ../rope.hpp's rope_forward does to one vector, and stores the result in `stored`.
void rope_forward(float* x, const device_rope_table& table, int groups, storage stored, cudaStream_t stream);

// The inverse rotation (the backward pass: dx = R^T dy), in place on dx: [G, T, D].
void rope_backward(float* dx, const device_rope_table& table, int groups, storage stored,
                   cudaStream_t stream);

}  // namespace trainer::cuda

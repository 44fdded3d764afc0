// RoPE: one thread per rotated pair, grid-stride.
#include "rope.hpp"

#include <cstddef>
#include <string>

#include "kernel_support.cuh"
#include "rope_pair.cuh"

namespace trainer::cuda {

namespace {

// x: [G, T, D]; cos, sin: [T, D/2]. Pair (i, i + D/2) of vector (g, t) turns by angle t * base^(-2i/D),
// clockwise when sin_sign = -1 (rotate_pair: the CPU layer's operations in its order).
__global__ void rope_kernel(float* x, const float* cos_table, const float* sin_table, int groups, int context,
                            int head_dim, float sin_sign, storage stored) {
  const int half = head_dim / 2;
  const std::size_t pairs = std::size_t(groups) * std::size_t(context) * std::size_t(half);
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t p = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += stride) {
    const std::size_t vector = p / std::size_t(half);  // g * T + t
    const int i = int(p % std::size_t(half));
    const int t = int(vector % std::size_t(context));
    const float c = cos_table[std::size_t(t) * std::size_t(half) + std::size_t(i)];
    const float s = sin_sign * sin_table[std::size_t(t) * std::size_t(half) + std::size_t(i)];
    float* v = x + vector * std::size_t(head_dim);
    const detail::rotated_pair r = detail::rotate_pair(v[i], v[i + half], c, s);
    v[i] = detail::store_value(stored, r.first);
    v[i + half] = detail::store_value(stored, r.second);
  }
}

void launch_rope(const char* function, float* x, const device_rope_table& table, int groups, storage stored,
                 float sin_sign, cudaStream_t stream) {
  detail::require(groups >= 0, function, "needs groups >= 0 (got " + std::to_string(groups) + ")");
  check_rope_table(function, table);
  const std::size_t half_count = std::size_t(table.context) * std::size_t(table.head_dim / 2);
  const std::size_t pairs = std::size_t(groups) * half_count;
  detail::check_pointer(x, 2 * pairs, function, "x");
  if (pairs == 0) return;
  rope_kernel<<<detail::grid_for(pairs), detail::block_threads, 0, stream>>>(
      x, table.cos.data(), table.sin.data(), groups, table.context, table.head_dim, sin_sign, stored);
  detail::check_launch("rope_kernel");
}

}  // namespace

void check_rope_table(const char* function, const device_rope_table& table) {
  detail::require(table.head_dim > 0 && table.head_dim % 2 == 0 && table.context > 0, function,
                  "the table needs an even head dimension and a context of at least 1 (got D " +
                      std::to_string(table.head_dim) + ", T " + std::to_string(table.context) + ")");
  const std::size_t half_count = std::size_t(table.context) * std::size_t(table.head_dim / 2);
  detail::require(table.cos.size() == half_count && table.sin.size() == half_count, function,
                  "the table's cos and sin must hold T * D/2 = " + std::to_string(half_count) + " values");
}

void rope_forward(float* x, const device_rope_table& table, int groups, storage stored, cudaStream_t stream) {
  launch_rope("trainer::cuda::rope_forward", x, table, groups, stored, 1.0f, stream);
}

void rope_backward(float* dx, const device_rope_table& table, int groups, storage stored,
                   cudaStream_t stream) {
  launch_rope("trainer::cuda::rope_backward", dx, table, groups, stored, -1.0f, stream);
}

}  // namespace trainer::cuda

// Embedding lookup (a block per token) and a deterministic scatter-add: each thread owns
// one table element (v, j) and adds the rows of dout whose token is v, in token order.
#include "embedding.hpp"

#include <cstddef>

#include <math_constants.h>

#include "kernel_support.cuh"

namespace trainer::cuda {

namespace {

// out: [N, C]; table: [V, C]; tokens: [N]. A block per token (grid-stride), its C columns over the
// threads (no division per element).
__global__ void embedding_forward_kernel(float* out, const float* table, const std::int32_t* tokens, int n,
                                         int c, int v) {
  for (int row = int(blockIdx.x); row < n; row += int(gridDim.x)) {
    const std::int32_t token = tokens[row];
    const bool known = token >= 0 && token < v;
    const float* from = table + (known ? std::size_t(token) * std::size_t(c) : 0);
    float* to = out + std::size_t(row) * std::size_t(c);
    for (int column = int(threadIdx.x); column < c; column += int(blockDim.x)) {
      to[column] = known ? from[column] : CUDART_NAN_F;
    }
  }
}

// The positions of one tile of tokens that hold `row`, in token order: the tile is tokens
// [start, start + blockDim.x), and each thread looks at one. Writes positions[0 .. count) and returns
// count (every thread gets it). Every thread of the block must call it; blockDim.x a multiple of 32.
// `warp_counts`: warps_per_block ints of shared memory; `positions`: blockDim.x ints.
__device__ int tile_positions_of(int row, const std::int32_t* tokens, int start, int n, int* warp_counts,
                                 int* positions) {
  const int lane = int(threadIdx.x) % detail::warp_size;
  const int warp = int(threadIdx.x) / detail::warp_size;
  const int position = start + int(threadIdx.x);
  const bool match = position < n && tokens[position] == row;
  const unsigned matches = __ballot_sync(detail::full_mask, match);
  __syncthreads();  // the previous tile's readers are done with warp_counts and positions
  if (lane == 0) warp_counts[warp] = __popc(matches);
  __syncthreads();
  int before = 0, count = 0;  // matches in the warps before this one; in the whole tile
  for (int w = 0; w < int(blockDim.x) / detail::warp_size; ++w) {
    if (w < warp) before += warp_counts[w];
    count += warp_counts[w];
  }
  if (match) positions[before + __popc(matches & ((1u << lane) - 1u))] = position;
  __syncthreads();
  return count;
}

// dtable: [V, C]; dout: [N, C]; tokens: [N]. Grid: x over channel chunks of blockDim.x, y over table
// rows, both grid-stride. Each block walks the tokens in tiles of blockDim.x: it lists the tile's
// positions of its row (a ballot per warp, in token order) and its threads add those rows of dout
// to their channels, so a row costs a few instructions per tile plus one addition per occurrence
// (the CPU loop's additions, in its order). The loops that contain __syncthreads() depend only on
// block-uniform values, so every thread reaches every barrier.
__global__ void embedding_backward_kernel(float* dtable, const float* dout, const std::int32_t* tokens, int n,
                                          int c, int v) {
  __shared__ int warp_counts[detail::warps_per_block];
  __shared__ int positions[detail::block_threads];
  for (int row = int(blockIdx.y); row < v; row += int(gridDim.y)) {
    for (int first = int(blockIdx.x * blockDim.x); first < c; first += int(gridDim.x * blockDim.x)) {
      const int column = first + int(threadIdx.x);
      const bool active = column < c;
      const std::size_t at = std::size_t(row) * std::size_t(c) + std::size_t(active ? column : 0);
      float sum = active ? dtable[at] : 0.0f;
      for (int start = 0; start < n; start += int(blockDim.x)) {
        const int count = tile_positions_of(row, tokens, start, n, warp_counts, positions);
        if (active) {
          for (int t = 0; t < count; ++t)
            sum += dout[std::size_t(positions[t]) * std::size_t(c) + std::size_t(column)];
        }
      }
      if (active) dtable[at] = sum;
    }
  }
}

void check_shapes(const char* function, const void* out, const void* table, const void* tokens, int n, int c,
                  int v) {
  detail::require(n >= 0 && c >= 0 && v > 0, function,
                  "needs n >= 0, c >= 0 and v > 0 (got n " + std::to_string(n) + ", c " + std::to_string(c) +
                      ", v " + std::to_string(v) + ")");
  const std::size_t elements = std::size_t(n) * std::size_t(c);
  detail::check_pointer(out, elements, function, "the [N, C] buffer");
  detail::check_pointer(table, std::size_t(v) * std::size_t(c), function, "the [V, C] table");
  detail::check_pointer(tokens, std::size_t(n), function, "tokens");
}

}  // namespace

void embedding_forward(float* out, const float* table, const std::int32_t* tokens, int n, int c, int v,
                       cudaStream_t stream) {
  check_shapes("trainer::cuda::embedding_forward", out, table, tokens, n, c, v);
  const std::size_t count = std::size_t(n) * std::size_t(c);
  if (count == 0) return;
  embedding_forward_kernel<<<detail::grid_for_rows(std::size_t(n)), detail::block_threads, 0, stream>>>(
      out, table, tokens, n, c, v);
  detail::check_launch("embedding_forward_kernel");
}

void embedding_backward(float* dtable, const float* dout, const std::int32_t* tokens, int n, int c, int v,
                        cudaStream_t stream) {
  check_shapes("trainer::cuda::embedding_backward", dout, dtable, tokens, n, c, v);
  if (n == 0 || c == 0) return;
  // The kernel's shared arrays are sized for block_threads threads.
  const int threads = detail::block_threads;
  // Channel chunks over x, table rows over y.
  const std::size_t chunks = (std::size_t(c) + threads - 1) / threads;
  embedding_backward_kernel<<<detail::grid_2d(chunks, std::size_t(v)), threads, 0, stream>>>(dtable, dout,
                                                                                             tokens, n, c, v);
  detail::check_launch("embedding_backward_kernel");
}

}  // namespace trainer::cuda

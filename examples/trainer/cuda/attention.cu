// Attention: head split and merge kernels, BF16 operand copies, the causal softmax and its backward
// (one warp per score row), and the four batched products through cuBLAS; and the fused path's
// rotations of the BF16 q and k around cuDNN's flash attention.
#include "attention.hpp"

#include <cuda_bf16.h>
#include <math_constants.h>

#include <cmath>
#include <cstddef>
#include <string>

#include "batched_gemm.hpp"
#include "kernel_support.cuh"
#include "rope_pair.cuh"
#include "storage.hpp"

namespace trainer::cuda {

namespace {

std::size_t elements(const attention_shape& s) {
  return std::size_t(s.batch) * std::size_t(s.heads) * std::size_t(s.context) * std::size_t(s.head_dim());
}
std::size_t square_elements(const attention_shape& s) {
  return std::size_t(s.batch) * std::size_t(s.heads) * std::size_t(s.context) * std::size_t(s.context);
}

// The two layouts of S tensors (q, k, v or one of them) split into H heads of D: per head
// [S, B, H, T, D], and per token [B, T, row_stride], where tensor s of head h sits at columns
// s * C + h * D .. + D - 1 of each token's row (C = H * D).
struct head_layout {
  int tensors, batch, context, heads, head_dim, row_stride;

  __device__ std::size_t count() const {
    return std::size_t(tensors) * std::size_t(batch) * std::size_t(heads) * std::size_t(context) *
           std::size_t(head_dim);
  }
  // Where element i of the per-head layout sits in the per-token layout.
  __device__ std::size_t token_offset(std::size_t i) const {
    const std::size_t d = i % std::size_t(head_dim);
    i /= std::size_t(head_dim);
    const std::size_t t = i % std::size_t(context);
    i /= std::size_t(context);
    const std::size_t h = i % std::size_t(heads);
    i /= std::size_t(heads);
    const std::size_t b = i % std::size_t(batch);
    const std::size_t s = i / std::size_t(batch);
    const std::size_t channels = std::size_t(heads) * std::size_t(head_dim);
    return (b * std::size_t(context) + t) * std::size_t(row_stride) + s * channels +
           h * std::size_t(head_dim) + d;
  }
};

// dst: [S, B, H, T, D] from src: [B, T, row_stride]. One thread per element of dst, grid-stride
// (reads come in runs of D, writes are contiguous).
__global__ void heads_from_tokens_kernel(float* dst, const float* src, head_layout layout) {
  const std::size_t count = layout.count();
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    dst[i] = src[layout.token_offset(i)];
  }
}

// The inverse map, dst: [B, T, row_stride] from src: [S, B, H, T, D], stored in `stored`.
__global__ void tokens_from_heads_kernel(float* dst, const float* src, head_layout layout, storage stored) {
  const std::size_t count = layout.count();
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    dst[layout.token_offset(i)] = detail::store_value(stored, src[i]);
  }
}

// att: [R, T] score rows, R = B * H * T; row r is query position i = r % T. In place:
// P[i, j] = exp(S[i, j] * scale - max) / sum for j <= i, 0 for j > i, stored in `stored`. One warp per
// row (every lane of a warp has the same row, so the shuffles see the full warp), grid-stride over
// rows. The scaled score is rounded before the subtraction (no FMA), so the row's maximum gives
// exp(0) = 1 exactly and the sum is at least 1.
__global__ void causal_softmax_kernel(float* att, std::size_t rows, int context, float scale,
                                      storage stored) {
  const int lane = int(threadIdx.x) % detail::warp_size;
  const std::size_t warps = std::size_t(gridDim.x) * blockDim.x / detail::warp_size;
  for (std::size_t r = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / detail::warp_size; r < rows;
       r += warps) {
    const int i = int(r % std::size_t(context));
    float* row = att + r * std::size_t(context);
    float row_max = -CUDART_INF_F;
    for (int j = lane; j <= i; j += detail::warp_size) row_max = fmaxf(row_max, __fmul_rn(row[j], scale));
    row_max = detail::warp_max(row_max);
    float sum = 0.0f;
    for (int j = lane; j <= i; j += detail::warp_size) {
      const float e = expf(__fmul_rn(row[j], scale) - row_max);
      row[j] = e;  // read back below by the same lane
      sum += e;
    }
    sum = detail::warp_sum(sum);
    for (int j = lane; j < context; j += detail::warp_size) {
      row[j] = j <= i ? detail::store_value(stored, row[j] / sum) : 0.0f;
    }
  }
}

// ds: [R, T] holds dP on entry and dS on exit; p: [R, T] the probabilities. Per row i:
// dS[i, j] = P[i, j] (dP[i, j] - sum_j' P[i, j'] dP[i, j']) * scale for j <= i, 0 for j > i, stored in
// `stored`. One warp per row, as the forward kernel.
__global__ void causal_softmax_backward_kernel(float* ds, const float* p, std::size_t rows, int context,
                                               float scale, storage stored) {
  const int lane = int(threadIdx.x) % detail::warp_size;
  const std::size_t warps = std::size_t(gridDim.x) * blockDim.x / detail::warp_size;
  for (std::size_t r = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / detail::warp_size; r < rows;
       r += warps) {
    const int i = int(r % std::size_t(context));
    float* row = ds + r * std::size_t(context);
    const float* p_row = p + r * std::size_t(context);
    float dot = 0.0f;
    for (int j = lane; j <= i; j += detail::warp_size) dot += p_row[j] * row[j];
    dot = detail::warp_sum(dot);
    for (int j = lane; j < context; j += detail::warp_size) {
      row[j] = j <= i ? detail::store_value(stored, p_row[j] * (row[j] - dot) * scale) : 0.0f;
    }
  }
}

void heads_from_tokens(float* dst, const float* src, int tensors, const attention_shape& s, int row_stride,
                       cudaStream_t stream) {
  const std::size_t count = std::size_t(tensors) * elements(s);
  const head_layout layout{tensors, s.batch, s.context, s.heads, s.head_dim(), row_stride};
  heads_from_tokens_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(dst, src, layout);
  detail::check_launch("heads_from_tokens_kernel");
}

void tokens_from_heads(float* dst, const float* src, int tensors, const attention_shape& s, int row_stride,
                       storage stored, cudaStream_t stream) {
  const std::size_t count = std::size_t(tensors) * elements(s);
  const head_layout layout{tensors, s.batch, s.context, s.heads, s.head_dim(), row_stride};
  tokens_from_heads_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(dst, src, layout,
                                                                                          stored);
  detail::check_launch("tokens_from_heads_kernel");
}

unsigned softmax_grid(std::size_t rows) { return detail::grid_for_rows(rows, detail::warps_per_block); }

// B, T, H, C positive, C a multiple of H (before head_dim() divides by H).
void check_shape(const char* function, const attention_shape& s) {
  detail::require(s.batch > 0 && s.context > 0 && s.heads > 0 && s.channels > 0 && s.channels % s.heads == 0,
                  function,
                  "needs positive B, T, H, C with C a multiple of H (got B " + std::to_string(s.batch) +
                      ", T " + std::to_string(s.context) + ", C " + std::to_string(s.channels) + ", H " +
                      std::to_string(s.heads) + ")");
}

// The RoPE table: made for this shape's T and D.
void check_rope(const char* function, const attention_shape& s, const device_rope_table& rope) {
  detail::require(rope.context == s.context && rope.head_dim == s.head_dim(), function,
                  "the RoPE table is for T " + std::to_string(rope.context) + ", D " +
                      std::to_string(rope.head_dim) + " but the shape has T " + std::to_string(s.context) +
                      ", D " + std::to_string(s.head_dim()));
}

// The workspace: made for this shape and for this path.
void check_workspace(const char* function, const attention_shape& s, const attention_workspace& workspace,
                     attention_kernel kernel) {
  const attention_shape& w = workspace.shape();
  detail::require(
      w.batch == s.batch && w.context == s.context && w.channels == s.channels && w.heads == s.heads,
      function, "the workspace was made for another shape");
  detail::require(workspace.kernel() == kernel, function,
                  std::string("the workspace was made for the ") + to_string(workspace.kernel()) +
                      " path, not the " + to_string(kernel) + " one");
}

// Checks everything of the materialised path before any work is queued.
void check_arguments(const char* function, const attention_shape& s, const device_rope_table& rope,
                     gemm_mode mode, const attention_workspace& workspace) {
  check_shape(function, s);
  check_rope(function, s, rope);
  check_workspace(function, s, workspace, attention_kernel::materialized);
  detail::require(mode == gemm_mode::fp32 || mode == gemm_mode::bf16, function,
                  std::string("attention's products run in fp32 or bf16, not ") + to_string(mode));
}

// The fused path's checks: the shape and RoPE table as check_arguments' (before the buffers are
// sized from the shape)...
void check_fused_shape(const char* function, const attention_shape& s, const device_rope_table& rope) {
  check_shape(function, s);
  check_rope(function, s, rope);
}

// ... and, after them, cuDNN's graphs: present and made for the same shape.
void check_kernels(const char* function, const attention_shape& s, const cudnn_attention* kernels) {
  detail::require(kernels != nullptr, function, "needs the cuDNN graphs (got null)");
  const attention_shape& k = kernels->shape();
  detail::require(
      k.batch == s.batch && k.context == s.context && k.channels == s.channels && k.heads == s.heads,
      function, "the cuDNN graphs were built for another shape");
}

// The score rows of a shape, B * H * T: the statistics' count.
std::size_t rows_of(const attention_shape& s) {
  return std::size_t(s.batch) * std::size_t(s.heads) * std::size_t(s.context);
}

// The work of the fused path's two rotations, per token: the C/2 rotation pairs of q and the C/2 of
// k, each a pair (i, i + D/2) of one head; v is never turned.
struct token_pairs {
  int context, channels, head_dim;
  std::size_t tokens;

  explicit token_pairs(const attention_shape& s)
      : context(s.context),
        channels(s.channels),
        head_dim(s.head_dim()),
        tokens(std::size_t(s.batch) * std::size_t(s.context)) {}
};

// q and k of qkv16: [B, T, 3C] BF16 turned in place by RoPE (rope.cu's rotation, in FP32) or, with
// `inverse`, turned back (the backward pass: the angle's sine negated), each result rounded to BF16
// as stored (store_element: the bits the float form's stored value gives when staged). v is not
// touched. A block per token (grid-stride), its C pairs (C/2 of q, then C/2 of k; pair i of a head
// is (i, i + D/2)) over the threads; each pair is read and written by its thread only. The token's
// position is found once per token, and a pair's head with one 32-bit division: a 64-bit division
// per pair (seven of them) made this kernel bound by instructions, not memory.
__global__ void rotate_qk_kernel(__nv_bfloat16* qkv16, const float* cos_table, const float* sin_table,
                                 token_pairs pairs, bool inverse) {
  const int half_channels = pairs.channels / 2, half_dim = pairs.head_dim / 2;
  for (std::size_t token = blockIdx.x; token < pairs.tokens; token += gridDim.x) {
    __nv_bfloat16* row = qkv16 + token * 3 * std::size_t(pairs.channels);
    const std::size_t position = token % std::size_t(pairs.context);
    for (int j = int(threadIdx.x); j < pairs.channels; j += int(blockDim.x)) {
      const int tensor = j < half_channels ? 0 : 1;  // 0 q, 1 k
      const int r = j - tensor * half_channels;
      const int head = r / half_dim, i = r - head * half_dim;
      __nv_bfloat16* first = row + tensor * pairs.channels + head * pairs.head_dim + i;
      const std::size_t angle = position * std::size_t(half_dim) + std::size_t(i);
      const float sine = inverse ? -sin_table[angle] : sin_table[angle];
      const detail::rotated_pair rotated = detail::rotate_pair(
          detail::load_element(first, 0), detail::load_element(first, half_dim), cos_table[angle], sine);
      detail::store_element(first, 0, rotated.first, storage::bf16);
      detail::store_element(first, half_dim, rotated.second, storage::bf16);
    }
  }
}

void rotate_qk(std::uint16_t* qkv16, const device_rope_table& rope, const attention_shape& shape,
               bool inverse, cudaStream_t stream) {
  const token_pairs pairs(shape);
  if (pairs.tokens == 0) return;
  rotate_qk_kernel<<<detail::grid_for_rows(pairs.tokens), detail::block_threads, 0, stream>>>(
      reinterpret_cast<__nv_bfloat16*>(qkv16), rope.cos.data(), rope.sin.data(), pairs, inverse);
  detail::check_launch("rotate_qk_kernel");
}

// An operand for batched_gemm: the float buffer in fp32 mode, its BF16 copy in bf16 mode.
batched_operand operand(gemm_mode mode, const float* as_float, const std::uint16_t* as_bf16, int rows,
                        int cols, bool transposed) {
  batched_operand o;
  o.data = mode == gemm_mode::bf16 ? static_cast<const void*>(as_bf16) : static_cast<const void*>(as_float);
  o.rows = rows;
  o.cols = cols;
  o.transposed = transposed;
  o.stride = static_cast<long long>(rows) * cols;
  return o;
}

// Checks the shape before the members are sized from it (elements() divides by H).
const attention_shape& checked(const attention_shape& shape) {
  check_shape("trainer::cuda::attention_workspace", shape);
  return shape;
}

}  // namespace

attention_path choose_attention(attention_kernel requested, gemm_mode mode, const attention_shape& shape) {
  attention_path path;
  if (requested == attention_kernel::materialized) {
    path.description = "materialized";
    return path;
  }
  if (mode != gemm_mode::bf16) {
    if (requested == attention_kernel::fused) {
      throw fp8::invalid_argument(
          std::string("trainer::cuda::choose_attention: the fused attention runs BF16 "
                      "products; this run's attention products are ") +
          to_string(mode));
    }
    path.description = std::string("materialized (") + to_string(mode) + " attention products)";
    return path;
  }
  if (requested == attention_kernel::automatic && !cudnn_attention_built()) {
    path.description = "materialized (this build has no cuDNN)";
    return path;
  }
  try {
    path.fused = std::make_unique<cudnn_attention>(shape);
  } catch (const fp8::error& e) {
    // A device out of memory is no reason to fall back: the materialised path needs more of it.
    const auto* cuda = dynamic_cast<const fp8::cuda_error*>(&e);
    const bool out_of_memory = cuda != nullptr && cuda->status() == cudaErrorMemoryAllocation;
    if (requested == attention_kernel::fused || out_of_memory) throw;
    path.description = std::string("materialized (no fused kernel: ") + e.what() + ")";
    return path;
  }
  path.kernel = attention_kernel::fused;
  path.description = "fused (" + cudnn_attention_versions() + ")";
  return path;
}

attention_workspace::attention_workspace(const attention_shape& shape, attention_kernel kernel)
    : qkv_bf16(kernel == attention_kernel::materialized ? 3 * elements(checked(shape)) : 0),
      square_bf16(kernel == attention_kernel::materialized ? square_elements(shape) : 0),
      heads(kernel == attention_kernel::materialized ? elements(shape) : 0),
      heads_bf16(kernel == attention_kernel::materialized ? elements(shape) : 0),
      dqkv(kernel == attention_kernel::materialized ? 3 * elements(shape) : 0),
      square(kernel == attention_kernel::materialized ? square_elements(shape) : 0),
      shape_(shape),
      kernel_(kernel) {
  if (kernel != attention_kernel::materialized && kernel != attention_kernel::fused) {
    throw fp8::invalid_argument(
        "trainer::cuda::attention_workspace: the kernel must be materialized or fused (auto is resolved by "
        "the "
        "model first)");
  }
}

void attention_forward(float* out, float* qkvr, float* att, const float* inp, const device_rope_table& rope,
                       const attention_shape& shape, gemm_mode mode, storage stored,
                       attention_workspace& workspace, cublasHandle_t handle, cudaStream_t stream) {
  const char* function = "trainer::cuda::attention_forward";
  check_arguments(function, shape, rope, mode, workspace);
  const std::size_t head_block = elements(shape), square = square_elements(shape);
  detail::check_pointer(out, head_block, function, "out");
  detail::check_pointer(qkvr, 3 * head_block, function, "qkvr");
  detail::check_pointer(att, square, function, "att");
  detail::check_pointer(inp, 3 * head_block, function, "inp");
  const int B = shape.batch, T = shape.context, C = shape.channels, H = shape.heads, D = shape.head_dim();
  const bool bf16 = mode == gemm_mode::bf16;
  std::uint16_t* qkv16 = workspace.qkv_bf16.data();

  // 1. Split the heads out of [B, T, 3C]; rotate q and k (contiguous: 2 * B * H groups) and store them.
  heads_from_tokens(qkvr, inp, 3, shape, 3 * C, stream);
  rope_forward(qkvr, rope, 2 * B * H, stored, stream);
  if (bf16) to_bf16(qkv16, qkvr, 3 * head_block, stream);

  // 2. Scores S[T, T] = q k^T per (sequence, head), in FP32, into att; then the causal softmax.
  batched_gemm(handle, mode, operand(mode, qkvr, qkv16, T, D, false),
               operand(mode, qkvr + head_block, qkv16 + head_block, T, D, false), att, (long long)T * T,
               B * H, stream);
  const std::size_t rows = std::size_t(B) * std::size_t(H) * std::size_t(T);
  const float scale = 1.0f / std::sqrt(float(D));
  causal_softmax_kernel<<<softmax_grid(rows), detail::block_threads, 0, stream>>>(att, rows, T, scale,
                                                                                  stored);
  detail::check_launch("causal_softmax_kernel");

  // 3. y[T, D] = P v per (sequence, head), then the heads merged into [B, T, C] and stored.
  if (bf16) to_bf16(workspace.square_bf16.data(), att, square, stream);
  batched_gemm(handle, mode, operand(mode, att, workspace.square_bf16.data(), T, T, false),
               operand(mode, qkvr + 2 * head_block, qkv16 + 2 * head_block, T, D, true),
               workspace.heads.data(), (long long)T * D, B * H, stream);
  tokens_from_heads(out, workspace.heads.data(), 1, shape, C, stored, stream);
}

void attention_backward(float* dinp, const float* dout, const float* qkvr, const float* att,
                        const device_rope_table& rope, const attention_shape& shape, gemm_mode mode,
                        storage stored, attention_workspace& workspace, cublasHandle_t handle,
                        cudaStream_t stream) {
  const char* function = "trainer::cuda::attention_backward";
  check_arguments(function, shape, rope, mode, workspace);
  const std::size_t head_block = elements(shape), square = square_elements(shape);
  detail::check_pointer(dinp, 3 * head_block, function, "dinp");
  detail::check_pointer(dout, head_block, function, "dout");
  detail::check_pointer(qkvr, 3 * head_block, function, "qkvr");
  detail::check_pointer(att, square, function, "att");
  const int B = shape.batch, T = shape.context, C = shape.channels, H = shape.heads, D = shape.head_dim();
  const bool bf16 = mode == gemm_mode::bf16;
  const float* q = qkvr;
  const float* k = qkvr + head_block;
  const float* v = qkvr + 2 * head_block;
  std::uint16_t* qkv16 = workspace.qkv_bf16.data();
  std::uint16_t* square16 = workspace.square_bf16.data();
  float* dy = workspace.heads.data();  // [B, H, T, D]
  std::uint16_t* dy16 = workspace.heads_bf16.data();
  float* dq = workspace.dqkv.data();  // [B, H, T, D], then dk and dv
  float* dk = dq + head_block;
  float* dv = dq + 2 * head_block;
  float* ds = workspace.square.data();  // [B, H, T, T]
  const long long td = (long long)T * D, tt = (long long)T * T;

  heads_from_tokens(dy, dout, 1, shape, C, stream);
  if (bf16) {
    // The workspace's copies may belong to another layer's forward pass: make them afresh.
    to_bf16(dy16, dy, head_block, stream);
    to_bf16(qkv16, qkvr, 3 * head_block, stream);
    to_bf16(square16, att, square, stream);
  }
  // dV[T, D] = P^T dO
  batched_gemm(handle, mode, operand(mode, att, square16, T, T, true), operand(mode, dy, dy16, T, D, true),
               dv, td, B * H, stream);
  // dP[T, T] = dO V^T, FP32 like the scores
  batched_gemm(handle, mode, operand(mode, dy, dy16, T, D, false),
               operand(mode, v, qkv16 + 2 * head_block, T, D, false), ds, tt, B * H, stream);
  // dS = P (dP - rowsum(P dP)) * scale, stored
  const std::size_t rows = std::size_t(B) * std::size_t(H) * std::size_t(T);
  const float scale = 1.0f / std::sqrt(float(D));
  causal_softmax_backward_kernel<<<softmax_grid(rows), detail::block_threads, 0, stream>>>(ds, att, rows, T,
                                                                                           scale, stored);
  detail::check_launch("causal_softmax_backward_kernel");
  if (bf16) to_bf16(square16, ds, square, stream);
  // dq[T, D] = dS k and dk[T, D] = dS^T q, FP32: the inverse rotation follows, then one rounding
  batched_gemm(handle, mode, operand(mode, ds, square16, T, T, false),
               operand(mode, k, qkv16 + head_block, T, D, true), dq, td, B * H, stream);
  batched_gemm(handle, mode, operand(mode, ds, square16, T, T, true), operand(mode, q, qkv16, T, D, true), dk,
               td, B * H, stream);
  rope_backward(dq, rope, 2 * B * H, storage::fp32, stream);
  tokens_from_heads(dinp, dq, 3, shape, 3 * C, stored, stream);
}

void fused_attention_forward(std::uint16_t* out16, float* stats, std::uint16_t* qkv16,
                             const device_rope_table& rope, const attention_shape& shape,
                             cudnn_attention* kernels, cudaStream_t stream) {
  const char* function = "trainer::cuda::fused_attention_forward";
  check_fused_shape(function, shape, rope);
  const std::size_t tokens_by_channels = elements(shape);
  detail::check_pointer(out16, tokens_by_channels, function, "out16");
  detail::check_pointer(stats, rows_of(shape), function, "stats");
  detail::check_pointer(qkv16, 3 * tokens_by_channels, function, "qkv16");
  check_kernels(function, shape, kernels);
  check_rope_table(function, rope);  // the values the rotation reads (check_rope saw the shape)
  const int C = shape.channels;

  // q and k rotated and stored as on the materialised path, in place; v as wqkv wrote it.
  rotate_qk(qkv16, rope, shape, false, stream);
  kernels->forward(out16, stats, qkv16, qkv16 + C, qkv16 + 2 * C, stream);
}

void fused_attention_backward(std::uint16_t* dinp16, const std::uint16_t* dout16, const std::uint16_t* qkv16,
                              const std::uint16_t* out16, const float* stats, const device_rope_table& rope,
                              const attention_shape& shape, cudnn_attention* kernels, cudaStream_t stream) {
  const char* function = "trainer::cuda::fused_attention_backward";
  check_fused_shape(function, shape, rope);
  const std::size_t tokens_by_channels = elements(shape);
  detail::check_pointer(dinp16, 3 * tokens_by_channels, function, "dinp16");
  detail::check_pointer(dout16, tokens_by_channels, function, "dout16");
  detail::check_pointer(qkv16, 3 * tokens_by_channels, function, "qkv16");
  detail::check_pointer(out16, tokens_by_channels, function, "out16");
  detail::check_pointer(stats, rows_of(shape), function, "stats");
  check_kernels(function, shape, kernels);
  check_rope_table(function, rope);  // the values the rotation reads (check_rope saw the shape)
  const int C = shape.channels;

  // cuDNN's dq, dk, dv straight into wqkv's dy, then dq and dk turned back there.
  kernels->backward(dinp16, dinp16 + C, dinp16 + 2 * C, qkv16, qkv16 + C, qkv16 + 2 * C, out16, dout16, stats,
                    stream);
  rotate_qk(dinp16, rope, shape, true, stream);
}

}  // namespace trainer::cuda

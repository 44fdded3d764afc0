// Current scaling on the device, as the CPU fp8::quantize(in, rows, cols, q, ...): amax, scale and
// cast per tensor, row, 1x128 tile, 128x128 block or MX 1x32 block (E8M0 scales) with no host round
// trip; per tensor from an amax recorded by the tensor's producer (quantize_from_amax); and dequantize.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/current_scaling.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "../scaling/granularity.hpp"
#include "../scaling/recipe.hpp"
#include "amax.cuh"
#include "block_quantize.cuh"
#include "cast_transpose.cuh"
#include "columnwise.cuh"
#include "launch.cuh"
#include "quantize.cuh"
#include "scale.cuh"
#include "tile_transpose.cuh"

namespace fp8::cuda {
namespace detail {

// The arguments of every matrix call: `scales` is scale_inv (float) or, with mx_scales, scale_e8m0
// (E8M0 codes); `out_t` is `out` where there is no transposed copy.
inline void check_matrix_call(const void* in, const void* out, const void* out_t, const void* scales,
                              std::size_t rows, std::size_t cols, const quantization& q, const char* function,
                              bool mx_scales) {
  fp8::detail::check_quantization(q, function, mx_scales);
  (void)checked_size(rows, cols, function);
  check_pointer(in, rows * cols, function, "in");
  check_pointer(out, rows * cols, function, "out");
  check_pointer(out_t, rows * cols, function, "out_t");
  require(scales != nullptr, function,
          mx_scales ? "scale_e8m0 is null (it needs scale_count(mx_1x32, rows, cols) E8M0 codes)"
                    : "scale_inv is null (it needs scale_count(granularity, rows, cols) floats)");
}

// A quantizing call's: those, and `amax`, the device float that receives the matrix's amax.
inline void check_current_scaling(const void* in, const void* out, const void* out_t, const void* scales,
                                  const float* amax, std::size_t rows, std::size_t cols,
                                  const quantization& q, const char* function, bool mx_scales) {
  check_matrix_call(in, out, out_t, scales, rows, cols, q, function, mx_scales);
  require(amax != nullptr, function, "amax is null (one device float that receives the matrix's amax)");
}

// A call with a given amax: per_tensor only, and the amax to read.
inline void check_given_amax(const void* in, const void* out, const void* out_t, const float* scale_inv,
                             const float* amax, std::size_t rows, std::size_t cols, const quantization& q,
                             const char* function) {
  check_matrix_call(in, out, out_t, scale_inv, rows, cols, q, function, false);
  if (q.granularity != granularity::per_tensor) {
    throw invalid_argument(std::string(function) + ": a given amax serves per_tensor scaling, not " +
                           granularity_name(q.granularity) +
                           " (its blocks' amaxes come from the cast's one read: call quantize())");
  }
  require(amax != nullptr, function, "amax is null (one device float holding max |in| of the whole tensor)");
}

}  // namespace detail

// Current per-tensor scaling with the amax already known: `amax` is a device float holding max |in|
// over the whole rows x cols tensor, recorded by the kernel that wrote `in` (amax_tracker), so the
// cast is one read of memory instead of two. Everything else as quantize() / quantize_transpose()
// below with granularity per_tensor (which call these after their amax pass), and bit-identical to
// them when *amax is the tensor's amax (an amax below it saturates the elements above it; one above
// it costs precision). Nothing is written to *amax. The other granularities find their blocks' amaxes in
// their one read: they refuse a given amax (call quantize()). Throws fp8::invalid_argument on null pointers
// or a q that is not per_tensor, before launching.
template <class T>
void quantize_from_amax(const T* in, std::size_t rows, std::size_t cols, const quantization& q,
                        const float* amax, std::uint8_t* out, float* scale_inv,
                        cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  constexpr const char* function = "fp8::cuda::quantize_from_amax";
  detail::check_given_amax(in, out, out, scale_inv, amax, rows, cols, q, function);
  const scale_rule rule = make_scale_rule(q.format, q.margin, q.power_of_two_scales);
  detail::launch_quantize(in, rows * cols, q.format, detail::scale_source::from_amax(amax, rule, scale_inv),
                          nullptr, out, stream);
}

template <class T>
void quantize_transpose_from_amax(const T* in, std::size_t rows, std::size_t cols, const quantization& q,
                                  const float* amax, std::uint8_t* out, float* scale_inv, std::uint8_t* out_t,
                                  float* scale_inv_t, cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  constexpr const char* function = "fp8::cuda::quantize_transpose_from_amax";
  detail::check_given_amax(in, out, out_t, scale_inv, amax, rows, cols, q, function);
  detail::require(scale_inv_t != nullptr, function, "scale_inv_t is null (one float)");
  const scale_rule rule = make_scale_rule(q.format, q.margin, q.power_of_two_scales);
  detail::launch_cast_transpose(in, rows, cols, q.format,
                                detail::scale_source::from_amax(amax, rule, scale_inv), nullptr, out, out_t,
                                stream);
  FP8_CUDA_CHECK(cudaMemcpyAsync(scale_inv_t, scale_inv, sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

// Current scaling of a rows x cols row-major matrix at q.granularity, all on `stream`:
//  - per block (the whole tensor, a row, a 1x128 tile or a 128x128 block): amax, then
//    scale = scale_from_amax(amax, q.format, q.margin, q.power_of_two_scales, 1), then
//    out = FP8(in * scale) (nearest even, saturating);
//  - scale_inv receives 1 / scale per block in the layout of make_scale_layout(q.granularity, rows,
//    cols) (scale_count() floats, padding 0): the layout cuBLASLt's scale modes read;
//  - *amax receives the amax of the whole matrix (overwritten).
// Bit-identical to the CPU fp8::quantize(in, rows, cols, q, out, scale_inv). per_tensor reads the
// input twice (an amax kernel, then the cast, which computes the scale from the device amax); the
// other granularities read it once (per_row twice, the second mostly from cache).
// Throws fp8::invalid_argument on null pointers, a bad q or mx_1x32 (whose E8M0 codes take the
// std::uint8_t* overload below), before launching.
template <class T>
void quantize(const T* in, std::size_t rows, std::size_t cols, const quantization& q, std::uint8_t* out,
              float* scale_inv, float* amax, cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  constexpr const char* function = "fp8::cuda::quantize (current scaling)";
  detail::check_current_scaling(in, out, out, scale_inv, amax, rows, cols, q, function, false);
  const scale_rule rule = make_scale_rule(q.format, q.margin, q.power_of_two_scales);
  FP8_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (q.granularity == granularity::per_tensor) {
    compute_amax(in, rows * cols, amax, stream);
    quantize_from_amax(in, rows, cols, q, amax, out, scale_inv, stream);
    return;
  }
  detail::launch_block_quantize(in, rows, cols, q.format, rule, make_scale_layout(q.granularity, rows, cols),
                                out, scale_inv, amax, stream);
}

// Current scaling into both copies, the counterpart of the CPU fp8::quantize_transpose(in, rows, cols,
// q, out, scale_inv, out_t, scale_inv_t): out, scale_inv and *amax exactly as quantize() above, and
// out_t (cols x rows) with scale_inv_t exactly as quantize() of the transposed matrix would give them.
// The rows of Xᵀ are the columns of X, so its per_row and 1x128 scales come from columns of X
// (Transformer Engine's column-wise scaling); per_tensor and 128x128 scales are shared, transposed.
// Reads: per_tensor 2 (amax, then one fused cast + transpose); 128x128 1 (the block kernel writes the
// transposed codes and scales too); 1x128 1 (tile_transpose.cuh: both kinds of tiles from one read
// of each 128x128 block, the column cast taking it again from L1); per_row 4 (two per copy).
template <class T>
void quantize_transpose(const T* in, std::size_t rows, std::size_t cols, const quantization& q,
                        std::uint8_t* out, float* scale_inv, std::uint8_t* out_t, float* scale_inv_t,
                        float* amax, cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  constexpr const char* function = "fp8::cuda::quantize_transpose (current scaling)";
  detail::check_current_scaling(in, out, out_t, scale_inv, amax, rows, cols, q, function, false);
  detail::require(scale_inv_t != nullptr, function,
                  "scale_inv_t is null (scale_count(granularity, cols, rows) floats)");
  const scale_rule rule = make_scale_rule(q.format, q.margin, q.power_of_two_scales);
  FP8_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (q.granularity == granularity::per_tensor) {
    compute_amax(in, rows * cols, amax, stream);
    quantize_transpose_from_amax(in, rows, cols, q, amax, out, scale_inv, out_t, scale_inv_t, stream);
    return;
  }
  const scale_layout layout = make_scale_layout(q.granularity, rows, cols);
  const scale_layout layout_t = make_scale_layout(q.granularity, cols, rows);
  if (q.granularity == granularity::block_128x128) {
    // One pass: the block kernel writes both copies and both scale grids from registers.
    detail::launch_block_quantize(in, rows, cols, q.format, rule, layout, out, scale_inv, amax, stream, out_t,
                                  scale_inv_t, &layout_t);
    return;
  }
  if (q.granularity == granularity::tile_1x128) {
    detail::launch_tile_quantize_transpose(in, rows, cols, q.format, rule, layout, out, scale_inv, layout_t,
                                           out_t, scale_inv_t, amax, stream);
    return;
  }
  // per_row: Xᵀ's rows are X's columns, and a column's scale needs all of its rows, so the column
  // amaxes come first. scale_inv_t holds them, then (finish_columns_kernel) their 1 / scale.
  detail::launch_block_quantize(in, rows, cols, q.format, rule, layout, out, scale_inv, amax, stream);
  FP8_CUDA_CHECK(cudaMemsetAsync(scale_inv_t, 0, cols * sizeof(float), stream));
  if (cols == 0) return;  // Xᵀ has no rows
  if (rows > 0) {         // else every column's amax is 0 (scale 1)
    const unsigned grid = detail::grid_for(detail::column_chunk_count(rows, cols), 1);
    detail::column_amax_kernel<<<grid, detail::column_threads, 0, stream>>>(in, rows, cols, scale_inv_t);
    detail::check_launch("fp8::cuda::detail::column_amax_kernel", rows, cols, grid, detail::column_threads);
    detail::launch_column_quantize_transpose<1>(
        in, rows, cols, q.format, detail::float_block_scales{rule, scale_inv_t}, scale_inv_t, layout_t, out_t,
        stream, "fp8::cuda::detail::column_quantize_transpose_kernel");
  }
  const unsigned finish_grid = detail::grid_for(cols);
  detail::finish_columns_kernel<detail::block_threads>
      <<<finish_grid, detail::block_threads, 0, stream>>>(scale_inv_t, cols, rule);
  detail::check_launch("fp8::cuda::detail::finish_columns_kernel", cols, finish_grid, detail::block_threads);
}

// Inverse of the matrix quantize: out = T(decode(code) * scale_inv of the element's block), rounded
// once to T. Bit-identical to the CPU fp8::dequantize(in, rows, cols, q, scale_inv, out). Unlike the
// CPU version it cannot check the scales without a host round trip: a non-finite scale_inv gives
// non-finite outputs.
template <class T>
void dequantize(const std::uint8_t* in, std::size_t rows, std::size_t cols, const quantization& q,
                const float* scale_inv, T* out, cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  constexpr const char* function = "fp8::cuda::dequantize (blocks)";
  // Argument names as the caller sees them: the codes are `in`, the values written are `out`.
  detail::check_matrix_call(in, out, out, scale_inv, rows, cols, q, function, false);
  detail::launch_block_dequantize(in, rows, cols, q, scale_inv, out, stream);
}

// --- MX (OCP MX v1.0: mx_1x32, E8M0 scales) ------------------------------------------------------

// MX quantization (q.granularity == mx_1x32, margin 0), the counterpart of the CPU
// fp8::quantize(in, rows, cols, q, out, scale_e8m0): per 32 elements of a row, the E8M0 code of
// X = 2^(floor(log2(amax)) - emax) (fp8::mx_scale_code) into scale_e8m0 (rows x ceil(cols / 32),
// row-major), out = FP8(in * 2^(127 - code)) rounded to nearest even and saturated, and *amax the
// matrix's amax (overwritten). One read of the input; bit-identical to the CPU. Hopper's tensor cores
// do not read MX operands (cuBLASLt's VEC32_UE8M0 mode is for Blackwell, with its scales rearranged
// into 128 x 4 tiles), so this is for storage, exchange, and the emulated MX recipes.
// Throws fp8::invalid_argument on null pointers or a q that is not mx_1x32 with margin 0.
template <class T>
void quantize(const T* in, std::size_t rows, std::size_t cols, const quantization& q, std::uint8_t* out,
              std::uint8_t* scale_e8m0, float* amax, cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  constexpr const char* function = "fp8::cuda::quantize (MX)";
  detail::check_current_scaling(in, out, out, scale_e8m0, amax, rows, cols, q, function, true);
  FP8_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  detail::launch_mx_quantize(in, rows, cols, q.format, make_scale_layout(q.granularity, rows, cols), out,
                             scale_e8m0, amax, stream);
}

// Both MX copies, as the CPU fp8::quantize_transpose(in, rows, cols, q, out, scale_e8m0, out_t,
// scale_e8m0_t): out, scale_e8m0 and *amax as quantize() above, and out_t (cols x rows) with
// scale_e8m0_t (cols x ceil(rows / 32)) as quantize() of the transposed matrix: Xᵀ's blocks are 32
// consecutive rows of a column of X (the copy a backward product reads). Two reads of the input.
template <class T>
void quantize_transpose(const T* in, std::size_t rows, std::size_t cols, const quantization& q,
                        std::uint8_t* out, std::uint8_t* scale_e8m0, std::uint8_t* out_t,
                        std::uint8_t* scale_e8m0_t, float* amax, cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  constexpr const char* function = "fp8::cuda::quantize_transpose (MX)";
  detail::check_current_scaling(in, out, out_t, scale_e8m0, amax, rows, cols, q, function, true);
  detail::require(scale_e8m0_t != nullptr, function,
                  "scale_e8m0_t is null (scale_count(mx_1x32, cols, rows) E8M0 codes)");
  FP8_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  detail::launch_mx_quantize(in, rows, cols, q.format, make_scale_layout(q.granularity, rows, cols), out,
                             scale_e8m0, amax, stream);
  // Xᵀ's 1x32 blocks are 32 rows of a column of X: the column kernel with four groups per chunk.
  if (rows * cols > 0) {
    detail::launch_column_quantize_transpose<detail::column_chunk_rows / int(mx_block_length)>(
        in, rows, cols, q.format, detail::e8m0_block_scales{q.format, scale_e8m0_t}, nullptr,
        make_scale_layout(granularity::mx_1x32, cols, rows), out_t, stream,
        "fp8::cuda::detail::column_quantize_transpose_kernel (MX)");
  }
}

// MX inverse: out = T(decode(code) * 2^(e8m0 - 127)), rounded once to T; bit-identical to the CPU
// fp8::dequantize(in, rows, cols, q, scale_e8m0, out). Unlike the CPU, it cannot refuse an E8M0 NaN
// code (0xFF) without a host round trip: such a block decodes to NaN.
template <class T>
void dequantize(const std::uint8_t* in, std::size_t rows, std::size_t cols, const quantization& q,
                const std::uint8_t* scale_e8m0, T* out, cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  constexpr const char* function = "fp8::cuda::dequantize (MX)";
  detail::check_matrix_call(in, out, out, scale_e8m0, rows, cols, q, function, true);
  detail::launch_block_dequantize(in, rows, cols, q, scale_e8m0, out, stream);
}

}  // namespace fp8::cuda

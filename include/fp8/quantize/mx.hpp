// MXFP4 / MXFP6 on the CPU (OCP Microscaling Formats v1.0): blocks of 32 consecutive elements of a
// row share one E8M0 scale X = 2^e; the elements are stored as FP4 E2M1 (MXFP4) or FP6 E2M3 / E3M2
// (MXFP6), packed (packed.hpp), and the value of element i is X * P_i.
//
// The scale rule (OCP MX v1.0, section 6.3): e = floor(log2(amax)) - emax_elem, where amax is the
// block's largest |x| and emax_elem the exponent of the element format's largest normal: 2 for E2M1
// (max 6 = 1.5 * 2^2), 2 for E2M3 (7.5), 4 for E3M2 (28). e is clamped at -127 (E8M0's smallest
// scale); an all-zero block gets X = 1 (code 127). The elements x / X (exact: X is a power of two)
// round to nearest even, or stochastically with caller-supplied bits, and saturate: amax / X lies in
// [2^emax, 2^(emax+1)), which can exceed the element max (E2M1: 7 > 6), so saturation is part of the
// rule, not an error path.
// Example (MXFP4): a block with amax 100 = 1.5625 * 2^6: e = 6 - 2 = 4, X = 16, code 131; 100 / 16 =
// 6.25 saturates to 6; 20 / 16 = 1.25 is a tie between 1 and 1.5 and goes to even 1.0.
//
// NaN / Inf: the element formats hold neither, so a block containing a NaN or an Inf gets the E8M0
// NaN scale 0xFF and all-zero elements; it dequantizes to NaN (the spec's "X = NaN: every element of
// the block is NaN"). Other blocks are unaffected.
//
// Layout: `in` is rows x cols row-major with cols a multiple of 32; element (r, c) is value r * cols + c
// of the packed output (packed_bytes<Element>(rows * cols) bytes); the scale of block (r, c / 32) is
// scales[r * (cols / 32) + c / 32]. scale_swizzle.hpp rearranges these scales for cuBLASLt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../error.hpp"
#include "../float8.hpp"
#include "../packed.hpp"
#include "block_scaled_ops.hpp"
#include "isa.hpp"

namespace fp8 {

inline constexpr std::size_t mx_block_size = 32;

// emax_elem of the OCP MX spec: the unbiased exponent of the element format's largest value.
template <class Element>
inline constexpr int mx_element_emax = format_traits<Element>::max_exponent;

template <class Element>
inline constexpr bool is_mx_element_v =
    std::is_same_v<Element, e2m1_format> || std::is_same_v<Element, e2m3_format> ||
    std::is_same_v<Element, e3m2_format>;

namespace detail {

inline constexpr std::uint8_t e8m0_nan = format_traits<e8m0_format>::magnitude_mask;  // 0xFF

// cols must be a whole number of blocks, and rows * cols elements must be countable (an overflowing
// element count would otherwise wrap to a small number and under-size every buffer).
inline void check_block_shape(std::size_t rows, std::size_t cols, std::size_t block, const char* function) {
  if (cols % block != 0) {
    throw invalid_argument(std::string(function) + ": cols = " + std::to_string(cols) +
                           " is not a multiple of the block size " + std::to_string(block) +
                           "; pad the rows to a whole number of blocks");
  }
  if (cols != 0 && rows > std::size_t(-1) / cols) {
    throw invalid_argument(std::string(function) + ": rows * cols = " + std::to_string(rows) + " * " +
                           std::to_string(cols) + " overflows size_t");
  }
}

inline void check_pointers(const void* a, const void* b, const void* c, std::size_t count,
                           const char* function) {
  if (count != 0 && (a == nullptr || b == nullptr || c == nullptr)) {
    throw invalid_argument(std::string(function) + ": null pointer for a non-empty tensor");
  }
}

}  // namespace detail

inline namespace FP8_QUANTIZE_ABI_NAMESPACE {
inline namespace FP8_BLOCK_ABI_NAMESPACE {  // block_scaled_ops.hpp: with or without VBMI

// Quantizes rows x cols floats to MX (Element = e2m1_format for MXFP4, e2m3_format / e3m2_format for
// MXFP6). `random_bits`: null for round-to-nearest-even; otherwise one 32-bit word per element
// (row-major, rows * cols words) and the elements round stochastically (convert.hpp's definition).
template <class Element>
void quantize_mx(const float* in, std::size_t rows, std::size_t cols, std::uint8_t* packed_out,
                 std::uint8_t* scales_e8m0, const std::uint32_t* random_bits = nullptr) {
  static_assert(is_mx_element_v<Element>, "MX element formats here: e2m1_format, e2m3_format, e3m2_format");
  detail::check_block_shape(rows, cols, mx_block_size, "fp8::quantize_mx");
  detail::check_pointers(in, packed_out, scales_e8m0, rows * cols, "fp8::quantize_mx");
  // Blocks are contiguous across rows: block k's scale is scales_e8m0[k], its elements start at
  // in[32 k] and at packed byte packed_bytes<Element>(32 k).
  const std::size_t blocks = rows * (cols / mx_block_size);
  constexpr std::size_t bytes_per_block = packed_bytes<Element>(mx_block_size);
  auto finish_non_finite = [&](std::size_t first_block, std::uint32_t mask) {
    for (std::size_t j = 0; mask != 0; ++j, mask >>= 1) {
      if ((mask & 1u) == 0) continue;
      for (std::size_t i = 0; i < bytes_per_block; ++i)
        packed_out[(first_block + j) * bytes_per_block + i] = 0;
    }
  };
  // Under nearest even, MXFP4 goes entirely through vector kernels: sixteen blocks at a time (scales in
  // one vector, elements encoded and packed in registers), then two, then one. MXFP6 takes the
  // sixteen-block kernel where the kernel set has one, and the loop below for the rest.
  constexpr bool fp4 = std::is_same_v<Element, e2m1_format>;
  constexpr bool fp6_groups = !fp4 && detail::block_ops::has_mx_fp6_group;
  const std::size_t grouped = random_bits == nullptr && (fp4 || fp6_groups) ? blocks / 16 * 16 : 0;
  for (std::size_t k = 0; k < grouped; k += 16) {
    const float* group = in + k * mx_block_size;
    std::uint8_t* group_out = packed_out + k * bytes_per_block;
    if constexpr (fp4) {
      finish_non_finite(
          k, detail::block_ops::mx_fp4_group(group, mx_element_emax<Element>, scales_e8m0 + k, group_out));
    } else if constexpr (fp6_groups) {
      finish_non_finite(k, detail::mx_fp6_group_of<detail::block_ops, Element>(
                               group, mx_element_emax<Element>, scales_e8m0 + k, group_out));
    }
  }
  const std::size_t vectorised = random_bits == nullptr && fp4 ? blocks : grouped;
  for (std::size_t k = grouped; k < vectorised; k += 2) {  // MXFP4's last blocks
    if (k + 1 == vectorised) {
      scales_e8m0[k] = detail::block_ops::mx_fp4_block(in + k * mx_block_size, mx_element_emax<Element>,
                                                       packed_out + k * bytes_per_block);
      break;
    }
    const std::uint32_t codes = detail::block_ops::mx_fp4_block_pair(
        in + k * mx_block_size, mx_element_emax<Element>, packed_out + k * bytes_per_block);
    scales_e8m0[k] = std::uint8_t(codes);
    scales_e8m0[k + 1] = std::uint8_t(codes >> 8);
    finish_non_finite(k, (scales_e8m0[k] == detail::e8m0_nan ? 1u : 0u) |
                             (scales_e8m0[k + 1] == detail::e8m0_nan ? 2u : 0u));
  }
  // The other blocks (all of them under stochastic rounding), one at a time.
  std::uint8_t codes[mx_block_size];
  for (std::size_t k = vectorised; k < blocks; ++k) {
    const std::size_t first = k * mx_block_size;
    const float* block = in + first;
    const std::uint32_t amax_bits = detail::block_ops::amax_bits(block, mx_block_size);
    std::uint8_t scale = detail::e8m0_nan;
    if (amax_bits >= detail::float_infinity_bits) {  // NaN or Inf in the block
      for (auto& c : codes) c = 0;
    } else {
      scale = detail::mx_scale_code_from_amax_bits(amax_bits, mx_element_emax<Element>);
      const float multiplier = detail::mx_element_multiplier(scale);
      if (random_bits == nullptr) {
        detail::block_ops::encode<Element>(block, mx_block_size, multiplier, codes);
      } else {
        for (std::size_t i = 0; i < mx_block_size; ++i) {
          codes[i] = std::uint8_t(convert_bits<Element, rounding::stochastic, overflow::saturate>(
              block[i] * multiplier, random_bits[first + i]));
        }
      }
    }
    scales_e8m0[k] = scale;
    pack<Element>(codes, mx_block_size, packed_out + packed_bytes<Element>(first));
  }
}

// Back to float: element * X, exact (NaN for the blocks whose scale is NaN).
template <class Element>
void dequantize_mx(const std::uint8_t* packed_in, const std::uint8_t* scales_e8m0, std::size_t rows,
                   std::size_t cols, float* out) {
  static_assert(is_mx_element_v<Element>, "MX element formats here: e2m1_format, e2m3_format, e3m2_format");
  detail::check_block_shape(rows, cols, mx_block_size, "fp8::dequantize_mx");
  detail::check_pointers(packed_in, scales_e8m0, out, rows * cols, "fp8::dequantize_mx");
  const std::size_t blocks = rows * cols / mx_block_size;
  std::uint8_t codes[mx_block_size];
  for (std::size_t k = 0; k < blocks; ++k) {
    const float scale = decode<float, e8m0_format>(scales_e8m0[k]);
    unpack<Element>(packed_in + packed_bytes<Element>(k * mx_block_size), mx_block_size, codes);
    for (std::size_t i = 0; i < mx_block_size; ++i)
      out[k * mx_block_size + i] = decode<float, Element>(codes[i]) * scale;
  }
}

}  // namespace FP8_BLOCK_ABI_NAMESPACE
}  // namespace FP8_QUANTIZE_ABI_NAMESPACE
}  // namespace fp8

// Device conversions from float (and half / bfloat16) to FP8: the one-instruction hardware path
// (cvt.rn.satfinite, sm_89+) for the default policy, single and packed x2 / x4; software elsewhere.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/convert.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../convert.hpp"
#include "../format.hpp"

// The packed conversions below use the same instruction as the core's single conversion
// (FP8_HARDWARE_CONVERSION, convert.hpp): `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32` on sm_89+, which
// rounds to nearest even and saturates (NaN -> 0x7F, +-Inf -> +-max), exactly the core's default
// policy for E4M3 and E5M2, so both paths give the same bits for every float (tests/cuda checks all 2^32).

namespace fp8::cuda {

// True for the formats and the policy the hardware instruction implements. Any other format or
// policy (toward zero, stochastic, non-saturating, E8M0, ...) takes the core's software routine.
template <class Format, rounding Rounding, overflow Overflow>
inline constexpr bool has_hardware_path_v =
    fp8::detail::has_hardware_conversion_v<Format, Rounding, Overflow, float>;

// Four codes packed into 32 bits, element 0 in the low byte: the layout a uint32 store of four
// consecutive FP8 values needs.
using packed_x4 = std::uint32_t;

namespace detail {

#if FP8_HARDWARE_CONVERSION
// The instruction writes its first source operand to the upper byte, so `lo` goes second:
// hardware_cvt_x2<e4m3_format>(1.0f, 2.0f) == 0x4038 (2.0 = 0x40 high, 1.0 = 0x38 low).
template <class Format>
__device__ __forceinline__ std::uint16_t hardware_cvt_x2(float lo, float hi) {
  std::uint16_t packed;
  if constexpr (std::is_same_v<Format, e4m3_format>) {
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(hi), "f"(lo));
  }
  return packed;
}
#endif

// half and bfloat16 hold no value that float cannot represent, so widening first and rounding once
// from the float gives the same code as rounding directly from the 16-bit value.
__host__ __device__ __forceinline__ float exact_float(float x) { return x; }
__host__ __device__ __forceinline__ float exact_float(__half x) { return __half2float(x); }
__host__ __device__ __forceinline__ float exact_float(__nv_bfloat16 x) { return __bfloat162float(x); }

}  // namespace detail

template <class T>
inline constexpr bool is_float_like_v =
    std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// Converts one value to the code of `Format` (a descriptor of format.hpp, usually e4m3_format or
// e5m2_format). half and bfloat16 are widened to float first; fp8::convert_bits then takes the
// one-instruction cvt for the default policy on sm_89+ and the software routine otherwise (a double is
// rounded once from its own bits, never narrowed to float first). `random_bits` feeds stochastic.
//   fp8::cuda::convert<fp8::e4m3_format>(500.0f) == 0x7E (448, saturated)
template <class Format, rounding Rounding = rounding::nearest_even,
          overflow Overflow = Format::default_overflow, class From>
__host__ __device__ __forceinline__ typename Format::storage convert(From value,
                                                                     std::uint32_t random_bits = 0) {
  if constexpr (is_float_like_v<From>) {
    return convert_bits<Format, Rounding, Overflow>(detail::exact_float(value), random_bits);
  } else {
    return convert_bits<Format, Rounding, Overflow>(value, random_bits);
  }
}

// Two values, `lo` in the low byte. One instruction on sm_89+ with the default policy.
template <class Format, rounding Rounding = rounding::nearest_even,
          overflow Overflow = Format::default_overflow>
__host__ __device__ __forceinline__ std::uint16_t convert_x2(float lo, float hi, std::uint32_t random_lo = 0,
                                                             std::uint32_t random_hi = 0) {
  static_assert(sizeof(typename Format::storage) == 1, "packed conversions are for 8-bit formats");
#if FP8_HARDWARE_CONVERSION
  if constexpr (has_hardware_path_v<Format, Rounding, Overflow>) {
    (void)random_lo;
    (void)random_hi;
    return detail::hardware_cvt_x2<Format>(lo, hi);
  } else
#endif
  {
    return std::uint16_t(convert_bits<Format, Rounding, Overflow>(lo, random_lo) |
                         (convert_bits<Format, Rounding, Overflow>(hi, random_hi) << 8));
  }
}

// Four values (x in the low byte, w in the high byte), from two x2 conversions: the layout of a
// 32-bit store of four consecutive FP8 elements. `random` feeds rounding::stochastic lane by lane.
template <class Format, rounding Rounding = rounding::nearest_even,
          overflow Overflow = Format::default_overflow>
__host__ __device__ __forceinline__ packed_x4 convert_x4(float4 v, uint4 random = uint4{0, 0, 0, 0}) {
  const std::uint32_t low = convert_x2<Format, Rounding, Overflow>(v.x, v.y, random.x, random.y);
  const std::uint32_t high = convert_x2<Format, Rounding, Overflow>(v.z, v.w, random.z, random.w);
  return low | (high << 16);
}

// The code fp8's scaled casts make of one value: value * scale (one float multiplication),
// converted rounding to nearest even and saturating. A kernel that writes a linear layer's FP8
// operand itself (linear_layer::fp8_input) makes the layer's codes with it.
template <class Format>
__host__ __device__ __forceinline__ typename Format::storage scaled_code(float value, float scale) {
  return convert<Format, rounding::nearest_even, overflow::saturate>(value * scale);
}

// scaled_code of four values at once, packed as convert_x4 packs them (v.x in the low byte): each
// value times its own scale (a column's, in a transposed copy), or all four times one.
template <class Format>
__host__ __device__ __forceinline__ packed_x4 scaled_codes_x4(float4 v, float4 scale) {
  return convert_x4<Format, rounding::nearest_even, overflow::saturate>(
      float4{v.x * scale.x, v.y * scale.y, v.z * scale.z, v.w * scale.w});
}
template <class Format>
__host__ __device__ __forceinline__ packed_x4 scaled_codes_x4(float4 v, float scale) {
  return scaled_codes_x4<Format>(v, float4{scale, scale, scale, scale});
}

}  // namespace fp8::cuda

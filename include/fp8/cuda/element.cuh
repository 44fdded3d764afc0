// The high-precision element types the device kernels read and write (float, bfloat16, half, also as
// fp8::bfloat16 / fp8::float16), widened exactly to float and narrowed as the CPU quantize layer does.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/element.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../convert.hpp"
#include "../float8.hpp"
#include "../format.hpp"

namespace fp8::cuda {

template <class T>
inline constexpr bool is_element_v =
    std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half> ||
    std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

namespace detail {

template <class T>
inline constexpr bool is_bf16_v = std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, bfloat16>;
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, float16>;

// The bits of a 16-bit element.
template <class T>
__device__ __forceinline__ std::uint16_t bits16(T x) {
  static_assert(sizeof(T) == 2, "16-bit element");
  return fp8::detail::bit_cast<std::uint16_t>(x);
}

// Exact widening: a bfloat16 is the upper half of a float; a half converts exactly.
template <class T>
__device__ __forceinline__ float widen_bits16(std::uint16_t bits) {
  if constexpr (is_bf16_v<T>) {
    constexpr int shift = format_traits<binary32_format>::total_bits - format_traits<bf16_format>::total_bits;
    return __uint_as_float(std::uint32_t(bits) << shift);
  } else {
    return __half2float(__ushort_as_half(bits));
  }
}

}  // namespace detail

template <class T>
__device__ __forceinline__ float widen(T x) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return detail::widen_bits16<T>(detail::bits16(x));
  }
}

// Narrows a float to T rounding to nearest even, exactly as the CPU layer's store does
// (fp8::bfloat16(x) / fp8::float16(x)): overflow gives Inf, every NaN the canonical NaN.
template <class T>
__device__ __forceinline__ T narrow(float x) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    std::uint16_t bits;
    if constexpr (detail::is_bf16_v<T>) {
      bits = ::isnan(x) ? std::uint16_t(bf16_format::canonical_nan)
                        : __bfloat16_as_ushort(__float2bfloat16_rn(x));
    } else {
      bits = ::isnan(x) ? std::uint16_t(fp16_format::canonical_nan) : __half_as_ushort(__float2half_rn(x));
    }
    return fp8::detail::bit_cast<T>(bits);
  }
}

// Four consecutive elements as a float4; `p` must be aligned to 4 elements.
template <class T>
__device__ __forceinline__ float4 load4(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return *reinterpret_cast<const float4*>(p);
  } else {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    return float4{detail::widen_bits16<T>(std::uint16_t(raw.x & 0xFFFFu)),
                  detail::widen_bits16<T>(std::uint16_t(raw.x >> 16)),
                  detail::widen_bits16<T>(std::uint16_t(raw.y & 0xFFFFu)),
                  detail::widen_bits16<T>(std::uint16_t(raw.y >> 16))};
  }
}

// Stores four floats narrowed to T; `p` must be aligned to 4 elements.
template <class T>
__device__ __forceinline__ void store4(T* p, float4 v) {
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float4*>(p) = v;
  } else {
    const auto b = [](float x) { return std::uint32_t(detail::bits16(narrow<T>(x))); };
    *reinterpret_cast<uint2*>(p) = uint2{b(v.x) | (b(v.y) << 16), b(v.z) | (b(v.w) << 16)};
  }
}

// Eight consecutive elements as two float4 in one 16-byte load (two for float); `p` must be aligned
// to 16 bytes.
template <class T>
__device__ __forceinline__ void load8(const T* p, float4& low, float4& high) {
  if constexpr (std::is_same_v<T, float>) {
    low = reinterpret_cast<const float4*>(p)[0];
    high = reinterpret_cast<const float4*>(p)[1];
  } else {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const auto unpack = [](std::uint32_t a, std::uint32_t b) {
      return float4{detail::widen_bits16<T>(std::uint16_t(a & 0xFFFFu)),
                    detail::widen_bits16<T>(std::uint16_t(a >> 16)),
                    detail::widen_bits16<T>(std::uint16_t(b & 0xFFFFu)),
                    detail::widen_bits16<T>(std::uint16_t(b >> 16))};
    };
    low = unpack(raw.x, raw.y);
    high = unpack(raw.z, raw.w);
  }
}

}  // namespace fp8::cuda

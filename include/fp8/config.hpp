// Compiler and platform detection shared by every fp8 header: host/device qualifiers, constexpr
// bit casts, and the overridable FP8_ASSERT.
#pragma once

#include <cstring>
#include <type_traits>

// FP8_HOST_DEVICE marks functions that must be callable from both host and CUDA device code.
// Under nvcc (or clang's CUDA mode) it expands to `__host__ __device__`; a plain host compiler sees
// nothing, so the same header serves both worlds without requiring CUDA.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define FP8_HOST_DEVICE __host__ __device__
#else
#define FP8_HOST_DEVICE
#endif

// True while compiling device code (nvcc's device pass).
#if defined(__CUDA_ARCH__)
#define FP8_DEVICE_PASS 1
#else
#define FP8_DEVICE_PASS 0
#endif

#if defined(__has_builtin)
#define FP8_HAS_BUILTIN(x) __has_builtin(x)
#else
#define FP8_HAS_BUILTIN(x) 0
#endif

// Conversions read the bits of float and double. A constexpr bit cast needs C++20's std::bit_cast or
// the compiler builtin (GCC >= 11, clang >= 9, nvcc's front end); without either the conversions still
// work but only at run time. FP8_CONSTEXPR_CONVERSIONS says which case holds.
#if FP8_HAS_BUILTIN(__builtin_bit_cast) || (defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11)
#define FP8_CONSTEXPR_CONVERSIONS 1
#define FP8_BIT_CAST_CONSTEXPR constexpr
#else
#define FP8_CONSTEXPR_CONVERSIONS 0
#define FP8_BIT_CAST_CONSTEXPR
#endif

// FP8_ASSERT checks internal preconditions in host code. Define it before including fp8 to route
// failures into your own handler; the default is a no-op because the numeric core never fails.
#ifndef FP8_ASSERT
#define FP8_ASSERT(condition) ((void)0)
#endif

namespace fp8::detail {

template <class To, class From>
FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
#if FP8_CONSTEXPR_CONVERSIONS
  return __builtin_bit_cast(To, from);
#else
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
#endif
}

}  // namespace fp8::detail

// The class template behind every format type (fp8_e4m3, fp8_e5m2, fp4_e2m1, ..., bfloat16, float16):
// one byte (or two) of storage, exact decoding, and conversions that round once through convert.hpp.
// Kept light on purpose (no <ostream>, no <functional>): stream output is in <fp8/io.hpp>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <typeindex>  // the lightest standard header that declares std::hash (specialised below)

#include "config.hpp"
#include "convert.hpp"
#include "format.hpp"

namespace fp8 {

namespace detail {
// CUDA's own type with the same encoding as a format, where the program included CUDA's header for it
// before fp8 (cuda_fp8.h, cuda_fp6.h, cuda_fp4.h); void otherwise.
template <class Format>
struct cuda_twin {
  using type = void;
};
#if defined(__CUDA_FP8_TYPES_EXIST__)
template <>
struct cuda_twin<e4m3_format> {
  using type = __nv_fp8_e4m3;
};
template <>
struct cuda_twin<e5m2_format> {
  using type = __nv_fp8_e5m2;
};
#endif
#if defined(__CUDA_FP6_TYPES_EXIST__)
template <>
struct cuda_twin<e2m3_format> {
  using type = __nv_fp6_e2m3;
};
template <>
struct cuda_twin<e3m2_format> {
  using type = __nv_fp6_e3m2;
};
#endif
#if defined(__CUDA_FP4_TYPES_EXIST__)
template <>
struct cuda_twin<e2m1_format> {
  using type = __nv_fp4_e2m1;
};
#endif
template <class Format, class T>
inline constexpr bool is_cuda_twin_v =
    !std::is_void_v<T> && std::is_same_v<T, typename cuda_twin<Format>::type>;
}  // namespace detail

template <class Format>
class minifloat;

template <class T>
struct is_minifloat : std::false_type {};
template <class Format>
struct is_minifloat<minifloat<Format>> : std::true_type {};
template <class T>
inline constexpr bool is_minifloat_v = is_minifloat<T>::value;

// A small binary floating-point number whose format is described by `Format` (see format.hpp).
//  - Trivial: `minifloat() = default` leaves the bits uninitialised (like float), so arrays of it can
//    live in __shared__ memory; `minifloat{}` is +0.
//  - `explicit minifloat(x)` rounds to nearest even with the format's default overflow policy
//    (saturate for FP8, exactly as __nv_fp8_e4m3(float); Inf for bf16/half). Other policies are
//    spelled out at the call site with fp8::convert<...>().
//  - Decoding to float or double is exact.
//  - Arithmetic happens in double and rounds once back, which for these widths is the correctly
//    rounded result (double has more than 2p+2 bits, so double rounding is innocuous).
template <class Format>
class minifloat {
 public:
  using format = Format;
  using traits = format_traits<Format>;
  using storage_type = typename Format::storage;

  minifloat() = default;

  template <class From, std::enable_if_t<detail::is_source_v<From>, int> = 0>
  FP8_HOST_DEVICE constexpr explicit minifloat(const From& value) noexcept
      : bits_(convert_bits<Format>(value)) {}

  FP8_HOST_DEVICE static constexpr minifloat from_bits(storage_type bits) noexcept {
    return minifloat(bits_tag{}, bits);
  }
  FP8_HOST_DEVICE constexpr storage_type bits() const noexcept { return bits_; }

  FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR explicit operator float() const noexcept {
    return decode<float, Format>(bits_);
  }
  FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR explicit operator double() const noexcept {
    return decode<double, Format>(bits_);
  }
  // Integers and other numbers go through double, which holds every value exactly.
  template <class T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_floating_point_v<T>, int> = 0>
  FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR explicit operator T() const noexcept {
    return static_cast<T>(static_cast<double>(*this));
  }

  // Bit-exact interop with CUDA's own types of the same encoding (__nv_fp8_e4m3/e5m2, __nv_fp6_e2m3/
  // e3m2, __nv_fp4_e2m1), implicit both ways, where CUDA's header was included before fp8.
  template <class Cuda, std::enable_if_t<detail::is_cuda_twin_v<Format, Cuda>, int> = 0>
  FP8_HOST_DEVICE minifloat(const Cuda& x) noexcept : bits_(x.__x) {}
  template <class Cuda, std::enable_if_t<detail::is_cuda_twin_v<Format, Cuda>, int> = 0>
  FP8_HOST_DEVICE operator Cuda() const noexcept {
    Cuda x;
    x.__x = bits_;
    return x;
  }

  FP8_HOST_DEVICE constexpr minifloat operator+() const noexcept { return *this; }
  // Negation flips the sign bit (also of zero and NaN), as IEEE negate does; unsigned formats have
  // nothing to flip. In fnuz formats 0 and NaN (0x00, 0x80) negate to themselves: -0 does not exist.
  FP8_HOST_DEVICE constexpr minifloat operator-() const noexcept {
    if (Format::specials == special_values::nan_negative_zero && (bits_ & traits::magnitude_mask) == 0)
      return *this;
    return from_bits(storage_type(bits_ ^ traits::sign_mask));
  }

  FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR minifloat& operator+=(minifloat other) noexcept {
    return *this = minifloat(double(*this) + double(other));
  }
  FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR minifloat& operator-=(minifloat other) noexcept {
    return *this = minifloat(double(*this) - double(other));
  }
  FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR minifloat& operator*=(minifloat other) noexcept {
    return *this = minifloat(double(*this) * double(other));
  }
  FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR minifloat& operator/=(minifloat other) noexcept {
    return *this = minifloat(double(*this) / double(other));
  }

 private:
  struct bits_tag {};
  FP8_HOST_DEVICE constexpr minifloat(bits_tag, storage_type bits) noexcept : bits_(bits) {}

  storage_type bits_;
};

// The formats, by name (ml_dtypes' names in docs/numerics.md).
using fp8_e4m3 = minifloat<e4m3_format>;
using fp8_e5m2 = minifloat<e5m2_format>;
using fp8_e8m0 = minifloat<e8m0_format>;
using fp8_ue4m3 = minifloat<ue4m3_format>;
using fp8_e4m3fnuz = minifloat<e4m3fnuz_format>;
using fp8_e5m2fnuz = minifloat<e5m2fnuz_format>;
using fp8_e3m4 = minifloat<e3m4_format>;
using fp8_e4m3_ieee = minifloat<e4m3_ieee_format>;
using fp6_e2m3 = minifloat<e2m3_format>;
using fp6_e3m2 = minifloat<e3m2_format>;
using fp4_e2m1 = minifloat<e2m1_format>;  // one value per byte; see packed.hpp for two per byte
using bfloat16 = minifloat<bf16_format>;
using float16 = minifloat<fp16_format>;

static_assert(sizeof(fp8_e4m3) == 1 && sizeof(fp8_e5m2) == 1 && sizeof(fp8_e8m0) == 1, "one byte");
static_assert(sizeof(fp4_e2m1) == 1 && sizeof(fp6_e2m3) == 1 && sizeof(fp8_e4m3fnuz) == 1, "one byte");
static_assert(std::is_trivially_default_constructible_v<fp8_e4m3>, "usable in __shared__ arrays");
static_assert(std::is_trivially_copyable_v<fp8_e4m3> && std::is_standard_layout_v<fp8_e4m3>, "POD-like");

namespace detail {
// A minifloat is itself a source: converting between formats rounds once, from the exact value.
template <class Format>
struct source_traits<minifloat<Format>> {
  FP8_HOST_DEVICE static constexpr unpacked unpack(const minifloat<Format>& x) noexcept {
    return unpack_code<Format>(x.bits());
  }
};

#if defined(__CUDA_FP16_TYPES_EXIST__)
template <>
struct source_traits<__half> {
  FP8_HOST_DEVICE static unpacked unpack(const __half& x) noexcept {
    return unpack_code<fp16_format>(static_cast<__half_raw>(x).x);
  }
};
#endif
#if defined(__CUDA_BF16_TYPES_EXIST__)
template <>
struct source_traits<__nv_bfloat16> {
  FP8_HOST_DEVICE static unpacked unpack(const __nv_bfloat16& x) noexcept {
    return unpack_code<bf16_format>(static_cast<__nv_bfloat16_raw>(x).x);
  }
};
#endif
}  // namespace detail

// Converts `value` to the minifloat type `To` with explicit policies, visible at the call site:
//   fp8::convert<fp8::fp8_e4m3, fp8::rounding::toward_zero, fp8::overflow::nonsaturating>(x)
//   fp8::convert<fp8::fp8_e5m2, fp8::rounding::stochastic>(grad, random_bits)
template <class To, rounding Rounding = rounding::nearest_even,
          overflow Overflow = To::format::default_overflow, class From>
FP8_HOST_DEVICE constexpr To convert(const From& value, std::uint32_t random_bits = 0) noexcept {
  static_assert(is_minifloat_v<To>, "convert<To>: To must be an fp8 type such as fp8::fp8_e4m3");
  return To::from_bits(convert_bits<typename To::format, Rounding, Overflow>(value, random_bits));
}

// --- Classification ---

template <class Format>
FP8_HOST_DEVICE constexpr bool isnan(minifloat<Format> x) noexcept {
  return format_traits<Format>::is_nan_code(x.bits());
}
template <class Format>
FP8_HOST_DEVICE constexpr bool isinf(minifloat<Format> x) noexcept {
  return format_traits<Format>::is_inf_code(x.bits());
}
template <class Format>
FP8_HOST_DEVICE constexpr bool isfinite(minifloat<Format> x) noexcept {
  return !isnan(x) && !isinf(x);
}
template <class Format>
FP8_HOST_DEVICE constexpr bool signbit(minifloat<Format> x) noexcept {
  return (x.bits() & format_traits<Format>::sign_mask) != 0;
}
template <class Format>
FP8_HOST_DEVICE constexpr bool iszero(minifloat<Format> x) noexcept {
  return format_traits<Format>::has_zero && !isnan(x) &&
         (x.bits() & format_traits<Format>::magnitude_mask) == 0;
}
// Clears the sign; the fnuz NaN (the sign bit alone) stays NaN.
template <class Format>
FP8_HOST_DEVICE constexpr minifloat<Format> abs(minifloat<Format> x) noexcept {
  using storage = typename Format::storage;
  if (Format::specials == special_values::nan_negative_zero && isnan(x)) return x;
  return minifloat<Format>::from_bits(storage(x.bits() & ~format_traits<Format>::sign_mask));
}

// --- Comparisons: by value, as float compares (NaN unordered, +0 == -0) ---

#define FP8_DEFINE_COMPARISON(op)                                                         \
  template <class Format>                                                                 \
  FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR bool operator op(minifloat<Format> a,            \
                                                          minifloat<Format> b) noexcept { \
    return static_cast<float>(a) op static_cast<float>(b);                                \
  }
FP8_DEFINE_COMPARISON(==)
FP8_DEFINE_COMPARISON(!=)
FP8_DEFINE_COMPARISON(<)
FP8_DEFINE_COMPARISON(<=)
FP8_DEFINE_COMPARISON(>)
FP8_DEFINE_COMPARISON(>=)
#undef FP8_DEFINE_COMPARISON

// --- Arithmetic (see the class comment: computed in double, rounded once) ---

#define FP8_DEFINE_ARITHMETIC(op)                                                                      \
  template <class Format>                                                                              \
  FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR minifloat<Format> operator op(minifloat<Format> a,            \
                                                                       minifloat<Format> b) noexcept { \
    return minifloat<Format>(static_cast<double>(a) op static_cast<double>(b));                        \
  }
FP8_DEFINE_ARITHMETIC(+)
FP8_DEFINE_ARITHMETIC(-)
FP8_DEFINE_ARITHMETIC(*)
FP8_DEFINE_ARITHMETIC(/)
#undef FP8_DEFINE_ARITHMETIC

}  // namespace fp8

// Hashes the code, with -0 folded onto +0 because they compare equal. (NaN never equals anything,
// so its hash is free.) Declared against the primary template that every standard header with a
// hash specialisation provides; <fp8/io.hpp> is not needed for it.
template <class Format>
struct std::hash<fp8::minifloat<Format>> {
  std::size_t operator()(fp8::minifloat<Format> x) const noexcept {
    using storage = typename Format::storage;
    return std::hash<storage>{}(fp8::iszero(x) ? storage(0) : x.bits());
  }
};

// Opt-in Eigen support: makes fp8::minifloat types proper Eigen scalars (Matrix<fp8::fp8_e4m3, ...>
// with products, sum(), norm(), cast<float>()). The core never includes Eigen; this header does.
#pragma once

#include <cmath>

#include <Eigen/Core>

#include "float8.hpp"
#include "io.hpp"  // Eigen prints matrices through the scalar's operator<<
#include "limits.hpp"

namespace fp8 {

// The math Eigen reaches for by argument-dependent lookup. Each computes in double and rounds once,
// like the arithmetic operators.
template <class Format>
minifloat<Format> sqrt(minifloat<Format> x) noexcept {
  return minifloat<Format>(std::sqrt(static_cast<double>(x)));
}

}  // namespace fp8

namespace Eigen {

// An FP8 scalar is its own Real type; Eigen's generic (non-vectorised) kernels handle it, accumulating
// in the FP8 type itself, one rounding per operation. Cast to float first for float accumulation.
template <class Format>
struct NumTraits<fp8::minifloat<Format>> : GenericNumTraits<fp8::minifloat<Format>> {
  using Scalar = fp8::minifloat<Format>;
  using Real = Scalar;
  using NonInteger = Scalar;
  using Literal = Scalar;
  using Nested = Scalar;

  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = Format::has_sign,
    RequireInitialization = 0,
    ReadCost = 1,
    AddCost = 3,
    MulCost = 3,
  };

  static Scalar epsilon() { return std::numeric_limits<Scalar>::epsilon(); }
  // Tolerance for Eigen's isApprox and friends: one ulp at 1.
  static Scalar dummy_precision() { return std::numeric_limits<Scalar>::epsilon(); }
  static Scalar highest() { return std::numeric_limits<Scalar>::max(); }
  static Scalar lowest() { return std::numeric_limits<Scalar>::lowest(); }
  static Scalar infinity() { return std::numeric_limits<Scalar>::infinity(); }
  static Scalar quiet_NaN() { return std::numeric_limits<Scalar>::quiet_NaN(); }
  static int digits10() { return std::numeric_limits<Scalar>::digits10; }
  static int max_digits10() { return std::numeric_limits<Scalar>::max_digits10; }
};

}  // namespace Eigen

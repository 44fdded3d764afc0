// fp8 types as Eigen scalars on Debian's Eigen 3.4: matrices, products, reductions, casts.
#include <doctest/doctest.h>

#include <fp8/eigen.hpp>

#include <Eigen/Dense>

#include <sstream>

TEST_CASE_TEMPLATE("Eigen matrices of FP8 scalars multiply, reduce and cast", T, fp8::fp8_e4m3,
                   fp8::fp8_e5m2) {
  using matrix = Eigen::Matrix<T, 4, 4>;
  using matrix_f = Eigen::Matrix4f;
  // Zeros and ones: every intermediate sum is an integer <= 8, exact in both formats (E5M2 has 3
  // significant bits), so the FP8 results must equal the float ones exactly.
  matrix_f af, bf;
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      af(r, c) = float((r + c) % 2);
      bf(r, c) = float((r * c + 1) % 2);
    }
  }
  const matrix a = af.cast<T>();
  const matrix b = bf.cast<T>();
  const matrix product = a * b;
  CHECK(product.template cast<float>() == af * bf);
  CHECK(a.template cast<float>() == af);
  CHECK(static_cast<float>(a.sum()) == af.sum());
  CHECK((a + b).template cast<float>() == af + bf);
  CHECK(static_cast<float>(a.maxCoeff()) == af.maxCoeff());

  // norm(): sqrt(4 * 2^2) = 4, every partial sum (4, 8, 12, 16) exact in both formats.
  Eigen::Matrix<T, Eigen::Dynamic, 1> v(4);
  v << T(2.0f), T(-2.0f), T(2.0f), T(2.0f);
  CHECK(static_cast<float>(v.squaredNorm()) == 16.0f);
  CHECK(static_cast<float>(v.norm()) == 4.0f);
  CHECK(static_cast<float>(v.cwiseAbs().minCoeff()) == 2.0f);
  CHECK(v.isApprox(v));
}

TEST_CASE("FP8 accumulation rounds at every step: a dynamic product shows it") {
  // 17 ones summed in E4M3: 16 + 1 = 17 is not representable (ulp 2 above 16) and ties to even 16.
  Eigen::Matrix<fp8::fp8_e4m3, 1, Eigen::Dynamic> row =
      Eigen::Matrix<fp8::fp8_e4m3, 1, Eigen::Dynamic>::Constant(17, fp8::fp8_e4m3(1.0f));
  Eigen::Matrix<fp8::fp8_e4m3, Eigen::Dynamic, 1> column =
      Eigen::Matrix<fp8::fp8_e4m3, Eigen::Dynamic, 1>::Constant(17, fp8::fp8_e4m3(1.0f));
  const float fp8_dot = static_cast<float>((row * column)(0, 0));
  const float float_dot = (row.cast<float>() * column.cast<float>())(0, 0);
  CHECK(float_dot == 17.0f);
  CHECK(fp8_dot == 16.0f);
}

TEST_CASE_TEMPLATE("the formats beyond OCP FP8 are Eigen scalars too", T, fp8::fp4_e2m1, fp8::fp6_e2m3,
                   fp8::fp6_e3m2, fp8::fp8_e4m3fnuz, fp8::fp8_e5m2fnuz, fp8::fp8_e3m4, fp8::fp8_e4m3_ieee) {
  // Small integers: every product and partial sum below is at most 4, exact in all of them (FP4 holds
  // 0, 1, 2, 3, 4 exactly; 7 would already round, to 8, and saturate to 6).
  Eigen::Matrix<float, 2, 2> af, bf;
  af << 1.0f, 0.0f, 1.0f, 1.0f;
  bf << 1.0f, 1.0f, 0.0f, 2.0f;
  const Eigen::Matrix<T, 2, 2> a = af.cast<T>();
  const Eigen::Matrix<T, 2, 2> b = bf.cast<T>();
  CHECK((a * b).template cast<float>() == af * bf);
  CHECK(static_cast<float>(a.sum()) == af.sum());
  CHECK(static_cast<float>(Eigen::NumTraits<T>::highest()) ==
        static_cast<float>(std::numeric_limits<T>::max()));
  CHECK(Eigen::NumTraits<T>::IsSigned == 1);
  // Overflow in FP4 arithmetic saturates: 6 + 6 = 6.
  if constexpr (std::is_same_v<T, fp8::fp4_e2m1>) CHECK(static_cast<float>(T(6.0f) + T(6.0f)) == 6.0f);
}

TEST_CASE("the unsigned UE4M3 scale is an unsigned Eigen scalar") {
  Eigen::Matrix<fp8::fp8_ue4m3, 1, 3> s;
  s << fp8::fp8_ue4m3(2.0f), fp8::fp8_ue4m3(448.0f), fp8::fp8_ue4m3(0.5f);
  CHECK(Eigen::NumTraits<fp8::fp8_ue4m3>::IsSigned == 0);
  CHECK(static_cast<float>(s.maxCoeff()) == 448.0f);
  CHECK(static_cast<float>(Eigen::NumTraits<fp8::fp8_ue4m3>::lowest()) == 0.0f);
}

TEST_CASE("Eigen prints matrices of fp8 scalars (operator<< comes with <fp8/eigen.hpp>)") {
  Eigen::Matrix<fp8::fp4_e2m1, 1, 3> m;
  m << fp8::fp4_e2m1(1.5f), fp8::fp4_e2m1(-6.0f), fp8::fp4_e2m1(0.5f);
  std::ostringstream out;
  out << m;
  CHECK(out.str() == "1.5  -6 0.5");
}

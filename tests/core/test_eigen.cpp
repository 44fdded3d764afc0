// fp8 types as Eigen scalars on Debian's Eigen 3.4: matrices, products, reductions, casts.
#include <doctest/doctest.h>

#include <fp8/eigen.hpp>

#include <Eigen/Dense>

TEST_CASE_TEMPLATE("Eigen matrices of FP8 scalars multiply, reduce and cast", T, fp8::fp8_e4m3, fp8::fp8_e5m2) {
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
  Eigen::Matrix<fp8::fp8_e4m3, 1, Eigen::Dynamic> row = Eigen::Matrix<fp8::fp8_e4m3, 1, Eigen::Dynamic>::Constant(17, fp8::fp8_e4m3(1.0f));
  Eigen::Matrix<fp8::fp8_e4m3, Eigen::Dynamic, 1> column = Eigen::Matrix<fp8::fp8_e4m3, Eigen::Dynamic, 1>::Constant(17, fp8::fp8_e4m3(1.0f));
  const float fp8_dot = static_cast<float>((row * column)(0, 0));
  const float float_dot = (row.cast<float>() * column.cast<float>())(0, 0);
  CHECK(float_dot == 17.0f);
  CHECK(fp8_dot == 16.0f);
}

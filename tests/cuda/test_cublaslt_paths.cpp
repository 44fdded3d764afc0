// The paths of the cuBLASLt wrapper that real training takes, on a GPU: decode steps of 1-15 tokens
// (4, 8, 12 with block scales) and products of >= 256 tokens, accumulation into C (beta = 1, in place
// and into a separate C beside an FP8 output), the backward epilogues (bias gradient, GELU with its
// aux matrix and its gradient, an fp16 aux beside an FP8 output), strided batches, grouped products,
// two streams at once, the bounded plan cache and tuning (timing the candidate algorithms, in
// place and under a CUDA graph capture).
//
// Inputs are small integers (exact in E4M3 and BF16) with unit scales, so that with split
// accumulation into FP32 the products are exact: outputs are compared exactly, except where GELU
// (a tanh approximation in cuBLASLt) or a 16-bit output rounding enters, with tolerances stated there.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fp8/cublaslt.hpp>
#include <fp8/fp8.hpp>

#include "device_buffer.hpp"
#include "gpu_skip.hpp"

namespace lt = fp8::cublaslt;

namespace {

using fp8_test::device_buffer;

// A rows x cols row-major matrix of integers in [-3, 3], its E4M3 codes and its values.
struct int_matrix {
  std::size_t rows, cols;
  std::vector<float> values;
  std::vector<std::uint8_t> codes;
};
int_matrix make_int_matrix(std::size_t rows, std::size_t cols, std::size_t seed) {
  int_matrix m{rows, cols, std::vector<float>(rows * cols), std::vector<std::uint8_t>(rows * cols)};
  for (std::size_t i = 0; i < rows * cols; ++i) {
    // Varies along a row (period 7) and from row to row (offset 3 per row), so that a transposed or
    // misplaced operand changes the sums.
    m.values[i] = float(int((i % cols * 5 + i / cols * 3 + seed * 13) % 7) - 3);
    m.codes[i] = fp8::convert_bits<fp8::e4m3_format>(m.values[i]);
  }
  return m;
}

// Y[i][j] = sum_t X[i][t] W[j][t], exact in double.
std::vector<double> reference_linear(const int_matrix& x, const int_matrix& w) {
  std::vector<double> y(x.rows * w.rows);
  for (std::size_t i = 0; i < x.rows; ++i) {
    for (std::size_t j = 0; j < w.rows; ++j) {
      double sum = 0.0;
      for (std::size_t t = 0; t < x.cols; ++t)
        sum += double(x.values[i * x.cols + t]) * w.values[j * w.cols + t];
      y[i * w.rows + j] = sum;
    }
  }
  return y;
}

// An FP8 linear problem with unit scales, split accumulation and an FP32 output.
lt::linear_problem fp8_linear(const device_buffer<std::uint8_t>& x, const device_buffer<std::uint8_t>& w,
                              const device_buffer<float>& y, std::size_t m, std::size_t n, std::size_t k) {
  lt::linear_problem p{};
  p.m = std::int64_t(m);
  p.n = std::int64_t(n);
  p.k = std::int64_t(k);
  p.x = {x.data(), lt::data_type::e4m3};
  p.w = {w.data(), lt::data_type::e4m3};
  p.y = {y.data(), lt::data_type::fp32};
  p.options.purpose = lt::gemm_purpose::gradient;  // split accumulation: integer sums stay exact
  return p;
}

// A gemm() product of m x n x k into the FP32 D `d`, its operands left to the caller.
lt::gemm_problem fp32_output_gemm(const device_buffer<float>& d, std::size_t m, std::size_t n,
                                  std::size_t k) {
  lt::gemm_problem p{};
  p.m = std::int64_t(m);
  p.n = std::int64_t(n);
  p.k = std::int64_t(k);
  p.d = {d.data(), lt::data_type::fp32};
  return p;
}

// The same through gemm(), column-major D[m, n] = op_T(A) op_N(B): A = W-like (m rows of k), B =
// X-like (n columns of k).
lt::gemm_problem fp8_gemm(const device_buffer<std::uint8_t>& a, const device_buffer<std::uint8_t>& b,
                          const device_buffer<float>& d, std::size_t m, std::size_t n, std::size_t k) {
  lt::gemm_problem p = fp32_output_gemm(d, m, n, k);
  p.a = {a.data(), lt::data_type::e4m3};
  p.b = {b.data(), lt::data_type::e4m3};
  p.options.purpose = lt::gemm_purpose::gradient;
  return p;
}

std::size_t count_mismatches(const std::vector<float>& got, const std::vector<double>& expected,
                             double tolerance = 0.0) {
  REQUIRE(got.size() == expected.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(double(got[i]) - expected[i]) <= tolerance) && wrong++ == 0) {
      CAPTURE(i);
      CAPTURE(got[i]);
      CAPTURE(expected[i]);
      FAIL_CHECK("output differs (first shown)");
    }
  }
  return wrong;
}

double gelu(double x) {
  const double c = std::sqrt(2.0 / std::acos(-1.0));
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}
double gelu_gradient(double x) {
  const double c = std::sqrt(2.0 / std::acos(-1.0));
  const double t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

// The BF16 values (exact: small integers) of a rows x cols int_matrix, column-major: element (i, t)
// at t * rows + i, the matrix's transpose stored row-major.
std::vector<std::uint16_t> bf16_column_major(const int_matrix& x) {
  std::vector<std::uint16_t> out(x.rows * x.cols);
  for (std::size_t t = 0; t < x.cols; ++t) {
    for (std::size_t i = 0; i < x.rows; ++i)
      out[t * x.rows + i] = fp8::bfloat16(x.values[i * x.cols + t]).bits();
  }
  return out;
}

// The product of fp8_gemm (column-major D[m, n] = A·Bᵀ of an m x k A and an n x k B) with BF16
// operands from bf16_column_major, in the NT form: A not transposed (ld m), B transposed (ld n).
// BGRADB's only form in cuBLASLt; the other epilogues take it too.
lt::gemm_problem bf16_nt_gemm(const device_buffer<std::uint16_t>& a, const device_buffer<std::uint16_t>& b,
                              const device_buffer<float>& d, std::size_t m, std::size_t n, std::size_t k) {
  lt::gemm_problem p = fp32_output_gemm(d, m, n, k);
  p.op_a = lt::operation::none;
  p.op_b = lt::operation::transpose;
  p.a = {a.data(), lt::data_type::bf16, std::int64_t(m)};
  p.b = {b.data(), lt::data_type::bf16, std::int64_t(n)};
  return p;
}

// bias_gradient_b through `handle`, accumulating into D (beta = 1, as a layer's wgrad): D[m, n] =
// 0.5 + A·Bᵀ (`product`, column-major) and the column sums of op(B) (B's rows) as the bias gradient,
// small integers, both exact in FP32. BGRADB's only form in cuBLASLt: BF16 (or f16, f32) operands, B
// transposed; FP8 products are refused before cuBLASLt is called (test_cublaslt_checks).
void check_bias_gradient_accumulation(lt::handle& handle, const int_matrix& a, const int_matrix& b,
                                      const std::vector<double>& product) {
  const std::size_t m = a.rows, n = b.rows, k = a.cols;
  const device_buffer<std::uint16_t> da16(bf16_column_major(a)), db16(bf16_column_major(b));
  const device_buffer<float> accumulated(std::vector<float>(m * n, 0.5f));
  // The bias gradient has C's type, FP32 here (a bf16 one beside an FP32 output is refused). The
  // buffer holds one guard float past the n that cuBLASLt may write.
  const device_buffer<float> bias_gradient(std::vector<float>(n + 1, -1.0f));
  lt::gemm_problem p = bf16_nt_gemm(da16, db16, accumulated, m, n, k);
  p.c = {accumulated.data()};
  p.options.beta = 1.0f;
  p.options.epilogue_kind = lt::epilogue::bias_gradient_b;
  p.options.bias = bias_gradient.data();
  REQUIRE(lt::bias_type_of(p) == lt::data_type::fp32);
  handle.gemm(p);
  std::vector<double> expected = product;
  for (double& e : expected) e += 0.5;
  CHECK(count_mismatches(accumulated.download(), expected) == 0);
  const std::vector<float> got = bias_gradient.download();
  for (std::size_t j = 0; j < n; ++j) {
    double sum = 0.0;
    for (std::size_t t = 0; t < k; ++t) sum += b.values[j * k + t];
    CAPTURE(j);
    CHECK(double(got[j]) == sum);
  }
  CHECK(got[n] == -1.0f);
}

// A capture of `stream` in `mode` around `work`, ended whatever happens: a throw inside it is
// returned, not propagated, so that a failure leaves no capture open to turn the checks and cases
// after it into failures of their own.
struct capture_result {
  cudaGraph_t graph = nullptr;
  cudaError_t ended = cudaSuccess;
  std::string thrown;
};
template <class Work>
capture_result capture(cudaStream_t stream, cudaStreamCaptureMode mode, Work&& work) {
  capture_result out;
  FP8_CUDA_CHECK(cudaStreamBeginCapture(stream, mode));
  try {
    work();
  } catch (const std::exception& e) { out.thrown = e.what(); }
  out.ended = cudaStreamEndCapture(stream, &out.graph);
  (void)cudaGetLastError();  // an invalidated capture's error is reported through `ended`
  return out;
}

// Launches a captured graph on `stream`, waits for it, and destroys it.
void replay(cudaGraph_t graph, cudaStream_t stream) {
  cudaGraphExec_t exec = nullptr;
  FP8_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  FP8_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  FP8_CUDA_CHECK(cudaStreamSynchronize(stream));
  FP8_CUDA_CHECK(cudaGraphExecDestroy(exec));
  FP8_CUDA_CHECK(cudaGraphDestroy(graph));
}

// gelu_aux through `p` (whose D is `d`, FP32, and whose product is `product`, column-major) saves
// the GELU input in `aux`; dgelu then applies GELU' of that aux to the product.
void check_gelu_aux_then_dgelu(lt::handle& handle, lt::gemm_problem p, const device_buffer<float>& d,
                               const device_buffer<float>& aux, const std::vector<double>& product) {
  const std::size_t count = product.size();
  p.options.epilogue_kind = lt::epilogue::gelu_aux;
  p.options.aux = aux.data();
  REQUIRE(lt::aux_type_of(p) == lt::data_type::fp32);
  handle.gemm(p);
  const std::vector<float> activated = d.download();
  const std::vector<float> saved = aux.download();
  std::size_t wrong = 0;
  for (std::size_t e = 0; e < count; ++e) {
    const double saved_value = double(saved[e]);
    // The aux holds the pre-activation in FP32 (small integer sums: exact); D its GELU in FP32
    // (1e-3 absolute covers the tanh approximation).
    if (!(saved_value == product[e])) ++wrong;
    if (!(std::fabs(double(activated[e]) - gelu(product[e])) <= 1e-3 * (1.0 + std::fabs(product[e]))))
      ++wrong;
  }
  CHECK_MESSAGE(wrong == 0, "gelu_aux");

  // dgelu: D = (A B) * GELU'(aux), the aux as saved above.
  p.options.epilogue_kind = lt::epilogue::dgelu;
  handle.gemm(p);
  const std::vector<float> gradient = d.download();
  wrong = 0;
  for (std::size_t e = 0; e < count; ++e) {
    const double x = double(saved[e]);
    const double expected = product[e] * gelu_gradient(x);
    if (!(std::fabs(double(gradient[e]) - expected) <= 1e-3 * (1.0 + std::fabs(expected)))) ++wrong;
  }
  CHECK_MESSAGE(wrong == 0, "dgelu");
}

// A handle that tunes every plan at its first call (two rounds: enough to order the candidates here).
lt::handle tuning_handle() {
  lt::handle tuned;
  lt::tuning_options options;
  options.enabled = true;
  options.rounds = 2;
  tuned.set_tuning(options);
  return tuned;
}

}  // namespace

TEST_CASE("decode steps of 1 to 15 tokens and products of 256 and 300 tokens through linear()") {
  lt::handle handle;
  const std::size_t n = 256, k = 512;
  const int_matrix w = make_int_matrix(n, k, 2);
  const device_buffer<std::uint8_t> dw(w.codes);
  for (const std::size_t tokens : {1, 2, 3, 7, 8, 15, 256, 300}) {
    CAPTURE(tokens);
    const int_matrix x = make_int_matrix(tokens, k, tokens);
    const device_buffer<std::uint8_t> dx(x.codes);
    const device_buffer<float> dy(tokens * n);
    handle.linear(fp8_linear(dx, dw, dy, tokens, n, k));
    CHECK(count_mismatches(dy.download(), reference_linear(x, w)) == 0);
  }
}

TEST_CASE("block-scaled decode steps: 4, 8 and 12 tokens run exactly; 3 tokens are refused up front") {
  // Unit inverse scales in the sizes cuBLASLt reads (scale_tensor_elements), integer inputs: exact.
  lt::handle handle;
  const std::size_t n = 256, k = 512;
  const int_matrix w = make_int_matrix(n, k, 50);
  const device_buffer<std::uint8_t> dw(w.codes);
  for (const auto& modes : {std::pair{lt::scale_mode::block_1x128, lt::scale_mode::block_128x128},
                            std::pair{lt::scale_mode::block_1x128, lt::scale_mode::block_1x128}}) {
    // Named copies, not a structured binding: CAPTURE's lambda cannot capture one before C++20.
    const lt::scale_mode x_mode = modes.first, w_mode = modes.second;
    const device_buffer<float> w_scale(std::vector<float>(
        std::size_t(lt::scale_tensor_elements(w_mode, std::int64_t(n), std::int64_t(k))), 1.0f));
    for (const std::size_t tokens : {4, 8, 12, 3}) {
      CAPTURE(tokens);
      CAPTURE(lt::name(w_mode));
      const int_matrix x = make_int_matrix(tokens, k, 60 + tokens);
      const device_buffer<std::uint8_t> dx(x.codes);
      const device_buffer<float> x_scale(std::vector<float>(
          std::size_t(lt::scale_tensor_elements(x_mode, std::int64_t(tokens), std::int64_t(k))), 1.0f));
      const device_buffer<float> dy(tokens * n);
      lt::linear_problem p = fp8_linear(dx, dw, dy, tokens, n, k);
      p.x.scaling = x_mode;
      p.x.scale_inv = x_scale.data();
      p.w.scaling = w_mode;
      p.w.scale_inv = w_scale.data();
      if (tokens % 4 != 0) {
        CHECK_THROWS_WITH_AS(handle.linear(p), doctest::Contains("need m and n multiples of 4"),
                             fp8::cublas_error);
        continue;
      }
      handle.linear(p);
      CHECK(count_mismatches(dy.download(), reference_linear(x, w)) == 0);
    }
  }
}

TEST_CASE("beta = 1: FP32 accumulation in place, and a separate bf16 C beside an FP8 output") {
  lt::handle handle;
  const std::size_t m = 64, n = 128, k = 256;
  const int_matrix x = make_int_matrix(m, k, 3), w = make_int_matrix(n, k, 4);
  const device_buffer<std::uint8_t> dx(x.codes), dw(w.codes);
  std::vector<float> start(m * n);
  for (std::size_t i = 0; i < start.size(); ++i) start[i] = float(int(i % 11) - 5);
  const device_buffer<float> dy(start);
  lt::linear_problem p = fp8_linear(dx, dw, dy, m, n, k);
  p.options.beta = 1.0f;
  p.c = {dy.data(), {}, 0};
  handle.linear(p);  // Y = X Wᵀ + Y
  handle.linear(p);  // twice: Y = 2 X Wᵀ + start
  std::vector<double> expected = reference_linear(x, w);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = 2.0 * expected[i] + start[i];
  CHECK(count_mismatches(dy.download(), expected) == 0);

  // FP8 output (E4M3) with D scale 1/64 and a bf16 C of small integers: D = FP8((AB + C) / 64).
  const device_buffer<std::uint8_t> d8(m * n);
  std::vector<std::uint16_t> c_bits(m * n);
  for (std::size_t i = 0; i < c_bits.size(); ++i) c_bits[i] = fp8::bfloat16(float(int(i % 5) - 2)).bits();
  const device_buffer<std::uint16_t> dc(c_bits);
  const device_buffer<float> d_scale(std::vector<float>{1.0f / 64.0f});
  lt::linear_problem q = fp8_linear(dx, dw, dy, m, n, k);
  q.y = {d8.data(), lt::data_type::e4m3, 0, d_scale.data(), nullptr};
  q.options.beta = 1.0f;
  q.c = {dc.data(), lt::data_type::bf16, 0};
  handle.linear(q);
  const std::vector<std::uint8_t> got = d8.download();
  const std::vector<double> product = reference_linear(x, w);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double expected_value = (product[i] + double(int(i % 5) - 2)) / 64.0;
    const double value = fp8::decode<double, fp8::e4m3_format>(got[i]);
    // One E4M3 rounding of the output (2^-3 relative) plus its smallest subnormal.
    if (!(std::fabs(value - expected_value) <= 0.125 * std::fabs(expected_value) + std::ldexp(1.0, -9)))
      ++wrong;
  }
  CHECK(wrong == 0);
}

// One epilogue per test case, not per subcase: a subcase that throws (cuBLASLt refusing an
// epilogue for some types) would keep doctest from entering the subcases after it.
TEST_CASE("bias_gradient_b writes the column sums of op(B), accumulating into D (BF16 operands, NT)") {
  lt::handle handle;
  const std::size_t m = 64, n = 96, k = 128;  // cuBLAS D is m x n, A stored k x m, B stored k x n
  const int_matrix a = make_int_matrix(m, k, 5), b = make_int_matrix(n, k, 6);
  // D[i][j] = sum_t A[i][t] B[j][t], column-major (element (i, j) at j * m + i): B's rows times A's.
  check_bias_gradient_accumulation(handle, a, b, reference_linear(b, a));
}

TEST_CASE("gelu_aux saves the GELU input and dgelu applies GELU', FP8 operands") {
  lt::handle handle;
  const std::size_t m = 64, n = 96, k = 128;
  const int_matrix a = make_int_matrix(m, k, 5), b = make_int_matrix(n, k, 6);
  const device_buffer<std::uint8_t> da(a.codes), db(b.codes);
  const device_buffer<float> dd(m * n), aux(m * n);  // aux: the GELU input in D's type (FP32), ld m
  check_gelu_aux_then_dgelu(handle, fp8_gemm(da, db, dd, m, n, k), dd, aux, reference_linear(b, a));
}

TEST_CASE("gelu_aux saves the GELU input and dgelu applies GELU', BF16 operands") {
  // The same as BF16, so that should cuBLASLt offer no FP8 kernel with these epilogues, this case
  // still shows the wrapper's epilogue path right.
  lt::handle handle;
  const std::size_t m = 64, n = 96, k = 128;
  const int_matrix a = make_int_matrix(m, k, 5), b = make_int_matrix(n, k, 6);
  const device_buffer<std::uint16_t> da16(bf16_column_major(a)), db16(bf16_column_major(b));
  const device_buffer<float> dd(m * n), aux(m * n);
  check_gelu_aux_then_dgelu(handle, bf16_nt_gemm(da16, db16, dd, m, n, k), dd, aux, reference_linear(b, a));
}

TEST_CASE("gelu_aux beside an FP8 output: the GELU input saved in fp16 (C and bias types follow)") {
  lt::handle handle;
  const std::size_t m = 64, n = 96, k = 128;
  const int_matrix a = make_int_matrix(m, k, 70), b = make_int_matrix(n, k, 71);
  const device_buffer<std::uint8_t> da(a.codes), db(b.codes), dd(m * n);
  const device_buffer<std::uint16_t> aux(m * n);  // fp16, the default beside an FP8 output
  const device_buffer<float> d_scale(std::vector<float>{1.0f / 64.0f});
  lt::gemm_problem p{};
  p.m = std::int64_t(m);
  p.n = std::int64_t(n);
  p.k = std::int64_t(k);
  p.a = {da.data(), lt::data_type::e4m3};
  p.b = {db.data(), lt::data_type::e4m3};
  p.d = {dd.data(), lt::data_type::e4m3, 0, d_scale.data(), nullptr};
  p.options.purpose = lt::gemm_purpose::gradient;
  p.options.epilogue_kind = lt::epilogue::gelu_aux;
  p.options.aux = aux.data();
  REQUIRE(lt::aux_type_of(p) == lt::data_type::fp16);
  handle.gemm(p);
  const std::vector<std::uint8_t> got = dd.download();
  const std::vector<std::uint16_t> saved = aux.download();
  std::size_t wrong = 0;
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t i = 0; i < m; ++i) {
      double x = 0.0;
      for (std::size_t t = 0; t < k; ++t) x += double(a.values[i * k + t]) * b.values[j * k + t];
      const std::size_t e = j * m + i;
      // |x| <= 9 k = 1152: an integer exact in fp16.
      if (double(float(fp8::float16::from_bits(saved[e]))) != x) ++wrong;
      // D = E4M3(GELU(x) / 64): one E4M3 rounding (2^-3 relative), the tanh approximation, the
      // smallest subnormal.
      const double expected = gelu(x) / 64.0;
      const double value = fp8::decode<double, fp8::e4m3_format>(got[e]);
      if (!(std::fabs(value - expected) <=
            0.125 * std::fabs(expected) + 1e-3 * (1.0 + std::fabs(x)) / 64.0 + std::ldexp(1.0, -9)))
        ++wrong;
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("strided batches and grouped products") {
  lt::handle handle;
  const std::size_t n = 128, k = 256, batch = 3, tokens = 48;
  const int_matrix w = make_int_matrix(batch * n, k, 8);  // batch weights, each n x k, one after another
  const int_matrix x = make_int_matrix(batch * tokens, k, 9);
  const device_buffer<std::uint8_t> dw(w.codes), dx(x.codes);
  const device_buffer<float> dy(batch * tokens * n);
  lt::linear_problem p = fp8_linear(dx, dw, dy, tokens, n, k);
  p.batch.count = std::int64_t(batch);  // strides 0: packed, one matrix after another
  handle.linear(p);
  std::vector<double> expected;
  for (std::size_t b = 0; b < batch; ++b) {
    const int_matrix xb{tokens,
                        k,
                        {x.values.begin() + std::ptrdiff_t(b * tokens * k),
                         x.values.begin() + std::ptrdiff_t((b + 1) * tokens * k)},
                        {}};
    const int_matrix wb{
        n,
        k,
        {w.values.begin() + std::ptrdiff_t(b * n * k), w.values.begin() + std::ptrdiff_t((b + 1) * n * k)},
        {}};
    const std::vector<double> yb = reference_linear(xb, wb);
    expected.insert(expected.end(), yb.begin(), yb.end());
  }
  CHECK(count_mismatches(dy.download(), expected) == 0);

  // The same batch with X and Y strided 16 bytes past a multiple of 256: every matrix after the first
  // is only 16-byte aligned, which the heuristic must be told (the plan's alignment follows the stride).
  const std::size_t x_stride = tokens * k + 16, y_stride = tokens * n + 4;  // FP8 bytes; fp32: 16 bytes
  std::vector<std::uint8_t> x_strided(batch * x_stride, 0);
  for (std::size_t b = 0; b < batch; ++b) {
    std::copy(x.codes.begin() + std::ptrdiff_t(b * tokens * k),
              x.codes.begin() + std::ptrdiff_t((b + 1) * tokens * k),
              x_strided.begin() + std::ptrdiff_t(b * x_stride));
  }
  const device_buffer<std::uint8_t> dx_strided(x_strided);
  const device_buffer<float> dy_strided(batch * y_stride);
  lt::linear_problem strided = fp8_linear(dx_strided, dw, dy_strided, tokens, n, k);
  strided.batch = {std::int64_t(batch), std::int64_t(x_stride), 0, 0, std::int64_t(y_stride)};
  REQUIRE(
      lt::detail::make_key(lt::with_packed_leading_dimensions(lt::to_gemm(strided)), handle.workspace_bytes())
          .align_b == 16);
  handle.linear(strided);
  const std::vector<float> got_strided = dy_strided.download();
  std::vector<float> unstrided;
  for (std::size_t b = 0; b < batch; ++b) {
    unstrided.insert(unstrided.end(), got_strided.begin() + std::ptrdiff_t(b * y_stride),
                     got_strided.begin() + std::ptrdiff_t(b * y_stride + tokens * n));
  }
  CHECK(count_mismatches(unstrided, expected) == 0);

  // Grouped: three experts with 16, 5 and 300 tokens, each its own weights.
  const std::size_t counts[] = {16, 5, 300};
  std::vector<int_matrix> xs, ws;
  std::vector<std::unique_ptr<device_buffer<std::uint8_t>>> buffers;
  std::vector<std::unique_ptr<device_buffer<float>>> outputs;
  std::vector<lt::linear_problem> group;
  for (std::size_t e = 0; e < 3; ++e) {
    xs.push_back(make_int_matrix(counts[e], k, 20 + e));
    ws.push_back(make_int_matrix(n, k, 30 + e));
    buffers.push_back(std::make_unique<device_buffer<std::uint8_t>>(xs.back().codes));
    buffers.push_back(std::make_unique<device_buffer<std::uint8_t>>(ws.back().codes));
    outputs.push_back(std::make_unique<device_buffer<float>>(counts[e] * n));
    group.push_back(fp8_linear(*buffers[2 * e], *buffers[2 * e + 1], *outputs.back(), counts[e], n, k));
  }
  const auto clear_outputs = [&] {
    for (const auto& out : outputs) FP8_CUDA_CHECK(cudaMemset(out->data(), 0, out->size() * sizeof(float)));
  };
  // With the plan cache and without it (where each member's plan is built for the call).
  for (const bool cached : {true, false}) {
    CAPTURE(cached);
    handle.set_algorithm_cache(cached);
    clear_outputs();
    handle.grouped_linear(group);
    for (std::size_t e = 0; e < 3; ++e) {
      CAPTURE(e);
      CHECK(count_mismatches(outputs[e]->download(), reference_linear(xs[e], ws[e])) == 0);
    }
    // A bad member stops the group before anything runs: the first member's output stays zero.
    const auto good_k = group[1].k;
    group[1].k = 250;
    clear_outputs();
    CHECK_THROWS_AS(handle.grouped_linear(group), fp8::cublas_error);
    const std::vector<float> first = outputs[0]->download();
    CHECK(std::all_of(first.begin(), first.end(), [](float v) { return v == 0.0f; }));
    group[1].k = good_k;
  }
  handle.set_algorithm_cache(true);
}

TEST_CASE("two streams at once: each its own workspace, both results right; the plan cache is bounded") {
  lt::handle handle;
  const std::size_t m = 512, n = 1024, k = 4096;  // large K: split-K algorithms want the workspace
  const int_matrix x = make_int_matrix(m, k, 40), w = make_int_matrix(n, k, 41);
  const device_buffer<std::uint8_t> dx(x.codes), dw(w.codes);
  const device_buffer<float> y1(m * n), y2(m * n);
  cudaStream_t s1 = nullptr, s2 = nullptr;
  FP8_CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  FP8_CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  for (int round = 0; round < 10; ++round) {
    handle.linear(fp8_linear(dx, dw, y1, m, n, k), s1);
    handle.linear(fp8_linear(dx, dw, y2, m, n, k), s2);
  }
  CHECK(handle.workspace_streams() == 2);
  const std::vector<double> expected = reference_linear(x, w);
  CHECK(count_mismatches(y1.download(), expected) == 0);
  CHECK(count_mismatches(y2.download(), expected) == 0);
  handle.release_workspace(s1);
  handle.release_workspace(s2);
  CHECK(handle.workspace_streams() == 0);
  FP8_CUDA_CHECK(cudaStreamDestroy(s1));
  FP8_CUDA_CHECK(cudaStreamDestroy(s2));

  // The special handles: null and cudaStreamLegacy name one stream, so one workspace; each thread's
  // cudaStreamPerThread is a stream of its own, running beside the others, so each its own.
  FP8_CUDA_CHECK(cudaMemset(y1.data(), 0, m * n * sizeof(float)));
  FP8_CUDA_CHECK(cudaMemset(y2.data(), 0, m * n * sizeof(float)));
  handle.linear(fp8_linear(dx, dw, y1, m, n, k), nullptr);
  handle.linear(fp8_linear(dx, dw, y1, m, n, k), cudaStreamLegacy);
  CHECK(handle.workspace_streams() == 1);
  handle.linear(fp8_linear(dx, dw, y1, m, n, k), cudaStreamPerThread);
  FP8_CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
  int device = 0;
  FP8_CUDA_CHECK(cudaGetDevice(&device));
  std::string other_error;
  std::thread other([&] {  // one call at a time on the handle: this thread runs while the test waits
    try {
      FP8_CUDA_CHECK(cudaSetDevice(device));
      handle.linear(fp8_linear(dx, dw, y2, m, n, k), cudaStreamPerThread);
      FP8_CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    } catch (const std::exception& e) { other_error = e.what(); }
  });
  other.join();
  CHECK(other_error == "");
  CHECK(handle.workspace_streams() == 3);
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(count_mismatches(y1.download(), expected) == 0);
  CHECK(count_mismatches(y2.download(), expected) == 0);
  handle.release_workspace(cudaStreamLegacy);  // the workspace null's products used too
  handle.release_workspace(cudaStreamPerThread);
  CHECK(handle.workspace_streams() == 1);  // the other thread's, kept until the handle goes

  handle.set_plan_capacity(2);
  for (const std::size_t tokens : {16, 32, 48, 64}) {
    const device_buffer<float> y(tokens * n);
    handle.linear(fp8_linear(dx, dw, y, tokens, n, k));
  }
  CHECK(handle.cached_plans() == 2);
}

TEST_CASE("tuning: every candidate timed, the fastest kept; every candidate exact; the outputs untouched") {
  lt::handle handle;
  lt::tuning_options options;
  options.candidates = 16;
  options.rounds = 3;
  handle.set_tuning(options);                     // not enabled: tune() tunes when asked, calls do not
  const std::size_t m = 512, n = 1024, k = 4096;  // large K: split-K candidates are among them
  const int_matrix x = make_int_matrix(m, k, 50), w = make_int_matrix(n, k, 51);
  const device_buffer<std::uint8_t> dx(x.codes), dw(w.codes);
  const device_buffer<float> dy(m * n), first(m * n);
  const lt::linear_problem p = fp8_linear(dx, dw, dy, m, n, k);
  const std::vector<double> expected = reference_linear(x, w);

  handle.linear(fp8_linear(dx, dw, first, m, n, k));  // an untuned plan of the same key first
  CHECK(handle.tunings() == 0);
  const lt::tuning_report report = handle.tune_linear(p);
  CHECK(handle.tunings() == 1);
  REQUIRE(report.any_worked());
  CHECK(report.candidates.size() <= 16);
  MESSAGE(report.candidates.size() << " candidates, " << report.fastest_first.size()
                                   << " ran; the heuristic's pick / the fastest = " << report.gain());
  // fastest_first: the ranks that ran, each once, by median time.
  std::vector<std::size_t> ran;
  for (const auto& c : report.candidates) {
    CAPTURE(c.rank);
    CAPTURE(c.algorithm);
    CHECK(c.algorithm.rfind("id ", 0) == 0);  // cuBLASLt's configuration, read for every candidate
    CHECK(c.algorithm.find("id ?") == std::string::npos);
    if (!c.worked) continue;
    ran.push_back(c.rank);
    CHECK(c.ms.size() == 3);
    CHECK(c.median_ms > 0.0);
  }
  std::vector<std::size_t> ordered = report.fastest_first;
  for (std::size_t i = 1; i < ordered.size(); ++i) {
    CHECK(report.candidates[ordered[i - 1]].median_ms <= report.candidates[ordered[i]].median_ms);
  }
  std::sort(ordered.begin(), ordered.end());
  CHECK(ordered == ran);
  // The timed runs wrote scratch: Y is as it was (zeros) until the next call writes it once.
  CHECK(count_mismatches(dy.download(), std::vector<double>(m * n, 0.0)) == 0);
  handle.linear(p);
  CHECK(handle.tunings() == 1);
  CHECK(count_mismatches(dy.download(), expected) == 0);

  // Every candidate the heuristic offers, run on its own into a zeroed Y, is exact: integer sums
  // below 2^24 with split accumulation into FP32, so whichever tuning keeps, the result is the same.
  const lt::gemm_problem g = lt::with_packed_leading_dimensions(lt::to_gemm(p));
  lt::detail::plan all;
  lt::detail::build_plan(all, handle.native_handle(), handle.workspace_bytes(), g, handle.device(), 16);
  const device_buffer<std::uint8_t> workspace(handle.workspace_bytes());
  for (std::size_t i = 0; i < all.algorithms.size(); ++i) {
    CAPTURE(i);
    FP8_CUDA_CHECK(cudaMemset(dy.data(), 0, m * n * sizeof(float)));
    const cublasStatus_t status = lt::detail::matmul(handle.native_handle(), all, i, g, dy.data(), nullptr,
                                                     {workspace.data(), handle.workspace_bytes()});
    if (status != CUBLAS_STATUS_SUCCESS) continue;  // a candidate that cannot run is never kept
    CHECK(count_mismatches(dy.download(), expected) == 0);
  }
}

TEST_CASE("tuning an in-place accumulation (C = D, beta = 1): the timed runs leave D alone") {
  const std::size_t m = 64, n = 128, k = 256;
  const int_matrix x = make_int_matrix(m, k, 52), w = make_int_matrix(n, k, 53);
  const device_buffer<std::uint8_t> dx(x.codes), dw(w.codes);
  std::vector<float> start(m * n);
  for (std::size_t i = 0; i < start.size(); ++i) start[i] = float(int(i % 13) - 6);
  const std::vector<double> product = reference_linear(x, w);
  const auto after = [&](int calls) {
    std::vector<double> y(product.size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = calls * product[i] + start[i];
    return y;
  };
  const auto accumulating = [&](const device_buffer<float>& y) {
    lt::linear_problem p = fp8_linear(dx, dw, y, m, n, k);
    p.options.beta = 1.0f;
    p.c = {y.data(), {}, 0};
    return p;
  };

  SUBCASE("tune() leaves D as it was; the next call adds once") {
    lt::handle handle;
    const device_buffer<float> dy(start);
    const lt::tuning_report report = handle.tune_linear(accumulating(dy));
    CHECK(report.any_worked());
    CHECK(count_mismatches(dy.download(), after(0)) == 0);
    handle.linear(accumulating(dy));
    CHECK(count_mismatches(dy.download(), after(1)) == 0);
  }
  SUBCASE("tuning enabled: the first call tunes, then adds once; the second adds once more") {
    lt::handle handle = tuning_handle();
    const device_buffer<float> dy(start);
    handle.linear(accumulating(dy));
    CHECK(handle.tunings() == 1);
    CHECK(count_mismatches(dy.download(), after(1)) == 0);
    handle.linear(accumulating(dy));
    CHECK(handle.tunings() == 1);  // tuned once
    CHECK(count_mismatches(dy.download(), after(2)) == 0);
  }
}

// BF16 operands: what is tuning's to show here (the timed runs write scratch, never the caller's D or
// aux) does not depend on the operands' type, and BF16 keeps this case apart from whether cuBLASLt
// has FP8 kernels with DGELU (the FP8 gelu_aux/dgelu case above shows that).
TEST_CASE("tuning a dgelu: the timed runs write scratch, the tuned call D once from the aux as it was") {
  const std::size_t m = 64, n = 96, k = 128;  // cuBLAS D is m x n, A stored k x m, B stored k x n
  const int_matrix a = make_int_matrix(m, k, 56), b = make_int_matrix(n, k, 57);
  const device_buffer<std::uint16_t> da16(bf16_column_major(a)), db16(bf16_column_major(b));
  const std::vector<double> product = reference_linear(b, a);  // column-major D[m, n], as above
  lt::handle tuned = tuning_handle();
  const device_buffer<float> activated(m * n), aux(m * n);
  lt::gemm_problem p = bf16_nt_gemm(da16, db16, activated, m, n, k);
  p.options.epilogue_kind = lt::epilogue::gelu_aux;
  p.options.aux = aux.data();
  lt::handle plain;
  plain.gemm(p);  // aux = AB, exact (small integer sums in FP32)
  CHECK(count_mismatches(aux.download(), product) == 0);

  std::vector<double> expected(m * n);
  for (std::size_t e = 0; e < m * n; ++e) expected[e] = product[e] * gelu_gradient(product[e]);
  const auto wrong = [&](const device_buffer<float>& got_buffer) {
    const std::vector<float> got = got_buffer.download();
    std::size_t count = 0;
    for (std::size_t e = 0; e < m * n; ++e) {
      // 1e-3 relative covers the tanh approximation of GELU (as the dgelu cases above).
      if (!(std::fabs(double(got[e]) - expected[e]) <= 1e-3 * (1.0 + std::fabs(expected[e])))) ++count;
    }
    return count;
  };
  // D apart from the aux it reads: whether cuBLASLt may write D over that aux is its own rule
  // (a split-K candidate may reduce in D), which tuning's pick must not be tested against. What is
  // tuning's: tune() writes none of the caller's memory (its timed runs write scratch), and the
  // tuned call then writes D once from the aux as it was.
  const std::vector<float> aux_before = aux.download();
  const std::vector<float> untouched(m * n, -7.0f);
  const device_buffer<float> out(untouched);
  p.d = {out.data(), lt::data_type::fp32};
  p.options.epilogue_kind = lt::epilogue::dgelu;
  const lt::tuning_report report = tuned.tune(p);
  CHECK(report.any_worked());
  CHECK(tuned.tunings() == 1);
  CHECK(out.download() == untouched);
  CHECK(aux.download() == aux_before);
  tuned.gemm(p);
  CHECK(tuned.tunings() == 1);  // tuned by tune(): not again at its first call
  CHECK_MESSAGE(wrong(out) == 0, "the tuned dgelu");
  CHECK(aux.download() == aux_before);
}

TEST_CASE("tuning a bias gradient accumulating into D: the bias gradient and D written once") {
  const std::size_t m = 64, n = 96, k = 128;
  const int_matrix a = make_int_matrix(m, k, 56), b = make_int_matrix(n, k, 57);
  lt::handle tuned = tuning_handle();
  check_bias_gradient_accumulation(tuned, a, b, reference_linear(b, a));
  CHECK(tuned.tunings() == 1);
}

TEST_CASE("a stream's first product inside a global-mode capture: its workspace made, the graph replays it") {
  // The workspace of a stream is allocated by its first product. Where that product is captured
  // (the first step of a program that captures its training step), the allocation must not
  // invalidate the capture: the graph then holds the product, and replays it exactly.
  lt::handle handle;
  const std::size_t m = 256, n = 256, k = 512;
  const int_matrix x = make_int_matrix(m, k, 56), w = make_int_matrix(n, k, 57);
  const device_buffer<std::uint8_t> dx(x.codes), dw(w.codes);
  const device_buffer<float> dy(m * n), warm(m * n);
  {
    // The same product once outside the capture, through another handle: its kernels are loaded
    // (lazily, at a first launch) before the capture, which this case is not about, while `handle`
    // still has neither the plan nor a workspace for the stream.
    lt::handle other;
    other.linear(fp8_linear(dx, dw, warm, m, n, k));
    FP8_CUDA_CHECK(cudaDeviceSynchronize());
  }
  cudaStream_t stream = nullptr;
  FP8_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const capture_result captured = capture(stream, cudaStreamCaptureModeGlobal, [&] {
    handle.linear(fp8_linear(dx, dw, dy, m, n, k), stream);  // a new stream and a new plan
  });
  REQUIRE_MESSAGE(captured.thrown.empty(),
                  "the first product inside the capture failed: " << captured.thrown);
  REQUIRE_MESSAGE(captured.ended == cudaSuccess,
                  "the capture was invalidated: " << cudaGetErrorName(captured.ended));
  CHECK(handle.workspace_streams() == 1);
  CHECK(count_mismatches(dy.download(), std::vector<double>(m * n, 0.0)) == 0);  // captured, not run
  replay(captured.graph, stream);
  CHECK(count_mismatches(dy.download(), reference_linear(x, w)) == 0);

  // Another stream's workspace released while `stream` is captured in global mode: its cudaFree
  // runs in relaxed mode, and the capture must stay valid (the handle's documented promise).
  cudaStream_t spare = nullptr;
  FP8_CUDA_CHECK(cudaStreamCreateWithFlags(&spare, cudaStreamNonBlocking));
  handle.linear(fp8_linear(dx, dw, warm, m, n, k), spare);
  FP8_CUDA_CHECK(cudaStreamSynchronize(spare));
  CHECK(handle.workspace_streams() == 2);
  FP8_CUDA_CHECK(cudaMemset(dy.data(), 0, m * n * sizeof(float)));
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
  const capture_result beside_release = capture(stream, cudaStreamCaptureModeGlobal, [&] {
    handle.linear(fp8_linear(dx, dw, dy, m, n, k), stream);
    handle.release_workspace(spare);
  });
  CHECK_MESSAGE(beside_release.thrown.empty(), "the capture's work failed: " << beside_release.thrown);
  CHECK_MESSAGE(beside_release.ended == cudaSuccess,
                "releasing another stream's workspace invalidated the capture: "
                    << cudaGetErrorName(beside_release.ended));
  CHECK(handle.workspace_streams() == 1);
  if (beside_release.graph != nullptr) {
    replay(beside_release.graph, stream);
    CHECK(count_mismatches(dy.download(), reference_linear(x, w)) == 0);
  }
  FP8_CUDA_CHECK(cudaStreamDestroy(spare));
  handle.release_workspace(stream);
  FP8_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("tuning: refused options and states; CUDA graph captures, its own stream's and another's") {
  lt::handle handle;
  lt::tuning_options bad;
  bad.candidates = 0;
  CHECK_THROWS_WITH_AS(handle.set_tuning(bad), doctest::Contains("candidates is 0"), fp8::invalid_argument);
  handle.set_algorithm_cache(false);
  lt::tuning_options enabled;
  enabled.enabled = true;
  enabled.rounds = 2;
  CHECK_THROWS_WITH_AS(handle.set_tuning(enabled), doctest::Contains("the plan cache, which is off"),
                       fp8::invalid_argument);
  handle.set_algorithm_cache(true);
  handle.set_tuning(enabled);
  CHECK_THROWS_WITH_AS(handle.set_algorithm_cache(false), doctest::Contains("disable tuning first"),
                       fp8::invalid_argument);

  const std::size_t m = 256, n = 256, k = 512;
  const int_matrix x = make_int_matrix(m, k, 54), w = make_int_matrix(n, k, 55);
  const device_buffer<std::uint8_t> dx(x.codes), dw(w.codes);
  const device_buffer<float> dy(m * n), small(16 * n), other(32 * n);
  const lt::linear_problem p = fp8_linear(dx, dw, dy, m, n, k);
  const std::vector<double> expected = reference_linear(x, w);
  cudaStream_t stream = nullptr, beside = nullptr;
  FP8_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  FP8_CUDA_CHECK(cudaStreamCreateWithFlags(&beside, cudaStreamNonBlocking));
  handle.linear(fp8_linear(dx, dw, small, 16, n, k),
                stream);  // the stream's workspace, made outside a capture
  handle.linear(fp8_linear(dx, dw, small, 16, n, k), beside);
  CHECK(handle.tunings() == 1);

  SUBCASE("a plan first called inside its stream's capture is tuned at its first call outside one") {
    bool refused = false;
    const capture_result captured = capture(stream, cudaStreamCaptureModeRelaxed, [&] {
      handle.linear(p, stream);  // a new plan, first called inside the capture: not tuned there
      try {
        (void)handle.tune_linear(p, stream);
      } catch (const fp8::invalid_argument& e) {
        refused = std::string(e.what()).find("captured into a CUDA graph") != std::string::npos;
      }
    });
    // CHECKs, not REQUIREs: a subcase that throws keeps doctest from entering the one after it.
    CHECK_MESSAGE(captured.thrown.empty(), "the product inside the capture failed: " << captured.thrown);
    CHECK_MESSAGE(captured.ended == cudaSuccess,
                  "the capture was invalidated: " << cudaGetErrorName(captured.ended));
    CHECK(refused);
    CHECK(handle.tunings() == 1);
    if (captured.ended == cudaSuccess && captured.graph != nullptr) {
      replay(captured.graph, stream);
      CHECK(count_mismatches(dy.download(), expected) == 0);
    }
    handle.linear(p, stream);  // the first call outside a capture tunes it
    CHECK(handle.tunings() == 2);
    handle.linear(p, stream);  // and only that one
    CHECK(handle.tunings() == 2);
    CHECK(count_mismatches(dy.download(), expected) == 0);
  }
  SUBCASE("tuning on one stream while another is captured in global mode leaves that capture valid") {
    const capture_result captured = capture(beside, cudaStreamCaptureModeGlobal, [&] {
      handle.linear(fp8_linear(dx, dw, small, 16, n, k), beside);  // captured: its plan is tuned
      handle.linear(fp8_linear(dx, dw, other, 32, n, k), stream);  // a new plan, tuned on `stream` now
    });
    CHECK_MESSAGE(captured.thrown.empty(), "a product during the capture failed: " << captured.thrown);
    CHECK(handle.tunings() == 2);
    CHECK_MESSAGE(captured.ended == cudaSuccess,
                  "the capture on the other stream was invalidated: " << cudaGetErrorName(captured.ended));
    if (captured.graph != nullptr) replay(captured.graph, beside);
    std::vector<double> small_expected(expected.begin(), expected.begin() + 16 * n);
    std::vector<double> other_expected(expected.begin(), expected.begin() + 32 * n);
    CHECK(count_mismatches(small.download(), small_expected) == 0);
    CHECK(count_mismatches(other.download(), other_expected) == 0);
  }
  handle.release_workspace(stream);
  handle.release_workspace(beside);
  FP8_CUDA_CHECK(cudaStreamDestroy(stream));
  FP8_CUDA_CHECK(cudaStreamDestroy(beside));
}

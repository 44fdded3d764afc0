// Fuzzes the CPU quantize API under ASan/UBSan, in two ways per input:
//  1. The instruction set the target is built for (detail::simd_ops: AVX-512 or AVX2 with
//     -march=native) against the scalar kernels, bit for bit: codes, scales, amax, the transposed
//     copy and the dequantized values, for every granularity, both formats, float / bfloat16 / half
//     inputs holding any bit pattern (NaN, Inf, subnormals). Any difference aborts.
//  2. The size-checked span overloads with buffers that may be too small: a call either succeeds with
//     the pointer API's result or throws fp8::invalid_argument; an out-of-bounds access is an ASan report.
// Input: 8 bytes of parameters (granularity, format, element type, margin, power-of-two, rows, cols,
// buffer shortfall), then the elements' bits, repeated to fill the matrix.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include <fp8/quantize.hpp>
#include <fp8/scaling.hpp>

namespace {

using fp8::granularity;

[[noreturn]] void mismatch(const char* what) {
  std::fprintf(stderr, "fuzz: %s differs between %s and the scalar kernels\n", what, fp8::quantize_isa);
  std::abort();
}

template <class U>
void expect_equal(const std::vector<U>& a, const std::vector<U>& b, const char* what) {
  if (a.size() != b.size() || (!a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(U)) != 0)) {
    mismatch(what);
  }
}
void expect_equal(float a, float b, const char* what) {
  if (std::memcmp(&a, &b, sizeof(float)) != 0) mismatch(what);
}

struct parameters {
  fp8::quantization q;
  unsigned element = 0;  // 0 float, 1 bfloat16, 2 half
  std::size_t rows = 0, cols = 0;
  std::size_t shortfall = 0;  // how much smaller than needed the span test's buffers are (0: right size)
};

// The results of one kernel set.
struct results {
  std::vector<std::uint8_t> out, out_t, e8m0, e8m0_t;
  std::vector<float> scales, scales_t;
  float amax = 0.0f, amax_t = 0.0f, amax_tensor = 0.0f;
  std::vector<float> back;
};

template <class Ops, class T>
results run_kernels(const std::vector<T>& in, const parameters& p) {
  namespace d = fp8::detail;
  const fp8::quantization& q = p.q;
  const std::size_t n = p.rows * p.cols;
  results r;
  r.out.assign(n, 0);
  r.out_t.assign(n, 0);
  r.back.assign(n, 0.0f);
  r.amax_tensor = d::compute_amax_with<Ops>(in.data(), n);
  if (q.granularity == granularity::mx_1x32) {
    r.e8m0.assign(fp8::scale_count(q.granularity, p.rows, p.cols), 0);
    r.e8m0_t.assign(fp8::scale_count(q.granularity, p.cols, p.rows), 0);
    r.amax = d::quantize_mx_with<Ops>(in.data(), p.rows, p.cols, q, r.out.data(), r.e8m0.data());
    d::dequantize_mx_with<Ops>(r.out.data(), p.rows, p.cols, q, r.e8m0.data(), r.back.data());
    r.amax_t = d::quantize_transpose_mx_with<Ops>(in.data(), p.rows, p.cols, q, r.out.data(), r.e8m0.data(),
                                                  r.out_t.data(), r.e8m0_t.data());
  } else {
    r.scales.assign(fp8::scale_count(q.granularity, p.rows, p.cols), 0.0f);
    r.scales_t.assign(fp8::scale_count(q.granularity, p.cols, p.rows), 0.0f);
    r.amax = d::quantize_blocks_with<Ops>(in.data(), p.rows, p.cols, q, r.out.data(), r.scales.data());
    d::dequantize_blocks_with<Ops>(r.out.data(), p.rows, p.cols, q, r.scales.data(), r.back.data());
    r.amax_t = d::quantize_transpose_blocks_with<Ops>(in.data(), p.rows, p.cols, q, r.out.data(),
                                                      r.scales.data(), r.out_t.data(), r.scales_t.data());
  }
  return r;
}

template <class T>
void compare_kernels(const std::vector<T>& in, const parameters& p) {
  const results simd = run_kernels<fp8::detail::simd_ops>(in, p);
  const results scalar = run_kernels<fp8::detail::scalar_ops>(in, p);
  expect_equal(simd.amax_tensor, scalar.amax_tensor, "compute_amax");
  expect_equal(simd.amax, scalar.amax, "the amax of quantize");
  expect_equal(simd.amax_t, scalar.amax_t, "the amax of quantize_transpose");
  expect_equal(simd.out, scalar.out, "the codes");
  expect_equal(simd.out_t, scalar.out_t, "the transposed codes");
  expect_equal(simd.scales, scalar.scales, "the scales");
  expect_equal(simd.scales_t, scalar.scales_t, "the transposed scales");
  expect_equal(simd.e8m0, scalar.e8m0, "the E8M0 scales");
  expect_equal(simd.e8m0_t, scalar.e8m0_t, "the transposed E8M0 scales");
  expect_equal(simd.back, scalar.back, "the dequantized values");

  // Per tensor with a given scale: the scale comes from the amax, as delayed scaling would make it.
  const std::size_t n = in.size();
  const float scale =
      fp8::detail::scale_from_amax_unchecked(simd.amax_tensor, fp8::max_finite(p.q.format), 0, false, 1.0f);
  std::vector<std::uint8_t> a(n), b(n);
  expect_equal(
      fp8::detail::quantize_with<fp8::detail::simd_ops, true>(in.data(), n, p.q.format, scale, a.data()),
      fp8::detail::quantize_with<fp8::detail::scalar_ops, true>(in.data(), n, p.q.format, scale, b.data()),
      "the amax of the per-tensor quantize");
  expect_equal(a, b, "the per-tensor codes");
  std::vector<float> da(n), db(n);
  fp8::detail::dequantize_with<fp8::detail::simd_ops>(a.data(), n, p.q.format, 1.0f / scale, da.data());
  fp8::detail::dequantize_with<fp8::detail::scalar_ops>(a.data(), n, p.q.format, 1.0f / scale, db.data());
  expect_equal(da, db, "the per-tensor dequantized values");
}

// The span overloads with buffers `shortfall` smaller than needed: an error or the pointer API's result.
template <class T>
void check_spans(const std::vector<T>& in, const parameters& p) {
  const std::size_t n = in.size();
  const auto shrink = [&](std::size_t needed) { return needed > p.shortfall ? needed - p.shortfall : 0; };
  const bool mx = p.q.granularity == granularity::mx_1x32;
  const std::size_t scales = fp8::scale_count(p.q.granularity, p.rows, p.cols);
  const std::size_t scales_t = fp8::scale_count(p.q.granularity, p.cols, p.rows);
  // Heap buffers of exactly the (possibly short) sizes, so that any overflow is an ASan report.
  std::vector<std::uint8_t> out(shrink(n)), out_t(shrink(n));
  std::vector<float> scale_inv(mx ? 0 : shrink(scales)), scale_inv_t(mx ? 0 : shrink(scales_t));
  std::vector<std::uint8_t> e8m0(mx ? shrink(scales) : 0), e8m0_t(mx ? shrink(scales_t) : 0);
  const fp8::span<const T> input(in.data(), n);
  try {
    if (mx) {
      fp8::quantize(input, p.rows, p.cols, p.q, out, e8m0);
      fp8::quantize_transpose(input, p.rows, p.cols, p.q, out, e8m0, out_t, e8m0_t);
    } else {
      fp8::quantize(input, p.rows, p.cols, p.q, out, scale_inv);
      fp8::quantize_transpose(input, p.rows, p.cols, p.q, out, scale_inv, out_t, scale_inv_t);
    }
    fp8::quantize(input, p.q.format, 1.0f, out);
  } catch (const fp8::invalid_argument&) {
    // The documented refusal of a buffer that is too small.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: an exception other than fp8::invalid_argument escaped: %s\n", e.what());
    std::abort();
  }
}

template <class T>
void run(const std::uint8_t* data, std::size_t size, const parameters& p) {
  std::vector<T> in(p.rows * p.cols);
  if (size >= sizeof(T)) {
    const std::size_t available = size / sizeof(T);
    for (std::size_t i = 0; i < in.size(); ++i)
      std::memcpy(&in[i], data + (i % available) * sizeof(T), sizeof(T));
  }
  compare_kernels(in, p);
  check_spans(in, p);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  parameters p;
  p.q.granularity = granularity(data[0] % 5);
  p.q.format = fp8::fp8_format(data[1] & 1);
  p.q.power_of_two_scales = (data[1] >> 1) & 1;
  p.element = ((data[1] >> 2) & 3) % 3;
  p.q.margin = p.q.granularity == granularity::mx_1x32 ? 0 : data[2] % 4;
  p.rows = data[3] % 160;  // more than one 128-row panel
  p.cols = (std::size_t(data[4]) | std::size_t(data[5]) << 8) % 300;
  p.shortfall = data[6] % 4 == 0 ? data[7] % 9 : 0;
  data += 8;
  size -= 8;
  switch (p.element) {
    case 0: run<float>(data, size, p); break;
    case 1: run<fp8::bfloat16>(data, size, p); break;
    default: run<fp8::float16>(data, size, p); break;
  }
  return 0;
}

// FP8 and BF16 products through fp8::cublaslt against a float64 reference computed from the
// dequantized inputs: every operand type pair, output type, scale mode and epilogue (the combinations
// the wrapper rejects must throw), amax and D scale of FP8 outputs, leading dimensions, the cache.
//
// Tolerance, per output element: |got - ref| <= a * S + r(|ref|) + floor, where S = sum_k |x_k w_k|.
//  - a: the tensor cores' FP8 accumulation keeps about 14 significant bits between promotions to FP32;
//    with fast accumulation the whole K loop stays there (2^-7 covers K = 384 with margin), with split
//    accumulation only each 128-wide chunk does (2^-10); BF16 / FP16 products accumulate in FP32 (2^-18).
//  - r: one rounding of the output, taken as a full ulp (2^-p relative, p = stored mantissa bits).
//  - floor: the output's smallest subnormal (divided by the D scale for FP8 outputs).
// GELU epilogues multiply the accumulation term by 1.13 (the largest slope of GELU) and add 1e-3 for
// the tanh approximation cuBLASLt may use instead of erf.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fp8/cublaslt.hpp>
#include <fp8/quantize.hpp>
#include <fp8/scaling.hpp>

#include "device_buffer.hpp"
#include "gpu_skip.hpp"

namespace lt = fp8::cublaslt;
using fp8::fp8_format;
using fp8::granularity;

namespace {

using fp8_test::device_buffer;

lt::data_type lt_type(fp8_format format) {
  return format == fp8_format::e5m2 ? lt::data_type::e5m2 : lt::data_type::e4m3;
}

lt::scale_mode lt_mode(granularity g) {
  switch (g) {
    case granularity::per_row: return lt::scale_mode::row_wise;
    case granularity::tile_1x128: return lt::scale_mode::block_1x128;
    case granularity::block_128x128: return lt::scale_mode::block_128x128;
    default: return lt::scale_mode::tensorwise;
  }
}

// Values whose magnitude changes by row and by 128-column block, so that a scale read from the wrong
// place is off by a factor of 2 or more; a quarter of them negative.
std::vector<float> make_matrix(std::size_t rows, std::size_t cols, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> magnitude(0.1f, 1.0f);
  std::vector<float> values(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const int exponent = int(r % 5) - 2 + int((c / 128) % 3);
      const float sign = generator() % 4 == 0 ? -1.0f : 1.0f;
      values[r * cols + c] = sign * std::ldexp(magnitude(generator), exponent);
    }
  }
  return values;
}

// An FP8 operand quantized by the CPU layer, with its dequantized values for the reference.
struct fp8_operand {
  std::vector<std::uint8_t> codes;
  std::vector<float> scale_inv;
  std::vector<double> values;  // decode(code) * scale_inv, exactly
};

fp8_operand quantize_operand(const std::vector<float>& x, std::size_t rows, std::size_t cols,
                             const fp8::quantization& q) {
  fp8_operand result;
  result.codes.resize(rows * cols);
  result.scale_inv.resize(fp8::scale_count(q.granularity, rows, cols));
  fp8::quantize(x.data(), rows, cols, q, result.codes.data(), result.scale_inv.data());
  const fp8::scale_layout layout = fp8::make_scale_layout(q.granularity, rows, cols);
  result.values.resize(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const std::uint8_t code = result.codes[r * cols + c];
      const double decoded = q.format == fp8_format::e5m2 ? fp8::decode<double, fp8::e5m2_format>(code)
                                                          : fp8::decode<double, fp8::e4m3_format>(code);
      result.values[r * cols + c] = decoded * double(result.scale_inv[layout.index_of_element(r, c)]);
    }
  }
  return result;
}

double gelu(double x) {  // the tanh form (cuBLASLt's); the tolerance covers the erf form too
  const double pi = std::acos(-1.0);
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

// Output and bias elements: stored bits <-> double.
double decode_element(lt::data_type type, const std::uint8_t* p) {
  std::uint16_t half_bits = 0;
  switch (type) {
    case lt::data_type::e4m3: return fp8::decode<double, fp8::e4m3_format>(*p);
    case lt::data_type::e5m2: return fp8::decode<double, fp8::e5m2_format>(*p);
    case lt::data_type::bf16:
      std::memcpy(&half_bits, p, 2);
      return double(float(fp8::bfloat16::from_bits(half_bits)));
    case lt::data_type::fp16:
      std::memcpy(&half_bits, p, 2);
      return double(float(fp8::float16::from_bits(half_bits)));
    case lt::data_type::fp32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
  return 0.0;
}
std::vector<std::uint8_t> encode_vector(lt::data_type type, const std::vector<float>& values) {
  std::vector<std::uint8_t> bytes(values.size() * lt::element_bytes(type));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (type == lt::data_type::bf16) {
      const std::uint16_t b = fp8::bfloat16(values[i]).bits();
      std::memcpy(&bytes[2 * i], &b, 2);
    } else if (type == lt::data_type::fp16) {
      const std::uint16_t b = fp8::float16(values[i]).bits();
      std::memcpy(&bytes[2 * i], &b, 2);
    } else {
      std::memcpy(&bytes[4 * i], &values[i], 4);
    }
  }
  return bytes;
}

// Relative rounding of one output element (a full ulp: 2^-mantissa_bits) and its smallest subnormal,
// from the format descriptors.
template <class Format>
double ulp_of() {
  return std::ldexp(1.0, -fp8::format_traits<Format>::mantissa_bits);
}
template <class Format>
double smallest_subnormal() {
  return fp8::decode<double, Format>(fp8::format_traits<Format>::min_positive_code);
}
double output_ulp(lt::data_type type) {
  switch (type) {
    case lt::data_type::e4m3: return ulp_of<fp8::e4m3_format>();
    case lt::data_type::e5m2: return ulp_of<fp8::e5m2_format>();
    case lt::data_type::bf16: return ulp_of<fp8::bf16_format>();
    case lt::data_type::fp16: return ulp_of<fp8::fp16_format>();
    case lt::data_type::fp32: return ulp_of<fp8::binary32_format>();
  }
  return 1.0;
}
double output_floor(lt::data_type type) {
  switch (type) {
    case lt::data_type::e4m3: return smallest_subnormal<fp8::e4m3_format>();
    case lt::data_type::e5m2: return smallest_subnormal<fp8::e5m2_format>();
    case lt::data_type::fp16: return smallest_subnormal<fp8::fp16_format>();
    default: return 0.0;  // bf16 and fp32 subnormals are far below any tolerance here
  }
}

struct product_case {
  fp8_format x_format;
  fp8_format w_format;
  granularity x_granularity;
  granularity w_granularity;
  lt::data_type output;
  lt::epilogue epilogue;
  lt::gemm_purpose purpose;
};

std::string describe(const product_case& c) {
  return std::string("X ") + fp8::format_name(c.x_format) + "/" + fp8::granularity_name(c.x_granularity) +
         ", W " + fp8::format_name(c.w_format) + "/" + fp8::granularity_name(c.w_granularity) + ", Y " +
         lt::name(c.output) + ", epilogue " + lt::name(c.epilogue) +
         (c.purpose == lt::gemm_purpose::forward ? ", forward" : ", gradient");
}

constexpr std::size_t tokens = 272;        // m: two whole 128-row blocks and a partial one (block order of X)
constexpr std::size_t features_in = 384;   // k: three 128-wide blocks
constexpr std::size_t features_out = 256;  // n

struct run_counts {
  int ran = 0;
  int rejected = 0;
};

void run_fp8_case(lt::handle& handle, const product_case& c, run_counts& counts) {
  const std::size_t m = tokens, k = features_in, n = features_out;
  const fp8::quantization qx{c.x_format, c.x_granularity, 0, false};
  const fp8::quantization qw{c.w_format, c.w_granularity, 0, false};
  const fp8_operand x = quantize_operand(make_matrix(m, k, 11), m, k, qx);
  const fp8_operand w = quantize_operand(make_matrix(n, k, 22), n, k, qw);
  std::vector<float> bias_values(n);
  for (std::size_t j = 0; j < n; ++j) bias_values[j] = float(int(j % 9) - 4) * 0.75f;

  // The float64 reference, before any output scaling, and the accumulation bound S.
  std::vector<double> reference(m * n), magnitude(m * n);
  const bool with_bias = lt::uses_bias(c.epilogue);
  const bool with_gelu = c.epilogue == lt::epilogue::gelu || c.epilogue == lt::epilogue::gelu_bias;
  lt::linear_problem p{};
  p.m = std::int64_t(m);
  p.n = std::int64_t(n);
  p.k = std::int64_t(k);
  p.x.type = lt_type(c.x_format);
  p.w.type = lt_type(c.w_format);
  p.y.type = c.output;
  p.options.epilogue_kind = c.epilogue;
  p.options.purpose = c.purpose;
  const lt::data_type bias_type = lt::default_bias_type(lt::to_gemm(p));
  const std::vector<std::uint8_t> bias_bytes = encode_vector(bias_type, bias_values);
  double amax = 0.0;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double sum = 0.0, bound = 0.0;
      for (std::size_t t = 0; t < k; ++t) {
        const double product = x.values[i * k + t] * w.values[j * k + t];
        sum += product;
        bound += std::fabs(product);
      }
      if (with_bias) sum += decode_element(bias_type, &bias_bytes[j * lt::element_bytes(bias_type)]);
      if (with_gelu) sum = gelu(sum);
      reference[i * n + j] = sum;
      magnitude[i * n + j] = bound;
      amax = std::max(amax, std::fabs(sum));
    }
  }
  // For FP8 outputs, a power-of-two D scale that maps the amax to about half the format's range.
  const bool fp8_output = lt::is_fp8(c.output);
  const double fp8_max =
      fp8::max_finite(c.output == lt::data_type::e5m2 ? fp8_format::e5m2 : fp8_format::e4m3);
  const float d_scale =
      fp8_output ? float(std::ldexp(1.0, int(std::floor(std::log2(fp8_max / amax))) - 1)) : 1.0f;

  const device_buffer<std::uint8_t> dx(x.codes), dw(w.codes);
  const device_buffer<float> dx_scale(x.scale_inv), dw_scale(w.scale_inv);
  const device_buffer<std::uint8_t> dbias(bias_bytes);
  const device_buffer<std::uint8_t> dy(m * n * lt::element_bytes(c.output));
  const device_buffer<float> dscalars(std::vector<float>{d_scale, 0.0f});  // D scale, amax
  p.x = {dx.data(), lt_type(c.x_format), 0, lt_mode(c.x_granularity), dx_scale.data()};
  p.w = {dw.data(), lt_type(c.w_format), 0, lt_mode(c.w_granularity), dw_scale.data()};
  p.y = {dy.data(), c.output, 0, fp8_output ? dscalars.data() : nullptr,
         fp8_output ? dscalars.data() + 1 : nullptr};
  if (with_bias) p.options.bias = dbias.data();

  CAPTURE(describe(c));
  if (const auto why = lt::find_rejection(lt::to_gemm(p), handle.device())) {
    CAPTURE(why->cause);
    CHECK_THROWS_AS(handle.linear(p), fp8::error);  // rejected before cuBLASLt is called
    ++counts.rejected;
    return;
  }
  try {
    handle.linear(p);
  } catch (const fp8::error& e) {
    FAIL_CHECK("the wrapper accepted the product but it failed: " << e.what());
    return;
  }
  ++counts.ran;
  const double fast = lt::uses_fast_accumulation(lt::to_gemm(p)) ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
  const double slope = with_gelu ? 1.13 : 1.0;
  // Y against the reference, and for FP8 outputs the amax cuBLASLt recorded into *amax_slot (max
  // |result| before the D scale).
  const auto check_result = [&](const float* amax_slot) {
    const std::vector<std::uint8_t> y = dy.download();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < m * n; ++i) {
      const double got = decode_element(c.output, &y[i * lt::element_bytes(c.output)]);
      const double expected = reference[i] * d_scale;
      const double tolerance = (slope * fast * magnitude[i] + (with_gelu ? 1e-3 : 0.0)) * d_scale +
                               output_ulp(c.output) * std::fabs(expected) + output_floor(c.output);
      if (!(std::fabs(got - expected) <= tolerance) && wrong++ == 0) {
        CAPTURE(i);
        CAPTURE(got);
        CAPTURE(expected);
        CAPTURE(tolerance);
        FAIL_CHECK("output element out of tolerance (first shown)");
      }
    }
    CHECK(wrong == 0);
    if (amax_slot == nullptr) return;
    float got_amax = 0.0f;
    FP8_CUDA_CHECK(cudaMemcpy(&got_amax, amax_slot, sizeof(float), cudaMemcpyDeviceToHost));
    double bound = 0.0;
    for (std::size_t i = 0; i < m * n; ++i) bound = std::max(bound, slope * fast * magnitude[i]);
    CHECK(std::fabs(got_amax - amax) <= bound + 1e-3);
  };
  check_result(p.y.amax);
  if (fp8_output) {
    // The wrapper asks only float alignment of the D scale (as of the amax, which ran 4 bytes past
    // a 16-byte boundary), where the operands' scales need 16 bytes. The same product with the D
    // scale 4 bytes past the boundary must run and give the same results: a packed slot of a
    // delayed-scaling state is such a pointer. The amax moves to the next boundary, so that a
    // failure here is the D scale's alone. Should cuBLASLt refuse it, the rule is to be tightened
    // to the operands' (validate.hpp, scalar_alignment).
    const device_buffer<float> offset_scalars(std::vector<float>{0.0f, d_scale, 0.0f, 0.0f, 0.0f});
    p.y.scale = offset_scalars.data() + 1;
    p.y.amax = offset_scalars.data() + 4;
    REQUIRE_FALSE(lt::find_rejection(lt::to_gemm(p), handle.device()).has_value());
    // D cleared, so that a run that writes nothing cannot pass on the first run's output.
    FP8_CUDA_CHECK(cudaMemset(dy.data(), 0, dy.size()));
    try {
      handle.linear(p);
    } catch (const fp8::error& e) {
      FAIL_CHECK("the D scale 4 bytes past a 16-byte boundary was accepted but failed: " << e.what());
      return;
    }
    check_result(p.y.amax);
  }
}

}  // namespace

TEST_CASE("FP8 products: every type pair, output type, scale mode and epilogue against float64") {
  lt::handle handle;
  MESSAGE("device: " << handle.device().name << " (sm_" << handle.device().major << handle.device().minor
                     << ")");
  const std::pair<fp8_format, fp8_format> type_pairs[] = {{fp8_format::e4m3, fp8_format::e4m3},
                                                          {fp8_format::e5m2, fp8_format::e4m3},
                                                          {fp8_format::e4m3, fp8_format::e5m2}};
  const std::pair<granularity, granularity> scale_pairs[] = {
      {granularity::per_tensor, granularity::per_tensor},
      {granularity::per_row, granularity::per_row},
      {granularity::tile_1x128, granularity::tile_1x128},
      {granularity::tile_1x128, granularity::block_128x128},
      {granularity::block_128x128, granularity::tile_1x128}};
  const lt::data_type outputs[] = {lt::data_type::e4m3, lt::data_type::e5m2, lt::data_type::bf16,
                                   lt::data_type::fp16, lt::data_type::fp32};
  const lt::epilogue epilogues[] = {lt::epilogue::none, lt::epilogue::bias, lt::epilogue::gelu,
                                    lt::epilogue::gelu_bias};
  run_counts counts;
  for (const auto& [x_format, w_format] : type_pairs) {
    for (const auto& [x_granularity, w_granularity] : scale_pairs) {
      for (const lt::data_type output : outputs) {
        for (const lt::epilogue epilogue : epilogues) {
          run_fp8_case(
              handle,
              {x_format, w_format, x_granularity, w_granularity, output, epilogue, lt::gemm_purpose::forward},
              counts);
        }
      }
    }
  }
  // Split accumulation (the gradient default) for every type pair and output of tensorwise products.
  for (const auto& [x_format, w_format] : type_pairs) {
    for (const lt::data_type output : outputs) {
      run_fp8_case(handle,
                   {x_format, w_format, granularity::per_tensor, granularity::per_tensor, output,
                    lt::epilogue::none, lt::gemm_purpose::gradient},
                   counts);
    }
  }
  MESSAGE(counts.ran << " products ran, " << counts.rejected << " combinations rejected up front");
  CHECK(counts.ran >= 100);
  CHECK(handle.cached_plans() > 0);
}

TEST_CASE("BF16 and FP16 products (the baselines) through the same wrapper") {
  lt::handle handle;
  const std::size_t m = 80, k = 200, n = 144;  // no multiple-of-16 rule for 16-bit products
  const std::vector<float> xf = make_matrix(m, k, 5), wf = make_matrix(n, k, 6);
  for (const lt::data_type input : {lt::data_type::bf16, lt::data_type::fp16}) {
    for (const lt::data_type output : {input, lt::data_type::fp32}) {
      for (const lt::epilogue epilogue : {lt::epilogue::none, lt::epilogue::bias, lt::epilogue::gelu_bias}) {
        const std::vector<std::uint8_t> xb = encode_vector(input, xf), wb = encode_vector(input, wf);
        std::vector<float> bias(n);
        for (std::size_t j = 0; j < n; ++j) bias[j] = 0.5f * float(j % 5);
        const std::vector<std::uint8_t> bias_bytes = encode_vector(output, bias);
        const device_buffer<std::uint8_t> dx(xb), dw(wb), dbias(bias_bytes),
            dy(m * n * lt::element_bytes(output));
        lt::linear_problem p{};
        p.m = std::int64_t(m);
        p.n = std::int64_t(n);
        p.k = std::int64_t(k);
        p.x = {dx.data(), input};
        p.w = {dw.data(), input};
        p.y = {dy.data(), output};
        p.options.epilogue_kind = epilogue;
        if (lt::uses_bias(epilogue)) p.options.bias = dbias.data();
        CAPTURE(lt::name(input));
        CAPTURE(lt::name(output));
        CAPTURE(lt::name(epilogue));
        handle.linear(p);
        const std::vector<std::uint8_t> y = dy.download();
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < m; ++i) {
          for (std::size_t j = 0; j < n; ++j) {
            double sum = 0.0, bound = 0.0;
            for (std::size_t t = 0; t < k; ++t) {
              const double product =
                  decode_element(input, &xb[(i * k + t) * 2]) * decode_element(input, &wb[(j * k + t) * 2]);
              sum += product;
              bound += std::fabs(product);
            }
            if (lt::uses_bias(epilogue))
              sum += decode_element(output, &bias_bytes[j * lt::element_bytes(output)]);
            const bool gelu_on = epilogue == lt::epilogue::gelu_bias;
            if (gelu_on) sum = gelu(sum);
            const double got = decode_element(output, &y[(i * n + j) * lt::element_bytes(output)]);
            const double tolerance = (gelu_on ? 1.13 : 1.0) * std::ldexp(1.0, -18) * bound +
                                     (gelu_on ? 1e-3 : 0.0) + output_ulp(output) * std::fabs(sum) +
                                     output_floor(output);
            if (!(std::fabs(got - sum) <= tolerance) && wrong++ == 0) {
              CAPTURE(got);
              CAPTURE(sum);
              FAIL_CHECK("16-bit product out of tolerance");
            }
          }
        }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("column-major gemm with padded leading dimensions, and the algorithm cache") {
  lt::handle handle;
  const std::size_t m = 64, n = 32, k = 128, lda = k + 16, ldb = k + 32, ldd = m + 16;
  // A stored k x m (op T), B stored k x n (op N), D m x n: values of small integers, exact in FP8.
  std::vector<std::uint8_t> a(lda * m, 0), b(ldb * n, 0);
  std::vector<double> av(k * m), bv(k * n);
  for (std::size_t col = 0; col < m; ++col) {
    for (std::size_t row = 0; row < k; ++row) {
      const float v = float(int((row + 3 * col) % 7) - 3);
      a[col * lda + row] = fp8::convert_bits<fp8::e4m3_format>(v);
      av[col * k + row] = v;
    }
  }
  for (std::size_t col = 0; col < n; ++col) {
    for (std::size_t row = 0; row < k; ++row) {
      const float v = float(int((2 * row + col) % 5) - 2);
      b[col * ldb + row] = fp8::convert_bits<fp8::e4m3_format>(v);
      bv[col * k + row] = v;
    }
  }
  const device_buffer<std::uint8_t> da(a), db(b);
  const device_buffer<float> dd(ldd * n);
  lt::gemm_problem p{};
  p.m = std::int64_t(m);
  p.n = std::int64_t(n);
  p.k = std::int64_t(k);
  p.a = {da.data(), lt::data_type::e4m3, std::int64_t(lda)};
  p.b = {db.data(), lt::data_type::e4m3, std::int64_t(ldb)};
  p.d = {dd.data(), lt::data_type::fp32, std::int64_t(ldd)};
  p.options.alpha = 0.5f;
  p.options.purpose = lt::gemm_purpose::gradient;  // split accumulation: small integer sums are exact
  for (int call = 0; call < 3; ++call) handle.gemm(p);
  CHECK(handle.cached_plans() == 1);
  const std::vector<float> with_cache = dd.download();
  for (std::size_t col = 0; col < n; ++col) {
    for (std::size_t row = 0; row < m; ++row) {
      double sum = 0.0;
      for (std::size_t t = 0; t < k; ++t) sum += av[row * k + t] * bv[col * k + t];
      CAPTURE(row);
      CAPTURE(col);
      CHECK(double(with_cache[col * ldd + row]) == 0.5 * sum);  // integers well inside FP32: exact
    }
  }
  handle.set_algorithm_cache(false);
  CHECK(handle.cached_plans() == 0);
  FP8_CUDA_CHECK(cudaMemset(dd.data(), 0, ldd * n * sizeof(float)));
  handle.gemm(p);
  CHECK(handle.cached_plans() == 0);
  const std::vector<float> without_cache = dd.download();
  for (std::size_t col = 0; col < n; ++col) {
    for (std::size_t row = 0; row < m; ++row)
      CHECK(without_cache[col * ldd + row] == with_cache[col * ldd + row]);
  }
}

TEST_CASE("the checks run on the device path too: misaligned output, E5M2xE5M2") {
  lt::handle handle;
  const device_buffer<std::uint8_t> a(256 * 256), b(256 * 256);
  const device_buffer<std::uint16_t> d(256 * 256 + 8);
  lt::linear_problem p{};
  p.m = p.n = p.k = 256;
  p.x = {a.data(), lt::data_type::e4m3};
  p.w = {b.data(), lt::data_type::e4m3};
  p.y = {reinterpret_cast<std::uint8_t*>(d.data()) + 8, lt::data_type::bf16};
  try {
    handle.linear(p);
    FAIL("a misaligned output was accepted");
  } catch (const fp8::cublas_error& e) {
    CHECK(e.status() == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(std::string(e.what()).find("misaligned pointers: D") != std::string::npos);
  }
  p.y.data = d.data();
  p.x.type = p.w.type = lt::data_type::e5m2;
  CHECK_THROWS_AS(handle.linear(p), fp8::cublas_error);
  p.x.type = lt::data_type::e4m3;
  CHECK_NOTHROW(handle.linear(p));
}

// fp8::quantize / dequantize / quantize_transpose at every granularity against a plain reference
// written from the contract (block amax -> scale_from_amax -> convert_bits of x * scale), bit-exact,
// plus NaN and Inf inside tensors, bfloat16 and half inputs, and every bad argument.
#include <doctest/doctest.h>

#include <fp8/quantize.hpp>
#include <fp8/scaling.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using fp8::fp8_format;
using fp8::granularity;
using fp8::detail::bit_cast;

std::uint32_t bits_of(float x) { return bit_cast<std::uint32_t>(x); }

std::uint8_t code_of(float x, fp8_format format) {
  return format == fp8_format::e5m2
             ? fp8::convert_bits<fp8::e5m2_format, fp8::rounding::nearest_even, fp8::overflow::saturate>(x)
             : fp8::convert_bits<fp8::e4m3_format, fp8::rounding::nearest_even, fp8::overflow::saturate>(x);
}
float value_of(std::uint8_t code, fp8_format format) {
  return format == fp8_format::e5m2 ? fp8::decode<float, fp8::e5m2_format>(code)
                                    : fp8::decode<float, fp8::e4m3_format>(code);
}

// NaN-dominant amax, written directly: any NaN -> NaN, else any Inf -> Inf, else the largest |x|.
template <class T>
float plain_amax(const std::vector<T>& in, std::size_t cols, std::size_t r0, std::size_t r1, std::size_t c0,
                 std::size_t c1) {
  bool nan = false;
  float amax = 0.0f;
  for (std::size_t r = r0; r < r1; ++r) {
    for (std::size_t c = c0; c < c1; ++c) {
      const float x = static_cast<float>(in[r * cols + c]);
      if (std::isnan(x))
        nan = true;
      else
        amax = std::max(amax, std::fabs(x));
    }
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : amax;
}

// The expected output of a current-scaling quantize, from first principles. Block edges and
// scale positions are spelled out per granularity (the cuBLASLt / Transformer Engine layouts).
struct expected_result {
  std::vector<std::uint8_t> codes;
  std::vector<float> scale_inv;    // float granularities
  std::vector<std::uint8_t> e8m0;  // mx_1x32
  float amax = 0.0f;
};

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }
std::size_t round_up4(std::size_t a) { return ceil_div(a, 4) * 4; }

template <class T>
expected_result plain_quantize(const std::vector<T>& in, std::size_t rows, std::size_t cols,
                               const fp8::quantization& q) {
  expected_result result;
  result.codes.resize(rows * cols);
  result.amax = plain_amax(in, cols, 0, rows, 0, cols);
  std::size_t block_h = 1, block_w = 1, scale_entries = 0;
  switch (q.granularity) {
    case granularity::per_tensor:
      block_h = std::max<std::size_t>(rows, 1);
      block_w = std::max<std::size_t>(cols, 1);
      scale_entries = 1;
      break;
    case granularity::per_row:
      block_h = 1;
      block_w = std::max<std::size_t>(cols, 1);
      scale_entries = rows;
      break;
    case granularity::tile_1x128:
      block_h = 1;
      block_w = 128;
      scale_entries = ceil_div(cols, 128) * round_up4(rows);
      break;
    case granularity::block_128x128:
      block_h = 128;
      block_w = 128;
      scale_entries = ceil_div(rows, 128) * round_up4(ceil_div(cols, 128));
      break;
    case granularity::mx_1x32:
      block_h = 1;
      block_w = 32;
      scale_entries = rows * ceil_div(cols, 32);
      break;
  }
  const bool mx = q.granularity == granularity::mx_1x32;
  if (mx)
    result.e8m0.assign(scale_entries, 0);
  else
    result.scale_inv.assign(scale_entries, 0.0f);
  const std::size_t grid_rows = q.granularity == granularity::per_tensor ? 1 : ceil_div(rows, block_h);
  const std::size_t grid_cols = q.granularity == granularity::per_tensor ? 1 : ceil_div(cols, block_w);
  for (std::size_t i = 0; i < grid_rows; ++i) {
    for (std::size_t j = 0; j < grid_cols; ++j) {
      const std::size_t r0 = i * block_h, r1 = std::min(rows, r0 + block_h);
      const std::size_t c0 = j * block_w, c1 = std::min(cols, c0 + block_w);
      const float amax = plain_amax(in, cols, r0, r1, c0, c1);
      float scale = 0.0f;
      if (mx) {
        std::uint8_t e8 = 127;  // 0 / Inf / NaN -> X = 1
        if (amax > 0.0f && std::isfinite(amax)) {
          const int shared_exponent =
              std::max(int(std::floor(std::log2(double(amax)))) - fp8::max_exponent(q.format), -127);
          e8 = std::uint8_t(shared_exponent + 127);
        }
        result.e8m0[i * grid_cols + j] = e8;
        scale = float(std::ldexp(1.0, 127 - int(e8)));
      } else {
        scale = fp8::scale_from_amax(amax, q.format, q.margin, q.power_of_two_scales, 1.0f);
        std::size_t index = 0;
        switch (q.granularity) {
          case granularity::per_tensor: index = 0; break;
          case granularity::per_row: index = i; break;
          case granularity::tile_1x128: index = j * round_up4(rows) + i; break;
          default: index = i * round_up4(grid_cols) + j; break;
        }
        result.scale_inv[index] = 1.0f / scale;
      }
      for (std::size_t r = r0; r < r1; ++r) {
        for (std::size_t c = c0; c < c1; ++c) {
          result.codes[r * cols + c] = code_of(static_cast<float>(in[r * cols + c]) * scale, q.format);
        }
      }
    }
  }
  return result;
}

template <class T>
std::vector<T> transposed(const std::vector<T>& in, std::size_t rows, std::size_t cols) {
  std::vector<T> out(in.size());
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
  }
  return out;
}

template <class T>
std::vector<T> random_matrix(std::size_t rows, std::size_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-12.0f, 12.0f);
  std::vector<T> m(rows * cols);
  // Rows of very different magnitudes, so that per-row, tile and block scales differ.
  for (std::size_t r = 0; r < rows; ++r) {
    const float row_scale = std::exp2(exponent(rng));
    for (std::size_t c = 0; c < cols; ++c)
      m[r * cols + c] = T(normal(rng) * row_scale * (c % 7 == 0 ? 50.0f : 1.0f));
  }
  return m;
}

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const granularity float_granularities[] = {granularity::per_tensor, granularity::per_row,
                                           granularity::tile_1x128, granularity::block_128x128};
const std::pair<std::size_t, std::size_t> shapes[] = {
    {1, 1}, {3, 5}, {1, 300}, {7, 128}, {128, 128}, {130, 257}, {257, 129}, {64, 1000}, {5, 33}};

template <class T>
void check_all_granularities(std::mt19937& rng) {
  for (const auto& shape : shapes) {
    const std::size_t rows = shape.first, cols = shape.second;
    const std::vector<T> in = random_matrix<T>(rows, cols, rng);
    for (const fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
      for (const granularity g : float_granularities) {
        for (const auto& scale_options : {std::pair{0, false}, std::pair{2, true}}) {
          const int margin = scale_options.first;
          const fp8::quantization q{format, g, margin, scale_options.second};
          CAPTURE(rows);
          CAPTURE(cols);
          CAPTURE(fp8::format_name(format));
          CAPTURE(fp8::granularity_name(g));
          CAPTURE(margin);
          const expected_result want = plain_quantize(in, rows, cols, q);
          std::vector<std::uint8_t> codes(rows * cols);
          std::vector<float> scale_inv(fp8::scale_count(g, rows, cols), -1.0f);
          const float amax = fp8::quantize(in.data(), rows, cols, q, codes.data(), scale_inv.data());
          CHECK(bits_of(amax) == bits_of(want.amax));
          CHECK(codes == want.codes);
          CHECK(same_floats(scale_inv, want.scale_inv));

          // The transposed copy is the quantization of the transpose; the row-major copy is unchanged.
          const expected_result want_t = plain_quantize(transposed(in, rows, cols), cols, rows, q);
          std::vector<std::uint8_t> codes2(rows * cols), codes_t(rows * cols);
          std::vector<float> scale_inv2(scale_inv.size()),
              scale_inv_t(fp8::scale_count(g, cols, rows), -1.0f);
          const float amax2 = fp8::quantize_transpose(in.data(), rows, cols, q, codes2.data(),
                                                      scale_inv2.data(), codes_t.data(), scale_inv_t.data());
          CHECK(bits_of(amax2) == bits_of(want.amax));
          CHECK(codes2 == want.codes);
          CHECK(same_floats(scale_inv2, want.scale_inv));
          CHECK(codes_t == want_t.codes);
          CHECK(same_floats(scale_inv_t, want_t.scale_inv));

          // Dequantize: decode * scale_inv of the element's block, rounded once to T.
          std::vector<T> back(rows * cols);
          fp8::dequantize(codes.data(), rows, cols, q, scale_inv.data(), back.data());
          const fp8::scale_layout layout = fp8::make_scale_layout(g, rows, cols);
          bool all_match = true;
          for (std::size_t r = 0; r < rows && all_match; ++r) {
            for (std::size_t c = 0; c < cols; ++c) {
              const float expected =
                  value_of(codes[r * cols + c], format) * scale_inv[layout.index_of_element(r, c)];
              const T expected_t = T(expected);
              if (std::memcmp(&expected_t, &back[r * cols + c], sizeof(T)) != 0) {
                CAPTURE(r);
                CAPTURE(c);
                all_match = false;
              }
            }
          }
          CHECK(all_match);
        }
      }
    }
  }
}

template <class T>
void check_mx(std::mt19937& rng) {
  for (const auto& shape : shapes) {
    const std::size_t rows = shape.first, cols = shape.second;
    const std::vector<T> in = random_matrix<T>(rows, cols, rng);
    for (const fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
      const fp8::quantization q{format, granularity::mx_1x32};
      CAPTURE(rows);
      CAPTURE(cols);
      CAPTURE(fp8::format_name(format));
      const expected_result want = plain_quantize(in, rows, cols, q);
      std::vector<std::uint8_t> codes(rows * cols), e8m0(fp8::scale_count(q.granularity, rows, cols));
      const float amax = fp8::quantize(in.data(), rows, cols, q, codes.data(), e8m0.data());
      CHECK(bits_of(amax) == bits_of(want.amax));
      CHECK(codes == want.codes);
      CHECK(e8m0 == want.e8m0);

      const expected_result want_t = plain_quantize(transposed(in, rows, cols), cols, rows, q);
      std::vector<std::uint8_t> codes2(rows * cols), codes_t(rows * cols), e8m0_2(e8m0.size()),
          e8m0_t(fp8::scale_count(q.granularity, cols, rows));
      fp8::quantize_transpose(in.data(), rows, cols, q, codes2.data(), e8m0_2.data(), codes_t.data(),
                              e8m0_t.data());
      CHECK(codes2 == want.codes);
      CHECK(e8m0_2 == want.e8m0);
      CHECK(codes_t == want_t.codes);
      CHECK(e8m0_t == want_t.e8m0);

      std::vector<float> back(rows * cols);
      fp8::dequantize(codes.data(), rows, cols, q, e8m0.data(), back.data());
      bool all_match = true;
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t c = 0; c < cols; ++c) {
          const float x = float(std::ldexp(1.0, int(e8m0[r * ceil_div(cols, 32) + c / 32]) - 127));
          all_match =
              all_match && bits_of(back[r * cols + c]) == bits_of(value_of(codes[r * cols + c], format) * x);
        }
      }
      CHECK(all_match);
    }
  }
}

}  // namespace

TEST_CASE("the program runs the kernels it was built for") {
  CHECK(std::string(fp8::quantize_isa) == FP8_TEST_EXPECTED_ISA);
}

TEST_CASE_TEMPLATE("every float granularity, both formats, transposed copy, dequantize: bit-exact", T, float,
                   fp8::bfloat16, fp8::float16) {
  std::mt19937 rng(2024);
  check_all_granularities<T>(rng);
}

TEST_CASE_TEMPLATE("MX 1x32 with E8M0 scales (OCP rule): bit-exact", T, float, fp8::bfloat16, fp8::float16) {
  std::mt19937 rng(77);
  check_mx<T>(rng);
}

TEST_CASE("MX worked example: amax 100 under E4M3 gives X = 2^-2; 100 / X = 400 rounds to even, 384") {
  std::vector<float> in(32, 1.0f);
  in[3] = 100.0f;
  std::vector<std::uint8_t> codes(32), e8m0(1);
  fp8::quantize(in.data(), 1, 32, fp8::quantization{fp8_format::e4m3, granularity::mx_1x32}, codes.data(),
                e8m0.data());
  CHECK(int(e8m0[0]) == 125);
  CHECK(value_of(codes[3], fp8_format::e4m3) == 384.0f);  // 400 is the tie of 384 and 416
  CHECK(value_of(codes[0], fp8_format::e4m3) == 4.0f);
}

TEST_CASE("per-tensor quantize with a given scale: codes, amax, the transposed copy") {
  std::mt19937 rng(5);
  for (const auto& shape : shapes) {
    const std::size_t rows = shape.first, cols = shape.second;
    const std::vector<float> in = random_matrix<float>(rows, cols, rng);
    for (const fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
      const float scale = 3.0f;
      std::vector<std::uint8_t> codes(rows * cols), codes_t(rows * cols), cast_only(rows * cols);
      const float amax = fp8::quantize(in.data(), rows * cols, format, scale, codes.data());
      fp8::cast_to_fp8(in.data(), rows * cols, format, cast_only.data(), scale);
      bool all_match = true;
      for (std::size_t i = 0; i < in.size(); ++i)
        all_match = all_match && codes[i] == code_of(in[i] * scale, format);
      CHECK(all_match);
      CHECK(cast_only == codes);
      CHECK(bits_of(amax) == bits_of(plain_amax(in, cols, 0, rows, 0, cols)));
      CHECK(bits_of(fp8::compute_amax(in.data(), in.size())) == bits_of(amax));
      std::vector<std::uint8_t> codes2(rows * cols);
      const float amax2 =
          fp8::quantize_transpose(in.data(), rows, cols, format, scale, codes2.data(), codes_t.data());
      CHECK(bits_of(amax2) == bits_of(amax));
      CHECK(codes2 == codes);
      CHECK(codes_t == transposed(codes, rows, cols));
    }
  }
}

TEST_CASE("NaN and Inf inside a tensor: amax reports them, scales stay finite, other blocks unaffected") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::size_t rows = 2, cols = 256;  // two 1x128 tiles per row
  std::vector<float> in(rows * cols, 0.5f);
  in[5] = nan;            // row 0, tile 0
  in[cols + 200] = -inf;  // row 1, tile 1
  in[cols + 10] = 7.0f;   // row 1, tile 0: an ordinary tile

  std::vector<std::uint8_t> codes(rows * cols);
  std::vector<float> scale_inv(fp8::scale_count(granularity::tile_1x128, rows, cols));
  const float amax =
      fp8::quantize(in.data(), rows, cols, fp8::quantization{fp8_format::e4m3, granularity::tile_1x128},
                    codes.data(), scale_inv.data());
  CHECK(std::isnan(amax));  // NaN wins over Inf in the reported amax
  for (const float s : scale_inv) CHECK(std::isfinite(s));
  const fp8::scale_layout layout = fp8::make_scale_layout(granularity::tile_1x128, rows, cols);
  CHECK(scale_inv[layout.index(0, 0)] == 1.0f);  // NaN tile: scale 1
  CHECK(scale_inv[layout.index(1, 1)] == 1.0f);  // Inf tile: scale 1
  CHECK(scale_inv[layout.index(1, 0)] == 7.0f / 448.0f);
  CHECK(scale_inv[layout.index(0, 1)] == 0.5f / 448.0f);
  CHECK(int(codes[5]) == 0x7F);           // NaN -> the NaN code
  CHECK(int(codes[cols + 200]) == 0xFE);  // -Inf saturates to -448
  CHECK(value_of(codes[cols + 10], fp8_format::e4m3) == 448.0f);

  // Per tensor: Inf only -> amax Inf, scale 1; the finite values keep their FP8 value (scale 1).
  std::vector<float> with_inf = {1.0f, inf, -2.0f};
  std::vector<std::uint8_t> c3(3);
  float s1 = 0.0f;
  CHECK(std::isinf(fp8::quantize(with_inf.data(), 1, 3, fp8::quantization{}, c3.data(), &s1)));
  CHECK(s1 == 1.0f);
  CHECK(value_of(c3[2], fp8_format::e4m3) == -2.0f);

  // MX: a NaN block gets X = 1 (code 127), never the E8M0 NaN code.
  std::vector<float> mx_in(64, 0.25f);
  mx_in[40] = nan;
  std::vector<std::uint8_t> mx_codes(64), e8m0(2);
  fp8::quantize(mx_in.data(), 1, 64, fp8::quantization{fp8_format::e4m3, granularity::mx_1x32},
                mx_codes.data(), e8m0.data());
  CHECK(int(e8m0[1]) == 127);
  CHECK(int(e8m0[0]) == 127 - 2 - 8);  // 0.25 = 2^-2, emax 8
}

TEST_CASE("amax of the edge-case inputs (0, denormal, huge) and the scales they give") {
  std::vector<float> zeros(40, 0.0f);
  zeros[3] = -0.0f;
  std::vector<std::uint8_t> codes(40);
  float scale_inv = 0.0f;
  CHECK(fp8::quantize(zeros.data(), 1, 40, fp8::quantization{}, codes.data(), &scale_inv) == 0.0f);
  CHECK(scale_inv == 1.0f);
  CHECK(int(codes[3]) == 0x80);  // -0 keeps its sign

  std::vector<float> denormal(40, std::numeric_limits<float>::denorm_min());
  fp8::quantize(denormal.data(), 1, 40, fp8::quantization{}, codes.data(), &scale_inv);
  CHECK(scale_inv == 1.0f / FLT_MAX);  // 448 / denorm overflows: scale FLT_MAX
  CHECK(std::isfinite(scale_inv));

  std::vector<float> huge(40, FLT_MAX);
  fp8::quantize(huge.data(), 1, 40, fp8::quantization{}, codes.data(), &scale_inv);
  CHECK(scale_inv == 1.0f / (448.0f / FLT_MAX));
  CHECK(int(codes[0]) == 0x7E);
}

TEST_CASE("empty tensors: per-tensor scale 1, nothing else touched") {
  float scale_inv = -1.0f;
  CHECK(fp8::quantize(static_cast<const float*>(nullptr), 0, 0, fp8::quantization{}, nullptr, &scale_inv) ==
        0.0f);
  CHECK(scale_inv == 1.0f);
  std::vector<float> none;
  CHECK(fp8::compute_amax(none.data(), 0) == 0.0f);
  CHECK(fp8::scale_count(granularity::per_row, 0, 5) == 0);
}

TEST_CASE("bad arguments: clear errors, outputs untouched") {
  std::vector<float> in(256, 1.0f);
  std::vector<std::uint8_t> codes(256, 0xAB);
  std::vector<float> scale_inv(64, -7.0f);
  const auto untouched = [&] {
    return std::all_of(codes.begin(), codes.end(), [](std::uint8_t c) { return c == 0xAB; }) &&
           std::all_of(scale_inv.begin(), scale_inv.end(), [](float s) { return s == -7.0f; });
  };
  const auto message_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const fp8::invalid_argument& e) { return e.what(); }
    return "no exception";
  };
  CHECK(message_of([&] {
          fp8::quantize(in.data(), 256, fp8_format::e4m3, 0.0f, codes.data());
        }).find("scale") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(in.data(), 256, fp8_format::e4m3, std::numeric_limits<float>::infinity(),
                        codes.data());
        }).find("positive finite") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(in.data(), 256, fp8_format::e4m3, std::nanf(""), codes.data());
        }).find("scale") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(static_cast<const float*>(nullptr), 256, fp8_format::e4m3, 1.0f, codes.data());
        }).find("in is null") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(in.data(), 256, fp8_format::e4m3, 1.0f, nullptr);
        }).find("out is null") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(in.data(), 256, fp8_format(9), 1.0f, codes.data());
        }).find("fp8_format") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(in.data(), 2, 128, fp8::quantization{fp8_format::e4m3, granularity::mx_1x32},
                        codes.data(), scale_inv.data());
        }).find("E8M0") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(in.data(), 2, 128, fp8::quantization{fp8_format::e4m3, granularity::per_row},
                        codes.data(), reinterpret_cast<std::uint8_t*>(scale_inv.data()));
        }).find("only for mx_1x32") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(in.data(), 2, 128, fp8::quantization{fp8_format::e4m3, granularity::mx_1x32, 1},
                        codes.data(), reinterpret_cast<std::uint8_t*>(scale_inv.data()));
        }).find("no margin") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(in.data(), 2, 128, fp8::quantization{fp8_format::e4m3, granularity::per_row, -1},
                        codes.data(), scale_inv.data());
        }).find("margin must be >= 0") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(in.data(), 2, 128, fp8::quantization{fp8_format::e4m3, granularity(42)}, codes.data(),
                        scale_inv.data());
        }).find("granularity") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(in.data(), std::numeric_limits<std::size_t>::max(), 2, fp8::quantization{},
                        codes.data(), scale_inv.data());
        }).find("overflows") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize(in.data(), 2, 128, fp8::quantization{fp8_format::e4m3, granularity::per_row},
                        codes.data(), static_cast<float*>(nullptr));
        }).find("scale buffer is null") != std::string::npos);
  CHECK(message_of([&] {
          fp8::quantize_transpose(in.data(), 2, 128, fp8::quantization{}, codes.data(), scale_inv.data(),
                                  nullptr, scale_inv.data());
        }).find("out_t is null") != std::string::npos);
  CHECK(untouched());

  // Dequantize refuses a bad scale_inv in any block before writing anything.
  std::vector<float> back(256, 42.0f);
  std::vector<float> block_scales(fp8::scale_count(granularity::tile_1x128, 2, 128), 1.0f);
  block_scales[1] = std::numeric_limits<float>::infinity();  // row 1's tile
  std::vector<std::uint8_t> good_codes(256, 0x38);
  CHECK(message_of([&] {
          fp8::dequantize(good_codes.data(), 2, 128,
                          fp8::quantization{fp8_format::e4m3, granularity::tile_1x128}, block_scales.data(),
                          back.data());
        }).find("block (1, 0)") != std::string::npos);
  CHECK(message_of([&] {
          fp8::dequantize(good_codes.data(), 256, fp8_format::e4m3, -1.0f, back.data());
        }).find("scale_inv") != std::string::npos);
  std::vector<std::uint8_t> nan_e8m0(8, 127);
  nan_e8m0[5] = 0xFF;
  CHECK(message_of([&] {
          fp8::dequantize(good_codes.data(), 2, 128,
                          fp8::quantization{fp8_format::e4m3, granularity::mx_1x32}, nan_e8m0.data(),
                          back.data());
        }).find("NaN code") != std::string::npos);
  CHECK(std::all_of(back.begin(), back.end(), [](float v) { return v == 42.0f; }));
}

// Sizes at the edges of the quantize API: empty matrices in the transposed copy, scale counts near
// SIZE_MAX, and the span overloads that check every buffer's size before anything is read or written.
#include <doctest/doctest.h>

#include <fp8/quantize.hpp>
#include <fp8/scaling.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using fp8::fp8_format;
using fp8::granularity;

constexpr std::array<granularity, 4> float_granularities = {
    granularity::per_tensor, granularity::per_row, granularity::tile_1x128, granularity::block_128x128};

template <class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const fp8::invalid_argument& e) { return e.what(); }
  return "no exception";
}

// 128-bit arithmetic (a GCC / Clang extension) holds every product of two size_t values exactly.
__extension__ typedef unsigned __int128 wide;

// The exact number of scale entries, from the layouts' definitions.
wide exact_count(granularity g, std::size_t rows, std::size_t cols) {
  const auto ceil_div = [](wide a, wide b) { return (a + b - 1) / b; };
  switch (g) {
    case granularity::per_tensor: return 1;
    case granularity::per_row: return rows;
    case granularity::tile_1x128: return ceil_div(cols, 128) * (ceil_div(rows, 4) * 4);
    case granularity::block_128x128: return ceil_div(rows, 128) * (ceil_div(ceil_div(cols, 128), 4) * 4);
    case granularity::mx_1x32: break;
  }
  return wide(rows) * ceil_div(cols, 32);
}

// The error of a span one element short: "<function>: <name> holds <n> elements but <n + 1> are needed
// (<what it holds>)".
std::string short_span_error(const std::string& name, std::size_t held, const std::string& what) {
  return "fp8::quantize_transpose: " + name + " holds " + std::to_string(held) + " elements but " +
         std::to_string(held + 1) + " are needed (" + what + ")";
}

// A scaled quantize_transpose with each of its five spans in turn one element short: the error names
// that span and what it must hold, and nothing is written. With every size right, the call equals the
// pointer overload.
template <class Scale>
void check_scaled_transpose_spans(const fp8::quantization& q, const std::array<std::string, 5>& names,
                                  const std::string& granularity_name) {
  const std::size_t rows = 3;
  const std::size_t cols = 300;
  const std::array<std::size_t, 5> right = {rows * cols, rows * cols, rows * cols,
                                            fp8::scale_count(q.granularity, rows, cols),
                                            fp8::scale_count(q.granularity, cols, rows)};
  const std::array<std::string, 5> what = {"rows x cols", "rows x cols", "rows x cols",
                                           "scale_count(" + granularity_name + ", rows, cols)",
                                           "scale_count(" + granularity_name + ", cols, rows)"};
  for (std::size_t shorted = 0; shorted < right.size(); ++shorted) {
    CAPTURE(names[shorted]);
    std::array<std::size_t, 5> size = right;
    --size[shorted];
    std::vector<float> in(size[0]);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = float(int(i % 89) - 44) * 0.61f;
    std::vector<std::uint8_t> out(size[1], 0xAB), out_t(size[2], 0xAB);
    std::vector<Scale> scales(size[3], Scale(7)), scales_t(size[4], Scale(7));
    CHECK(error_of([&] {
            fp8::quantize_transpose(fp8::span(in), rows, cols, q, out, scales, out_t, scales_t);
          }) == short_span_error(names[shorted], size[shorted], what[shorted]));
    CHECK(out == std::vector<std::uint8_t>(size[1], 0xAB));
    CHECK(out_t == std::vector<std::uint8_t>(size[2], 0xAB));
    CHECK(scales == std::vector<Scale>(size[3], Scale(7)));
    CHECK(scales_t == std::vector<Scale>(size[4], Scale(7)));
  }

  std::vector<float> in(right[0]);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = float(int(i % 89) - 44) * 0.61f;
  std::vector<std::uint8_t> out(right[1]), out_t(right[2]), pointer_out(right[1]), pointer_out_t(right[2]);
  std::vector<Scale> scales(right[3]), scales_t(right[4]), pointer_scales(right[3]),
      pointer_scales_t(right[4]);
  const float amax = fp8::quantize_transpose(fp8::span(in), rows, cols, q, out, scales, out_t, scales_t);
  CHECK(amax == fp8::quantize_transpose(in.data(), rows, cols, q, pointer_out.data(), pointer_scales.data(),
                                        pointer_out_t.data(), pointer_scales_t.data()));
  CHECK(out == pointer_out);
  CHECK(out_t == pointer_out_t);
  CHECK(scales == pointer_scales);
  CHECK(scales_t == pointer_scales_t);
}

}  // namespace

TEST_CASE("quantize_transpose of an empty matrix writes the scales quantize of the transpose writes") {
  const std::vector<std::pair<std::size_t, std::size_t>> shapes = {{0, 1}, {0, 5}, {0, 130},
                                                                   {1, 0}, {7, 0}, {0, 0}};
  for (const granularity g : float_granularities) {
    for (const auto& shape : shapes) {
      const std::size_t rows =
          shape.first;  // plain variables: lambdas (CAPTURE) cannot capture bindings in C++17
      const std::size_t cols = shape.second;
      const std::string name = fp8::granularity_name(g);
      CAPTURE(name);
      CAPTURE(rows);
      CAPTURE(cols);
      const fp8::quantization q{fp8_format::e4m3, g};
      std::vector<float> scale_inv(fp8::scale_count(g, rows, cols) + 1, -3.0f);
      std::vector<float> scale_inv_t(fp8::scale_count(g, cols, rows) + 1, -3.0f);
      std::vector<float> expected_t(scale_inv_t.size(), -3.0f);
      std::uint8_t none = 0;
      const float dummy = 0.0f;
      fp8::quantize_transpose(&dummy, rows, cols, q, &none, scale_inv.data(), &none, scale_inv_t.data());
      fp8::quantize(&dummy, cols, rows, q, &none, expected_t.data());
      CHECK(scale_inv_t == expected_t);
    }
  }
  for (const auto& [rows, cols] : shapes) {
    const fp8::quantization q{fp8_format::e4m3, granularity::mx_1x32};
    std::vector<std::uint8_t> scales(fp8::scale_count(q.granularity, rows, cols) + 1, 0xAB);
    std::vector<std::uint8_t> scales_t(fp8::scale_count(q.granularity, cols, rows) + 1, 0xAB);
    std::vector<std::uint8_t> expected_t(scales_t.size(), 0xAB);
    std::uint8_t none = 0;
    const float dummy = 0.0f;
    fp8::quantize_transpose(&dummy, rows, cols, q, &none, scales.data(), &none, scales_t.data());
    fp8::quantize(&dummy, cols, rows, q, &none, expected_t.data());
    CHECK(scales_t == expected_t);
  }
}

TEST_CASE("scale counts near SIZE_MAX are exact or an error, never a wrapped small number") {
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  const std::vector<std::size_t> sizes = {0,         1,         127,      128,     129,
                                          max / 256, max / 128, max / 32, max / 4, max / 2,
                                          max - 128, max - 3,   max - 1,  max};
  for (const granularity g : {granularity::per_tensor, granularity::per_row, granularity::tile_1x128,
                              granularity::block_128x128, granularity::mx_1x32}) {
    for (const std::size_t rows : sizes) {
      for (const std::size_t cols : sizes) {
        const std::string name = fp8::granularity_name(g);
        CAPTURE(name);
        CAPTURE(rows);
        CAPTURE(cols);
        const wide exact = exact_count(g, rows, cols);
        if (exact > max) {
          const std::string message = error_of([&] { fp8::scale_count(g, rows, cols); });
          CHECK(message.find("overflows") != std::string::npos);
          CHECK_THROWS_AS(fp8::make_scale_layout(g, rows, cols), fp8::invalid_argument);
        } else {
          CHECK(fp8::scale_count(g, rows, cols) == std::size_t(exact));
        }
      }
    }
  }
}

TEST_CASE(
    "span overloads: a buffer too small for its role is an error naming it, before anything is written") {
  const std::size_t rows = 3;
  const std::size_t cols = 300;
  std::vector<float> in(rows * cols);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = float(int(i % 97) - 48) * 0.37f;
  const fp8::quantization tiles{fp8_format::e4m3, granularity::tile_1x128};
  const std::size_t scales = fp8::scale_count(tiles.granularity, rows, cols);  // 3 tiles x 4 = 12
  REQUIRE(scales == 12);

  std::vector<std::uint8_t> out(rows * cols, 0xAB);
  std::vector<float> scale_inv(scales - 1, -7.0f);
  const auto untouched = [&] {
    for (const std::uint8_t c : out)
      if (c != 0xAB) return false;
    for (const float s : scale_inv)
      if (s != -7.0f) return false;
    return true;
  };
  CHECK(error_of([&] {
          fp8::quantize(fp8::span(in), rows, cols, tiles, out, scale_inv);
        }).find("scale_inv") != std::string::npos);
  CHECK(error_of([&] { fp8::quantize(fp8::span(in), rows, cols, tiles, out, scale_inv); }).find("11") !=
        std::string::npos);
  CHECK(untouched());
  scale_inv.resize(scales, -7.0f);
  CHECK(error_of([&] {
          fp8::quantize(fp8::span(in.data(), in.size() - 1), rows, cols, tiles, out, scale_inv);
        }).find("in holds") != std::string::npos);
  CHECK(error_of([&] {
          fp8::quantize(fp8::span(in), rows, cols, tiles, fp8::span(out.data(), 5), scale_inv);
        }).find("out holds") != std::string::npos);
  CHECK(untouched());

  // Right sizes: the same result as the pointer API.
  std::vector<std::uint8_t> pointer_out(out.size());
  std::vector<float> pointer_scales(scales);
  const float amax = fp8::quantize(fp8::span<const float>(in), rows, cols, tiles, out, scale_inv);
  CHECK(amax == fp8::quantize(in.data(), rows, cols, tiles, pointer_out.data(), pointer_scales.data()));
  CHECK(out == pointer_out);
  CHECK(scale_inv == pointer_scales);

  // Dequantize, MX, the transposed copy and the per-tensor calls check the same way.
  std::vector<float> back(in.size());
  CHECK(error_of([&] {
          fp8::dequantize(fp8::span(out), rows, cols, tiles, fp8::span(scale_inv.data(), 4), fp8::span(back));
        }).find("scale_inv") != std::string::npos);
  fp8::dequantize(fp8::span(out), rows, cols, tiles, scale_inv, fp8::span(back));
  std::vector<float> pointer_back(in.size());
  fp8::dequantize(pointer_out.data(), rows, cols, tiles, pointer_scales.data(), pointer_back.data());
  CHECK(back == pointer_back);

  const fp8::quantization mx{fp8_format::e4m3, granularity::mx_1x32};
  std::vector<std::uint8_t> e8m0(fp8::scale_count(mx.granularity, rows, cols) - 1);
  CHECK(error_of([&] { fp8::quantize(fp8::span(in), rows, cols, mx, out, e8m0); }).find("scale_e8m0") !=
        std::string::npos);

  std::vector<std::uint8_t> out_t(rows * cols);
  std::vector<float> scale_inv_t(fp8::scale_count(tiles.granularity, cols, rows) - 1);
  CHECK(error_of([&] {
          fp8::quantize_transpose(fp8::span(in), rows, cols, tiles, out, scale_inv, out_t, scale_inv_t);
        }).find("scale_inv_t") != std::string::npos);
  CHECK(error_of([&] {
          fp8::quantize_transpose(fp8::span(in), rows, cols, fp8_format::e5m2, 1.0f, out,
                                  fp8::span(out_t.data(), 2));
        }).find("out_t holds") != std::string::npos);

  CHECK(error_of([&] {
          fp8::quantize(fp8::span(in), fp8_format::e4m3, 1.0f, fp8::span(out.data(), 10));
        }).find("out holds 10") != std::string::npos);
  CHECK(error_of([&] {
          fp8::dequantize(fp8::span(out), fp8_format::e4m3, 1.0f, fp8::span(back.data(), 10));
        }).find("out holds 10") != std::string::npos);
  CHECK(fp8::compute_amax(fp8::span(in)) == fp8::compute_amax(in.data(), in.size()));
}

TEST_CASE("quantize_transpose names the span at fault, with float scales, E8M0 scales or none") {
  SUBCASE("float scales") {
    check_scaled_transpose_spans<float>({fp8_format::e4m3, granularity::tile_1x128},
                                        {"in", "out", "out_t", "scale_inv", "scale_inv_t"}, "granularity");
  }
  SUBCASE("E8M0 scales") {
    check_scaled_transpose_spans<std::uint8_t>({fp8_format::e4m3, granularity::mx_1x32},
                                               {"in", "out", "out_t", "scale_e8m0", "scale_e8m0_t"},
                                               "mx_1x32");
  }
  SUBCASE("one per-tensor scale") {
    const std::size_t rows = 3;
    const std::size_t cols = 300;
    const std::array<std::string, 3> names = {"in", "out", "out_t"};
    for (std::size_t shorted = 0; shorted < names.size(); ++shorted) {
      CAPTURE(names[shorted]);
      std::array<std::size_t, 3> size = {rows * cols, rows * cols, rows * cols};
      --size[shorted];
      std::vector<float> in(size[0], 1.5f);
      std::vector<std::uint8_t> out(size[1], 0xAB), out_t(size[2], 0xAB);
      CHECK(error_of([&] {
              fp8::quantize_transpose(fp8::span(in), rows, cols, fp8_format::e5m2, 1.0f, out, out_t);
            }) == short_span_error(names[shorted], size[shorted], "rows x cols"));
      CHECK(out == std::vector<std::uint8_t>(size[1], 0xAB));
      CHECK(out_t == std::vector<std::uint8_t>(size[2], 0xAB));
    }
  }
}

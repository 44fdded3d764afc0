// MXFP4 / MXFP6 / NVFP4 block quantization against the plain scalar model (block_reference.hpp),
// bit-exact, in the instruction set this binary was built for; round trips; NaN / Inf inside blocks;
// the worked examples of the headers; the cuBLASLt scale swizzle; bad shapes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <fp8/quantize/mx.hpp>
#include <fp8/quantize/nvfp4.hpp>
#include <fp8/quantize/scale_swizzle.hpp>

#include "block_reference.hpp"

namespace {

// Values over many binades, with exact ties, zeros, subnormals and all-zero blocks mixed in.
std::vector<float> test_tensor(std::size_t rows, std::size_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::vector<float> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t block = i / 32;
    if (block % 11 == 3) {
      x[i] = 0.0f;
      continue;
    }  // an all-zero block
    if (block % 13 == 5) {
      x[i] = std::ldexp(normal(rng), -140);
      continue;
    }  // float subnormals
    const float v = normal(rng) * std::ldexp(1.0f, exponent(rng) / 4);
    x[i] = (i % 7 == 0) ? std::ldexp(std::round(std::ldexp(v, 3)), -3) : v;  // some short values: ties
  }
  return x;
}

template <class Element>
std::vector<std::uint8_t> unpacked_codes(const std::vector<std::uint8_t>& packed, std::size_t count) {
  std::vector<std::uint8_t> codes(count);
  fp8::unpack<Element>(packed.data(), count, codes.data());
  return codes;
}

template <class Element>
void check_mx_against_reference(const std::vector<float>& x, std::size_t rows, std::size_t cols,
                                const std::uint32_t* random_bits) {
  std::vector<std::uint8_t> packed(fp8::packed_bytes<Element>(rows * cols)), scales(rows * cols / 32);
  fp8::quantize_mx<Element>(x.data(), rows, cols, packed.data(), scales.data(), random_bits);
  const auto expected = block_reference::mx<Element>(x, rows, cols, random_bits);
  CHECK(scales == expected.scales);
  CHECK(unpacked_codes<Element>(packed, rows * cols) == expected.codes);
}

}  // namespace

TEST_CASE("the block kernels are the ones this binary was built for") {
  MESSAGE("instruction set: ", std::string(fp8::quantize_isa),
          ", block kernels: ", std::string(fp8::detail::block_kernels_name));
#if defined(FP8_TEST_EXPECTED_ISA)
  CHECK(std::string(fp8::quantize_isa) == FP8_TEST_EXPECTED_ISA);
#endif
#if defined(FP8_TEST_EXPECTED_BLOCK_KERNELS)
  CHECK(std::string(fp8::detail::block_kernels_name) == FP8_TEST_EXPECTED_BLOCK_KERNELS);
#elif defined(FP8_TEST_EXPECTED_ISA)
  CHECK(std::string(fp8::detail::block_kernels_name) == FP8_TEST_EXPECTED_ISA);
#endif
}

namespace {

// Floats of every sign, exponent and top 7 mantissa bits, each with low halves that decide rounding
// (zero, one, the half point, all ones, random): ties, values just off ties, subnormals, Inf.
std::vector<float> rounding_sweep() {
  std::vector<float> x;
  std::mt19937 rng(11);
  for (std::uint32_t top = 0; top < (1u << 16); ++top) {
    if ((top & 0x7F80u) == 0x7F80u && (top & 0x7Fu) != 0) continue;  // NaN: blocks never encode it
    for (const std::uint32_t low : {0u, 1u, 0x8000u, 0xFFFFu, std::uint32_t(rng()) & 0xFFFFu}) {
      if ((top & 0x7FFFu) == 0x7F80u && low != 0) continue;
      x.push_back(fp8::detail::bit_cast<float>(top << 16 | low));
    }
  }
  return x;
}

}  // namespace

TEST_CASE("the FP4 element encoder of this build equals the scalar conversion on every float class") {
  // The vector encoder behind all FP4 paths (MXFP4, NVFP4), against convert_bits itself, for a plain
  // multiplier and two that shift and round the products; lengths of 32 k, 32 k - 16 and (where the
  // vector width allows) 32 k - 8: the tails.
  auto x = rounding_sweep();
  x.resize(x.size() / 32 * 32);
  const std::size_t shortest = x.size() - (fp8::detail::block_ops::width <= 8 ? 8 : 16);
  for (const float multiplier : {1.0f, 0.75f, 3.0e-3f}) {
    for (const std::size_t n : {x.size(), x.size() - 16, shortest}) {
      CAPTURE(multiplier);
      CAPTURE(n);
      std::vector<std::uint8_t> packed(n / 2);
      fp8::detail::block_ops::encode_fp4_packed(x.data(), n, multiplier, packed.data());
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const auto expected =
            fp8::convert_bits<fp8::e2m1_format, fp8::rounding::nearest_even, fp8::overflow::saturate>(
                x[i] * multiplier);
        if (fp8::packed_get<fp8::e2m1_format>(packed.data(), i) != expected && mismatches++ < 5) {
          CHECK(fp8::packed_get<fp8::e2m1_format>(packed.data(), i) == expected);
          MESSAGE("input bits ", fp8::detail::bit_cast<std::uint32_t>(x[i]));
        }
      }
      CHECK(mismatches == 0);
    }
  }
}

namespace {

// Finite floats with random bit patterns: every binade from subnormals to near FLT_MAX, so block
// scales at both ends of E8M0 / UE4M3 and multipliers clamped at FLT_MAX.
std::vector<float> random_finite_tensor(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) {
    do { v = fp8::detail::bit_cast<float>(std::uint32_t(rng())); } while (!std::isfinite(v));
  }
  return x;
}

}  // namespace

TEST_CASE_TEMPLATE("MX quantization equals the scalar model bit for bit (nearest even and stochastic)",
                   Element, fp8::e2m1_format, fp8::e2m3_format, fp8::e3m2_format) {
  const std::size_t rows = 37, cols = 32 * 9;
  const auto x = test_tensor(rows, cols, 1);
  check_mx_against_reference<Element>(x, rows, cols, nullptr);
  std::vector<std::uint32_t> random_bits(rows * cols);
  std::mt19937 rng(3);
  for (auto& r : random_bits) r = std::uint32_t(rng());
  check_mx_against_reference<Element>(x, rows, cols, random_bits.data());
}

TEST_CASE_TEMPLATE(
    "MX quantization equals the scalar model on every binade, in the 16-block kernels and their tails",
    Element, fp8::e2m1_format, fp8::e2m3_format, fp8::e3m2_format) {
  // 16-block groups, then 0..17 blocks left over (pairs and a single one for MXFP4).
  for (const std::size_t blocks : {16, 17, 18, 19, 31, 32, 33, 50}) {
    CAPTURE(blocks);
    const auto x = random_finite_tensor(blocks * 32, unsigned(blocks));
    check_mx_against_reference<Element>(x, 1, blocks * 32, nullptr);
  }
  // Same data in a matrix: a row of 3 blocks, so groups span rows.
  const auto x = random_finite_tensor(41 * 96, 7);
  check_mx_against_reference<Element>(x, 41, 96, nullptr);
}

TEST_CASE_TEMPLATE("NaN or Inf anywhere in an MX block: that block only, in the 16-block kernels too",
                   Element, fp8::e2m1_format, fp8::e2m3_format, fp8::e3m2_format) {
  const std::size_t rows = 5, cols = 32 * 21;  // 105 blocks: six 16-block groups and 9 left over
  auto x = test_tensor(rows, cols, 12);
  std::mt19937 rng(13);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            fp8::detail::bit_cast<float>(0x7F800001u)};  // a signalling NaN
  for (std::size_t b = 0; b < rows * cols / 32; b += 1 + rng() % 4)
    x[b * 32 + rng() % 32] = specials[rng() % 5];
  check_mx_against_reference<Element>(x, rows, cols, nullptr);
}

TEST_CASE_TEMPLATE("MX round trip: dequantized values requantize to the same codes and scales", Element,
                   fp8::e2m1_format, fp8::e2m3_format, fp8::e3m2_format) {
  const std::size_t rows = 8, cols = 256;
  const auto x = test_tensor(rows, cols, 2);
  std::vector<std::uint8_t> packed(fp8::packed_bytes<Element>(rows * cols)), scales(rows * cols / 32);
  fp8::quantize_mx<Element>(x.data(), rows, cols, packed.data(), scales.data());
  std::vector<float> back(rows * cols);
  fp8::dequantize_mx<Element>(packed.data(), scales.data(), rows, cols, back.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    // Error bound: half an element ulp at the top binade of the block, times X (covers saturation too:
    // amax / X < 2^(emax+1), max = 2^emax * (2 - 2^-m), so the clamp loses at most 2^(emax-m) * X).
    const double X = std::ldexp(1.0, scales[i / 32] - 127);
    const double bound =
        std::ldexp(1.0, fp8::mx_element_emax<Element> - fp8::format_traits<Element>::mantissa_bits) * X;
    CHECK(std::fabs(double(back[i]) - double(x[i])) <= bound);
  }
  std::vector<std::uint8_t> packed2(packed.size()), scales2(scales.size());
  fp8::quantize_mx<Element>(back.data(), rows, cols, packed2.data(), scales2.data());
  CHECK(packed2 == packed);
  // A block whose elements all flushed to zero (the float-subnormal blocks) comes back as zeros and
  // gets the all-zero scale X = 1 (code 127); every other scale is reproduced.
  std::size_t nonzero_blocks = 0;
  for (std::size_t b = 0; b < scales.size(); ++b) {
    CAPTURE(b);
    bool all_zero = true;
    for (std::size_t i = b * 32; i < b * 32 + 32; ++i) all_zero = all_zero && back[i] == 0.0f;
    CHECK(scales2[b] == (all_zero ? 127 : scales[b]));
    nonzero_blocks += !all_zero;
  }
  CHECK(nonzero_blocks > scales.size() / 2);
}

TEST_CASE("MXFP4 worked example of mx.hpp") {
  std::vector<float> x(32, 0.0f);
  x[0] = 100.0f;
  x[1] = 20.0f;
  x[2] = -3.0f * 16;
  std::vector<std::uint8_t> packed(16), scales(1);
  fp8::quantize_mx<fp8::e2m1_format>(x.data(), 1, 32, packed.data(), scales.data());
  CHECK(scales[0] == 131);                                            // X = 16
  CHECK(fp8::packed_get<fp8::e2m1_format>(packed.data(), 0) == 0x7);  // 6.25 saturates to 6
  CHECK(fp8::packed_get<fp8::e2m1_format>(packed.data(), 1) == 0x2);  // 1.25: tie to even 1.0
  CHECK(fp8::packed_get<fp8::e2m1_format>(packed.data(), 2) == 0xD);  // -3
  // emax per element format: E2M1 2, E2M3 2, E3M2 4.
  CHECK(fp8::mx_element_emax<fp8::e2m1_format> == 2);
  CHECK(fp8::mx_element_emax<fp8::e2m3_format> == 2);
  CHECK(fp8::mx_element_emax<fp8::e3m2_format> == 4);
}

TEST_CASE("NaN or Inf inside an MX block makes that block NaN and leaves the others alone") {
  const std::size_t rows = 2, cols = 96;
  auto x = test_tensor(rows, cols, 4);
  const auto clean = x;
  x[40] = std::numeric_limits<float>::quiet_NaN();   // block 1
  x[150] = -std::numeric_limits<float>::infinity();  // block 4
  for (const bool mxfp6 : {false, true}) {
    CAPTURE(mxfp6);
    std::vector<std::uint8_t> packed(rows * cols), scales(6), clean_packed(rows * cols), clean_scales(6);
    std::vector<float> back(rows * cols);
    if (mxfp6) {
      fp8::quantize_mx<fp8::e3m2_format>(x.data(), rows, cols, packed.data(), scales.data());
      fp8::quantize_mx<fp8::e3m2_format>(clean.data(), rows, cols, clean_packed.data(), clean_scales.data());
      fp8::dequantize_mx<fp8::e3m2_format>(packed.data(), scales.data(), rows, cols, back.data());
    } else {
      fp8::quantize_mx<fp8::e2m1_format>(x.data(), rows, cols, packed.data(), scales.data());
      fp8::quantize_mx<fp8::e2m1_format>(clean.data(), rows, cols, clean_packed.data(), clean_scales.data());
      fp8::dequantize_mx<fp8::e2m1_format>(packed.data(), scales.data(), rows, cols, back.data());
    }
    for (std::size_t b = 0; b < 6; ++b) {
      CAPTURE(b);
      const bool bad = b == 1 || b == 4;
      CHECK(scales[b] == (bad ? 0xFF : clean_scales[b]));
      for (std::size_t i = b * 32; i < b * 32 + 32; ++i) CHECK(std::isnan(back[i]) == bad);
    }
  }
}

TEST_CASE("NVFP4 1x16 and 16x16 quantization equal the scalar model bit for bit") {
  const std::size_t rows = 45, cols = 16 * 13;  // a partial last tile row
  auto x = test_tensor(rows, cols, 5);
  std::vector<std::uint32_t> random_bits(rows * cols);
  std::mt19937 rng(9);
  for (auto& r : random_bits) r = std::uint32_t(rng());
  for (const std::uint32_t* bits :
       {static_cast<const std::uint32_t*>(nullptr), static_cast<const std::uint32_t*>(random_bits.data())}) {
    CAPTURE(bits != nullptr);
    std::vector<std::uint8_t> packed(rows * cols / 2), scales(rows * cols / 16);
    const auto tensor_scale = fp8::quantize_nvfp4(x.data(), rows, cols, packed.data(), scales.data(), bits);
    const auto expected = block_reference::nvfp4(x, rows, cols, 1, bits);
    CHECK(tensor_scale.decode == expected.tensor_decode);
    CHECK(scales == expected.scales);
    CHECK(unpacked_codes<fp8::e2m1_format>(packed, rows * cols) == expected.codes);

    std::vector<std::uint8_t> tile_scales((rows + 15) / 16 * (cols / 16));
    const auto tile_tensor_scale =
        fp8::quantize_nvfp4_2d(x.data(), rows, cols, packed.data(), tile_scales.data(), bits);
    const auto expected_2d = block_reference::nvfp4(x, rows, cols, 16, bits);
    CHECK(tile_tensor_scale.decode == expected_2d.tensor_decode);
    CHECK(tile_scales == expected_2d.scales);
    CHECK(unpacked_codes<fp8::e2m1_format>(packed, rows * cols) == expected_2d.codes);
  }
}

TEST_CASE("NVFP4 equals the scalar model on every binade and with NaN / Inf in the 16-block kernels") {
  // 16-block groups plus 1..15 blocks left over. Random bit patterns span every binade, so block scales
  // that round to UE4M3 zero (multiplier clamped at FLT_MAX), subnormal scales and normal ones all occur.
  std::size_t zero_scales = 0, subnormal_scales = 0;
  for (const std::size_t blocks : {16, 17, 31, 33, 47, 64}) {
    CAPTURE(blocks);
    auto x = random_finite_tensor(blocks * 16, unsigned(100 + blocks));
    for (const bool with_specials : {false, true}) {
      CAPTURE(with_specials);
      if (with_specials) {
        x[5] = std::numeric_limits<float>::quiet_NaN();
        x[16 * 7 + 15] = -std::numeric_limits<float>::infinity();
        x[x.size() - 3] = std::numeric_limits<float>::infinity();
      }
      std::vector<std::uint8_t> packed(x.size() / 2), scales(x.size() / 16);
      const auto s = fp8::quantize_nvfp4(x.data(), 1, x.size(), packed.data(), scales.data());
      const auto expected = block_reference::nvfp4(x, 1, x.size(), 1, nullptr);
      CHECK(s.decode == expected.tensor_decode);
      CHECK(scales == expected.scales);
      CHECK(unpacked_codes<fp8::e2m1_format>(packed, x.size()) == expected.codes);
      for (const std::uint8_t code : scales) {
        zero_scales += code == 0;
        subnormal_scales += code > 0 && code < 8;
      }
    }
  }
  CHECK(zero_scales > 0);
  CHECK(subnormal_scales > 0);
  // The ties, zero blocks and float subnormals of test_tensor, with NaN and -0 sprinkled in.
  auto x = test_tensor(9, 16 * 40, 14);
  for (std::size_t i = 0; i < x.size(); i += 37)
    x[i] = i % 2 ? std::numeric_limits<float>::quiet_NaN() : -0.0f;
  std::vector<std::uint8_t> packed(x.size() / 2), scales(x.size() / 16);
  fp8::quantize_nvfp4(x.data(), 9, 16 * 40, packed.data(), scales.data());
  const auto expected = block_reference::nvfp4(x, 9, 16 * 40, 1, nullptr);
  CHECK(scales == expected.scales);
  CHECK(unpacked_codes<fp8::e2m1_format>(packed, x.size()) == expected.codes);
}

TEST_CASE("NVFP4 worked example of nvfp4.hpp, and the tensor scale's edge cases") {
  std::vector<float> x(32, 0.0f);
  x[0] = 12.0f;
  x[1] = -5.0f;
  x[2] = 0.4f;
  x[16] = 2688.0f;  // the tensor amax: S_enc = 1
  std::vector<std::uint8_t> packed(16), scales(2);
  const auto s = fp8::quantize_nvfp4(x.data(), 1, 32, packed.data(), scales.data());
  CHECK(s.encode == 1.0f);
  CHECK(s.decode == 1.0f);
  CHECK(scales[0] == 0x40);  // 2.0
  CHECK(packed[0] == 0xC7);  // 12 -> 6 (0x7) low nibble, -5 -> -2.5 -> even -2 (0xC) high nibble
  CHECK(fp8::packed_get<fp8::e2m1_format>(packed.data(), 2) == 0x0);
  CHECK(scales[1] == 0x7E);  // 2688 / 6 = 448, the largest UE4M3
  CHECK(fp8::nvfp4_tensor_scale_from_amax(0.0f).encode == 1.0f);
  CHECK(fp8::nvfp4_tensor_scale_from_amax(1e-45f).encode == std::numeric_limits<float>::max());
  CHECK(fp8::nvfp4_tensor_scale_from_amax(2688.0f * 4).decode == 4.0f);
}

TEST_CASE("NaN or Inf inside an NVFP4 block: that block is NaN, the tensor scale ignores it") {
  const std::size_t rows = 4, cols = 64;
  auto x = test_tensor(rows, cols, 6);
  const auto clean = x;
  x[20] = std::numeric_limits<float>::infinity();    // block 1 of row 0
  x[200] = std::numeric_limits<float>::quiet_NaN();  // block 12
  std::vector<std::uint8_t> packed(rows * cols / 2), scales(rows * cols / 16), clean_packed(packed),
      clean_scales(scales);
  const auto s = fp8::quantize_nvfp4(x.data(), rows, cols, packed.data(), scales.data());
  const auto s_clean =
      fp8::quantize_nvfp4(clean.data(), rows, cols, clean_packed.data(), clean_scales.data());
  std::vector<float> back(rows * cols);
  fp8::dequantize_nvfp4(packed.data(), scales.data(), rows, cols, s, back.data());
  for (std::size_t b = 0; b < scales.size(); ++b) {
    CAPTURE(b);
    const bool bad = b == 1 || b == 12;
    // The clean tensor's amax may differ where the bad values replaced the largest finite one.
    if (!bad && s.decode == s_clean.decode) CHECK(scales[b] == clean_scales[b]);
    CHECK((scales[b] == 0x7F) == bad);
    for (std::size_t i = b * 16; i < b * 16 + 16; ++i) CHECK(std::isnan(back[i]) == bad);
  }
}

TEST_CASE("NVFP4 round trip stays within half an FP4 ulp of the block scale, plus the scale's own rounding") {
  const std::size_t rows = 16, cols = 128;
  const auto x = test_tensor(rows, cols, 7);
  std::vector<std::uint8_t> packed(rows * cols / 2), scales(rows * cols / 16);
  const auto s = fp8::quantize_nvfp4(x.data(), rows, cols, packed.data(), scales.data());
  std::vector<float> back(rows * cols);
  fp8::dequantize_nvfp4(packed.data(), scales.data(), rows, cols, s, back.data());
  for (std::size_t b = 0; b < scales.size(); ++b) {
    double amax = 0;
    for (std::size_t i = b * 16; i < b * 16 + 16; ++i) amax = std::fmax(amax, std::fabs(double(x[i])));
    const double scale = double(fp8::decode<float, fp8::ue4m3_format>(scales[b])) * s.decode;
    for (std::size_t i = b * 16; i < b * 16 + 16; ++i) {
      CAPTURE(i);
      // Inside FP4's range the error is at most one FP4 ulp (2 at the top binade) / 2 times the scale;
      // where the block scale rounded down (or flushed to 0) the elements saturate: bound by amax/8 + 1.
      const double bound = std::fmax(1.0 * scale, amax / 8) + 1e-30;
      CHECK(std::fabs(double(back[i]) - double(x[i])) <= bound * 1.0000001);
    }
  }
}

TEST_CASE("16x16 NVFP4 tiles commute with transposition, and expand to 1x16 scales") {
  const std::size_t rows = 48, cols = 64;
  const auto x = test_tensor(rows, cols, 8);
  std::vector<float> xt(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) xt[c * rows + r] = x[r * cols + c];
  std::vector<std::uint8_t> packed(rows * cols / 2), packed_t(rows * cols / 2);
  std::vector<std::uint8_t> tiles(rows / 16 * cols / 16), tiles_t(tiles.size());
  fp8::quantize_nvfp4_2d(x.data(), rows, cols, packed.data(), tiles.data());
  fp8::quantize_nvfp4_2d(xt.data(), cols, rows, packed_t.data(), tiles_t.data());
  for (std::size_t i = 0; i < rows / 16; ++i) {
    for (std::size_t j = 0; j < cols / 16; ++j)
      CHECK(tiles[i * (cols / 16) + j] == tiles_t[j * (rows / 16) + i]);
  }
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      CHECK(fp8::packed_get<fp8::e2m1_format>(packed.data(), r * cols + c) ==
            fp8::packed_get<fp8::e2m1_format>(packed_t.data(), c * rows + r));
    }
  }
  std::vector<std::uint8_t> expanded(rows * cols / 16);
  fp8::nvfp4_expand_tile_scales(tiles.data(), rows, cols, expanded.data());
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t t = 0; t < cols / 16; ++t)
      CHECK(expanded[r * (cols / 16) + t] == tiles[(r / 16) * (cols / 16) + t]);
  }
}

TEST_CASE("the cuBLASLt scale swizzle: 128x4 tiles with interleaved 32-row slices") {
  // An independent statement of the layout: walk the swizzled buffer in storage order. Within a
  // 512-byte tile the bytes run over (row % 32) slowest, then (row / 32), then the column.
  for (const auto& shape : {std::pair<std::size_t, std::size_t>{256, 8}, {130, 5}, {1, 1}, {300, 12}}) {
    const std::size_t rows = shape.first, scale_cols = shape.second;
    CAPTURE(rows);
    CAPTURE(scale_cols);
    std::vector<std::uint8_t> scales(rows * scale_cols);
    for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = std::uint8_t(1 + i * 7 % 251);
    std::vector<std::uint8_t> swizzled(fp8::swizzled_scale_bytes(rows, scale_cols));
    fp8::swizzle_block_scales(scales.data(), rows, scale_cols, swizzled.data());
    const std::size_t tile_rows = (rows + 127) / 128, tile_cols = (scale_cols + 3) / 4;
    CHECK(swizzled.size() == tile_rows * tile_cols * 512);
    std::size_t offset = 0;
    for (std::size_t tr = 0; tr < tile_rows; ++tr) {
      for (std::size_t tc = 0; tc < tile_cols; ++tc) {
        for (std::size_t inner = 0; inner < 32; ++inner) {
          for (std::size_t outer = 0; outer < 4; ++outer) {
            for (std::size_t c = 0; c < 4; ++c, ++offset) {
              const std::size_t row = tr * 128 + outer * 32 + inner, col = tc * 4 + c;
              const std::uint8_t expected =
                  (row < rows && col < scale_cols) ? scales[row * scale_cols + col] : 0;
              CHECK(swizzled[offset] == expected);
            }
          }
        }
      }
    }
    std::vector<std::uint8_t> back(scales.size());
    fp8::unswizzle_block_scales(swizzled.data(), rows, scale_cols, back.data());
    CHECK(back == scales);
  }
  CHECK(fp8::swizzled_scale_offset(130, 5, 8) == 1569);  // the example in scale_swizzle.hpp
}

TEST_CASE("bad shapes and null pointers are errors that name the problem") {
  std::vector<float> x(48);
  std::vector<std::uint8_t> packed(48), scales(3);
  CHECK_THROWS_WITH_AS(fp8::quantize_mx<fp8::e2m1_format>(x.data(), 1, 48, packed.data(), scales.data()),
                       doctest::Contains("cols = 48 is not a multiple of the block size 32"),
                       fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(fp8::quantize_nvfp4(x.data(), 1, 40, packed.data(), scales.data()),
                       doctest::Contains("cols = 40 is not a multiple of the block size 16"),
                       fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(fp8::quantize_nvfp4(x.data(), 3, 16, nullptr, scales.data()),
                       doctest::Contains("null pointer"), fp8::invalid_argument);
  CHECK_NOTHROW(fp8::quantize_mx<fp8::e2m1_format>(nullptr, 0, 32, nullptr, nullptr));
  const std::size_t huge_rows = (std::size_t(1) << (sizeof(std::size_t) * 8 - 4)) + 1;
  CHECK_THROWS_WITH_AS(fp8::quantize_nvfp4(x.data(), huge_rows, 16, packed.data(), scales.data()),
                       doctest::Contains("overflows size_t"), fp8::invalid_argument);
}

// Packed sub-byte storage: the bit layout (FP4 low nibble first, FP6 as a little-endian bit stream),
// pack/unpack round trips at every length, single-value access, and the bulk conversions.
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include <fp8/types.hpp>

TEST_CASE("FP4 packs two values per byte, low nibble first") {
  const std::uint8_t codes[3] = {fp8::fp4_e2m1(1.0f).bits(), fp8::fp4_e2m1(-6.0f).bits(),
                                 fp8::fp4_e2m1(0.5f).bits()};
  CHECK(codes[0] == 0x2);
  CHECK(codes[1] == 0xF);
  std::uint8_t packed[2] = {0xAA, 0xAA};
  CHECK(fp8::packed_bytes<fp8::e2m1_format>(3) == 2);
  fp8::pack<fp8::e2m1_format>(codes, 3, packed);
  CHECK(packed[0] == 0xF2);
  CHECK(packed[1] == 0x01);  // the unused high nibble of a trailing byte is zero
}

TEST_CASE("FP6 packs four values into three bytes as one little-endian bit stream") {
  const std::uint8_t codes[4] = {0b101010, 0b110011, 0b000111, 0b111000};
  std::uint8_t packed[3] = {};
  CHECK(fp8::packed_bytes<fp8::e2m3_format>(4) == 3);
  CHECK(fp8::packed_bytes<fp8::e2m3_format>(5) == 4);
  CHECK(fp8::packed_bytes<fp8::e2m3_format>(8) == 6);
  fp8::pack<fp8::e2m3_format>(codes, 4, packed);
  const std::uint32_t stream = codes[0] | codes[1] << 6 | codes[2] << 12 | std::uint32_t(codes[3]) << 18;
  CHECK(packed[0] == (stream & 0xFF));
  CHECK(packed[1] == ((stream >> 8) & 0xFF));
  CHECK(packed[2] == (stream >> 16));
  CHECK(packed[0] == std::uint8_t(0b11'101010));  // v0 | low two bits of v1 << 6
}

TEST_CASE_TEMPLATE("pack and unpack round trip at every length; packed_get/packed_set agree", Format,
                   fp8::e2m1_format, fp8::e2m3_format, fp8::e3m2_format, fp8::e4m3_format) {
  std::mt19937 rng(7);
  const unsigned mask = (1u << fp8::packed_bits<Format>)-1u;
  for (std::size_t count = 0; count <= 70; ++count) {
    CAPTURE(count);
    std::vector<std::uint8_t> codes(count), back(count), packed(fp8::packed_bytes<Format>(count) + 1, 0xCD);
    for (auto& c : codes) c = std::uint8_t(rng() & mask);
    fp8::pack<Format>(codes.data(), count, packed.data());
    CHECK(packed.back() == 0xCD);  // nothing written past packed_bytes
    fp8::unpack<Format>(packed.data(), count, back.data());
    CHECK(back == codes);
    // Build the same buffer value by value on top of garbage-free zeros, and read it back one by one.
    std::vector<std::uint8_t> by_value(fp8::packed_bytes<Format>(count), 0);
    for (std::size_t i = 0; i < count; ++i) fp8::packed_set<Format>(by_value.data(), i, codes[i]);
    for (std::size_t i = 0; i < count; ++i) CHECK(fp8::packed_get<Format>(packed.data(), i) == codes[i]);
    CHECK(std::vector<std::uint8_t>(packed.begin(), packed.end() - 1) == by_value);
  }
  // packed_set leaves the neighbours alone.
  std::vector<std::uint8_t> packed(fp8::packed_bytes<Format>(9), 0xFF);
  fp8::packed_set<Format>(packed.data(), 4, 0);
  for (std::size_t i = 0; i < 8; ++i) CHECK(fp8::packed_get<Format>(packed.data(), i) == (i == 4 ? 0 : mask));
}

TEST_CASE_TEMPLATE("bulk conversions equal the scalar conversion value by value", Format, fp8::e2m1_format,
                   fp8::e2m3_format, fp8::e3m2_format) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const std::size_t count = 1003;  // not a multiple of the chunk or of 8
  std::vector<float> in(count);
  std::vector<std::uint32_t> random_bits(count);
  for (std::size_t i = 0; i < count; ++i) {
    in[i] = normal(rng);
    random_bits[i] = std::uint32_t(rng());
  }
  in[5] = std::numeric_limits<float>::quiet_NaN();
  in[6] = -std::numeric_limits<float>::infinity();
  std::vector<std::uint8_t> packed(fp8::packed_bytes<Format>(count));
  fp8::convert_to_packed<Format>(in.data(), count, packed.data());
  for (std::size_t i = 0; i < count; ++i)
    CHECK(fp8::packed_get<Format>(packed.data(), i) == fp8::convert_bits<Format>(in[i]));
  fp8::convert_to_packed<Format, fp8::rounding::stochastic>(in.data(), count, packed.data(),
                                                            random_bits.data());
  for (std::size_t i = 0; i < count; ++i) {
    CHECK(fp8::packed_get<Format>(packed.data(), i) ==
          fp8::convert_bits<Format, fp8::rounding::stochastic>(in[i], random_bits[i]));
  }
  std::vector<float> out(count);
  fp8::convert_from_packed<Format>(packed.data(), count, out.data());
  for (std::size_t i = 0; i < count; ++i) {
    CHECK(out[i] == fp8::decode<float, Format>(fp8::packed_get<Format>(packed.data(), i)));
  }
}

// Packed storage of the sub-byte formats: FP4 two values per byte, FP6 four values per three bytes.
//
// The layout is one little-endian bit stream: value i occupies bits [i*B, i*B + B) with B the format's
// width (4 or 6), bit 0 being the lowest bit of byte 0. For FP4 that is "low nibble first", as the OCP
// MX v1.0 spec and cuBLASLt (CUDA_R_4F_E2M1) lay out two elements per byte; for FP6 it gives
//   byte 0 = v0 | v1 << 6,   byte 1 = v1 >> 2 | v2 << 4,   byte 2 = v2 >> 4 | v3 << 2.
// Example (E2M1): values {1.0, -6.0} are codes {0x2, 0xF} and pack to the byte 0xF2.
// A trailing partial byte has its unused high bits zero. 8-bit formats "pack" to themselves.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config.hpp"
#include "convert.hpp"
#include "format.hpp"

namespace fp8 {

// Bits one value of `Format` occupies in packed storage.
template <class Format>
inline constexpr int packed_bits = format_traits<Format>::total_bits;

// Bytes that `count` values of `Format` occupy packed: ceil(count * bits / 8).
template <class Format>
FP8_HOST_DEVICE constexpr std::size_t packed_bytes(std::size_t count) noexcept {
  static_assert(packed_bits<Format> == 4 || packed_bits<Format> == 6 || packed_bits<Format> == 8,
                "packed storage holds 4-, 6- and 8-bit formats");
  return packed_bits<Format> == 8
             ? count
             : (count / 8) * packed_bits<Format> + (count % 8 * packed_bits<Format> + 7) / 8;
}

// Reads value i of a packed buffer (its code, in the low bits).
template <class Format>
FP8_HOST_DEVICE constexpr std::uint8_t packed_get(const std::uint8_t* packed, std::size_t i) noexcept {
  constexpr int bits = packed_bits<Format>;
  constexpr unsigned mask = (1u << bits) - 1u;
  if constexpr (bits == 8) {
    return packed[i];
  } else if constexpr (bits == 4) {
    return std::uint8_t((packed[i / 2] >> (4 * (i % 2))) & mask);
  } else {
    const std::size_t bit = i * bits;
    const std::size_t byte = bit / 8;
    const unsigned shift = unsigned(bit % 8);
    // A 6-bit value spans at most two bytes; read the second only when the value reaches into it.
    unsigned window = packed[byte];
    if (shift + bits > 8) window |= unsigned(packed[byte + 1]) << 8;
    return std::uint8_t((window >> shift) & mask);
  }
}

// Writes value i of a packed buffer, leaving its neighbours' bits alone.
template <class Format>
FP8_HOST_DEVICE constexpr void packed_set(std::uint8_t* packed, std::size_t i, std::uint8_t code) noexcept {
  constexpr int bits = packed_bits<Format>;
  constexpr unsigned mask = (1u << bits) - 1u;
  if constexpr (bits == 8) {
    packed[i] = code;
  } else {
    const std::size_t bit = i * bits;
    const std::size_t byte = bit / 8;
    const unsigned shift = unsigned(bit % 8);
    const unsigned value = (unsigned(code) & mask) << shift;
    const unsigned clear = ~(mask << shift);
    packed[byte] = std::uint8_t((packed[byte] & clear) | value);
    if (shift + bits > 8) {
      packed[byte + 1] = std::uint8_t((packed[byte + 1] & (clear >> 8)) | (value >> 8));
    }
  }
}

// Packs `count` codes (one per byte, high bits ignored) into packed_bytes<Format>(count) bytes.
template <class Format>
FP8_HOST_DEVICE void pack(const std::uint8_t* codes, std::size_t count, std::uint8_t* packed) noexcept {
  constexpr int bits = packed_bits<Format>;
  constexpr unsigned mask = (1u << bits) - 1u;
  std::size_t i = 0;
  if constexpr (bits == 8) {
    for (; i < count; ++i) packed[i] = codes[i];
  } else if constexpr (bits == 4) {
    for (; i + 2 <= count; i += 2)
      packed[i / 2] = std::uint8_t((codes[i] & mask) | (codes[i + 1] & mask) << 4);
    if (i < count) packed[i / 2] = std::uint8_t(codes[i] & mask);
  } else {
    for (; i + 4 <= count; i += 4) {
      const std::uint32_t group = (codes[i] & mask) | (codes[i + 1] & mask) << 6 |
                                  (codes[i + 2] & mask) << 12 | std::uint32_t(codes[i + 3] & mask) << 18;
      std::uint8_t* out = packed + i / 4 * 3;
      out[0] = std::uint8_t(group);
      out[1] = std::uint8_t(group >> 8);
      out[2] = std::uint8_t(group >> 16);
    }
    if (i < count) {
      for (std::size_t b = i / 4 * 3; b < packed_bytes<Format>(count); ++b) packed[b] = 0;
      for (; i < count; ++i) packed_set<Format>(packed, i, codes[i]);
    }
  }
}

// Unpacks `count` codes, one per byte (high bits zero).
template <class Format>
FP8_HOST_DEVICE void unpack(const std::uint8_t* packed, std::size_t count, std::uint8_t* codes) noexcept {
  constexpr int bits = packed_bits<Format>;
  constexpr unsigned mask = (1u << bits) - 1u;
  std::size_t i = 0;
  if constexpr (bits == 4) {
    for (; i + 2 <= count; i += 2) {
      codes[i] = std::uint8_t(packed[i / 2] & mask);
      codes[i + 1] = std::uint8_t(packed[i / 2] >> 4);
    }
  } else if constexpr (bits == 6) {
    for (; i + 4 <= count; i += 4) {
      const std::uint8_t* in = packed + i / 4 * 3;
      const std::uint32_t group = in[0] | std::uint32_t(in[1]) << 8 | std::uint32_t(in[2]) << 16;
      codes[i] = std::uint8_t(group & mask);
      codes[i + 1] = std::uint8_t((group >> 6) & mask);
      codes[i + 2] = std::uint8_t((group >> 12) & mask);
      codes[i + 3] = std::uint8_t((group >> 18) & mask);
    }
  }
  for (; i < count; ++i) codes[i] = packed_get<Format>(packed, i);
}

// Bulk conversion float -> packed codes, rounding once per value with the given policies.
// `random_bits` (one 32-bit word per value) is read only by rounding::stochastic and must then be
// non-null.
template <class Format, rounding Rounding = rounding::nearest_even,
          overflow Overflow = Format::default_overflow>
FP8_HOST_DEVICE void convert_to_packed(const float* in, std::size_t count, std::uint8_t* packed,
                                       const std::uint32_t* random_bits = nullptr) noexcept {
  constexpr std::size_t chunk = 64;  // a multiple of 8: every chunk but the last ends on a byte boundary
  std::uint8_t codes[chunk];
  for (std::size_t start = 0; start < count; start += chunk) {
    const std::size_t n = count - start < chunk ? count - start : chunk;
    for (std::size_t i = 0; i < n; ++i) {
      codes[i] = std::uint8_t(convert_bits<Format, Rounding, Overflow>(
          in[start + i], Rounding == rounding::stochastic ? random_bits[start + i] : 0u));
    }
    pack<Format>(codes, n, packed + packed_bytes<Format>(start));
  }
}

// Bulk conversion packed codes -> float (exact).
template <class Format>
FP8_HOST_DEVICE void convert_from_packed(const std::uint8_t* packed, std::size_t count, float* out) noexcept {
  for (std::size_t i = 0; i < count; ++i) out[i] = decode<float, Format>(packed_get<Format>(packed, i));
}

}  // namespace fp8

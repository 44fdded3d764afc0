// CRC-32 (the IEEE 802.3 / zlib polynomial) for the integrity check of saved scaling states.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace fp8::detail {

// Reflected polynomial 0xEDB88320; crc32 of the nine bytes "123456789" is 0xCBF43926.
inline constexpr std::uint32_t crc32_polynomial = 0xEDB88320u;

constexpr std::array<std::uint32_t, 256> make_crc32_table() noexcept {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t byte = 0; byte < 256; ++byte) {
    std::uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) ? (crc >> 1) ^ crc32_polynomial : crc >> 1;
    table[byte] = crc;
  }
  return table;
}

inline constexpr std::array<std::uint32_t, 256> crc32_table = make_crc32_table();

// Continues a CRC over more bytes: crc32(b, n2, crc32(a, n1)) == crc32 of a followed by b.
inline std::uint32_t crc32(const unsigned char* data, std::size_t size, std::uint32_t crc = 0) noexcept {
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) crc = crc32_table[(crc ^ data[i]) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

}  // namespace fp8::detail

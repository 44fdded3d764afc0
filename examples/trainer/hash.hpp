// FNV-1a, a 64-bit fingerprint of byte strings: checkpoints store one of their tensor data and one of
// the training text, so that corruption or a different data set is caught on resume.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trainer {

inline constexpr std::uint64_t fnv1a_offset = 0xCBF29CE484222325ull;
inline constexpr std::uint64_t fnv1a_prime = 0x100000001B3ull;

// Continues a fingerprint over more bytes: fnv1a(b, nb, fnv1a(a, na)) is the fingerprint of a then b.
inline std::uint64_t fnv1a(const void* data, std::size_t size, std::uint64_t hash = fnv1a_offset) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * fnv1a_prime;
  return hash;
}

}  // namespace trainer

// The shape of one rank's FP8 shard of a weight (codes plus their scales), its size in bytes against
// BF16, and the check that every rank passes the same shape before an all-gather. No MPI or NCCL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../error.hpp"

namespace fp8::distributed {

// One rank's part of a weight sharded ZeRO-3 / FSDP style: `elements` FP8 codes (one byte each) and
// `scales` float scale_inv values (1 for per-tensor scaling, one per block for block scaling).
struct fp8_shard_shape {
  std::size_t elements = 0;
  std::size_t scales = 0;

  // Bytes one rank contributes to an all-gather: 1 per code plus 4 per scale.
  constexpr std::size_t fp8_bytes() const noexcept { return elements + scales * sizeof(float); }
  // The same shard as BF16: 2 bytes per element, no scales.
  constexpr std::size_t bf16_bytes() const noexcept { return elements * 2; }
};

namespace detail {

// `shapes` holds 2 values per rank (elements, scales), in rank order, as gathered from every rank.
// Throws fp8::invalid_argument naming the first rank whose shard differs from rank 0's.
inline void check_equal_shards(const std::uint64_t* shapes, int ranks, const char* who) {
  for (int r = 1; r < ranks; ++r) {
    const std::uint64_t* mine = shapes + 2 * r;
    if (mine[0] == shapes[0] && mine[1] == shapes[1]) continue;
    throw invalid_argument(std::string(who) + ": shard shapes differ across ranks: rank 0 has " +
                           std::to_string(shapes[0]) + " codes and " + std::to_string(shapes[1]) +
                           " scales, rank " + std::to_string(r) + " has " + std::to_string(mine[0]) +
                           " codes and " + std::to_string(mine[1]) +
                           " scales (every rank must pass the same shard shape)");
  }
}

}  // namespace detail
}  // namespace fp8::distributed

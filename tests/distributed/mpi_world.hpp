// What the MPI tests ask of MPI_COMM_WORLD directly: this rank, the number of ranks, and every rank's
// copy of some floats (as bit patterns, so that NaN and -0.0 compare exactly).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include <fp8/distributed/mpi_communicator.hpp>

namespace mpi_world {

inline int rank() { return fp8::distributed::mpi_rank(MPI_COMM_WORLD); }

inline int size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

inline std::uint32_t bits(float value) {
  std::uint32_t b = 0;
  std::memcpy(&b, &value, sizeof b);
  return b;
}

// result[r] = rank r's `mine`, as bit patterns.
inline std::vector<std::vector<std::uint32_t>> bits_of_every_rank(const std::vector<float>& mine) {
  std::vector<std::uint32_t> mine_bits;
  for (float value : mine) mine_bits.push_back(bits(value));
  const int count = static_cast<int>(mine.size());
  std::vector<std::uint32_t> all(mine.size() * static_cast<std::size_t>(size()));
  MPI_Allgather(mine_bits.data(), count, MPI_UINT32_T, all.data(), count, MPI_UINT32_T, MPI_COMM_WORLD);
  std::vector<std::vector<std::uint32_t>> result;
  for (int r = 0; r < size(); ++r)
    result.emplace_back(all.begin() + r * count, all.begin() + (r + 1) * count);
  return result;
}

// Whether every rank holds the same bits.
inline bool same_on_every_rank(const std::vector<float>& mine) {
  const auto all = bits_of_every_rank(mine);
  for (const auto& theirs : all)
    if (theirs != all[0]) return false;
  return true;
}

}  // namespace mpi_world

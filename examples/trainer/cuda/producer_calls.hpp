// How often the linear layers took their operands' work from the kernels that produced them, counted
// since the layers were made: whether, and how often, each shortcut ran. A test that compares runs
// with and without a shortcut needs this, since a shortcut that never runs gives the same results.
// Host-visible: no nvcc needed.
#pragma once

#include <cstdint>

namespace trainer::cuda {

struct producer_calls {
  // Layer calls that took FP8 codes written before the call (x forward, dy backward: by RMSNorm,
  // SwiGLU, or the staging copy of a float operand; --no-producer-fp8 turns them off).
  std::uint64_t fp8_codes = 0;
  // Layer calls given an operand's amax recorded by the kernel that wrote it (x_amax or dy_amax of
  // fp8::cuda::linear_layer; --no-producer-amaxes turns them off).
  std::uint64_t amaxes = 0;
};

}  // namespace trainer::cuda

// What the casts of an FP8 linear layer did to its operands, for debugging FP8 training: per operand
// the amax, the range of its scales, and how many elements saturated or were flushed to zero. The
// device fills the raw counters; this header turns them into numbers (plain host code, no CUDA).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "../../scaling/gemm_operand.hpp"
#include "config.hpp"

namespace fp8::cuda {

// The counters one statistics pass of the layer fills on the device for one FP8 copy (zeroed, then
// accumulated with atomics). `unsigned long long` is the type CUDA's 64-bit atomicAdd takes.
struct cast_counters {
  unsigned long long elements;   // of the copy (rows x cols)
  unsigned long long nonzero;    // elements with x != 0
  unsigned long long saturated;  // |x| * scale above the format's largest finite value
  unsigned long long flushed;    // x != 0 whose FP8 code is ±0
  float amax;                    // max |x| (NaN-dominant, as the casts record it)
  std::uint32_t scale_min_bits;  // the smallest and largest scale (1 / scale_inv) of the copy's
  std::uint32_t scale_max_bits;  // blocks, as float bits (scales are positive: bits order as values)
  std::uint32_t unused;
};

// One operand's statistics. The definitions are the CPU trainer's (examples/trainer/fp8_gemm.cpp):
// with scale = 1 / scale_inv of the element's block, an element saturated when |x| * scale exceeds
// the format's largest finite value (the saturating cast clamps it, or rounds it down, to that value),
// and a nonzero element was flushed when its FP8 code is ±0 (it underflowed).
struct cast_statistics {
  bool counted = false;  // false: the operand was not cast in a statistics pass since the last read
  // The class the operand feeds: fp8 or fake_fp8 (the counts are of the copy its product read), or
  // bf16 (its product read the BF16 operand; the counts are of a scratch cast with the operand's
  // recipe and scale, made on statistics calls only: what FP8 would do to it).
  gemm_precision precision = gemm_precision::fp8;
  float amax = 0.0f;
  float scale_min = 0.0f;
  float scale_max = 0.0f;
  std::uint64_t elements = 0;
  std::uint64_t nonzero = 0;
  std::uint64_t saturated = 0;
  std::uint64_t flushed = 0;

  // The fractions the trainer's stats.csv logs: saturated of all elements, flushed of the nonzero ones.
  double saturated_fraction() const noexcept {
    return double(saturated) / double(elements == 0 ? 1 : elements);
  }
  double flushed_fraction() const noexcept { return double(flushed) / double(nonzero == 0 ? 1 : nonzero); }
};

// Per operand of a layer, indexed by fp8::gemm_operand.
using linear_statistics = std::array<cast_statistics, gemm_operand_count>;

inline cast_statistics statistics_of(const cast_counters& c, gemm_precision precision) noexcept {
  const auto as_float = [](std::uint32_t bits) {
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  };
  cast_statistics s;
  s.counted = true;
  s.precision = precision;
  s.amax = c.amax;
  s.scale_min = as_float(c.scale_min_bits);
  s.scale_max = as_float(c.scale_max_bits);
  s.elements = c.elements;
  s.nonzero = c.nonzero;
  s.saturated = c.saturated;
  s.flushed = c.flushed;
  return s;
}

}  // namespace fp8::cuda

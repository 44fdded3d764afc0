// The arithmetic the GPU benchmarks size their buffers and judge their outputs by, as pure host
// functions (no CUDA), so that it is tested on machines without a GPU (test_bench_rules).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace fp8_bench {

// --- Rotating inputs past the L2 cache -----------------------------------------------------------

// At most this many copies of one product's inputs are rotated (memory stays bounded for tiny
// shapes given to bench_gemm --only).
inline constexpr std::size_t max_rotation_sets = 64;

// How many copies of a product's inputs (X and W) to rotate through so that between two uses of one
// copy the others touch at least twice the L2 size, whichever element type runs: counted in the
// bytes of one FP8 copy, the smaller footprint (a BF16 copy is twice as large). One copy is enough
// when it alone spans twice the L2 size; otherwise ceil(2 L2 / bytes) others, plus the copy itself.
// Example: a 1024^3 product (2 MiB of FP8 inputs) on a 50 MiB L2 rotates 51 copies.
constexpr std::size_t rotation_sets(std::size_t fp8_bytes_per_set, std::size_t l2_bytes) noexcept {
  if (fp8_bytes_per_set == 0 || fp8_bytes_per_set >= 2 * l2_bytes) return 1;
  const std::size_t others = (2 * l2_bytes + fp8_bytes_per_set - 1) / fp8_bytes_per_set;
  return std::min(max_rotation_sets, others + 1);
}

// --- Judging a product's sampled outputs ---------------------------------------------------------

// What bench_gemm's sampled error (|got - ref| beyond one BF16 rounding of ref, divided by
// S = Σ_t |x_t w_t|) may reach:
//  - BF16 inputs accumulate in FP32: rounding errors of about 2^-24 per addition, far below 2^-16 S.
//  - FP8 with split accumulation: the tensor cores' reduced-precision accumulator (about 13-14
//    bits kept) is promoted to FP32 every 128 products, so its truncation starts afresh with an
//    accumulator of random sign each time and stays far below 2^-13 S.
//  - FP8 with fast accumulation: no promotion; the truncation of every 32-product step carries the
//    sign of the running sum, so the errors add up rather than cancel: about 2^-14 per step of a
//    sum of size sqrt(K), K / 32 steps, which relative to S is about 2^-14 sqrt(K) / 32 (2^-12 at
//    K = 16384), and DeepSeek-V3 reports errors of this size on H800; the largest of 256 samples
//    is two or three times that. 2^-8 leaves room above it.
// A zero or wrongly scaled output is off by |ref| ~ sqrt(2K / pi) against S ~ (2 / pi) K for random
// normal data: about 1.25 / sqrt(K) of S, still twice the largest bound at K = 16384 (see
// zero_output_error), so every bound here still catches it.
constexpr double gemm_error_bound(bool fp8, bool fast_accumulation) noexcept {
  if (!fp8) return 1.0 / 65536.0;                         // 2^-16
  return fast_accumulation ? 1.0 / 256.0 : 1.0 / 8192.0;  // 2^-8, 2^-13
}

// The sampled error a zero output has at the median of random normal data with reduction length k:
// median |ref| / E[S] = 0.674 sqrt(k) / (0.637 k) (ref ~ N(0, k), E|x w| = 2 / pi); the largest of
// 256 samples is about four times this. Callers pass sqrt(k).
constexpr double zero_output_error(double sqrt_k) noexcept { return 0.674 / (0.6366 * sqrt_k); }

// --- The quantize benchmark's matrix -------------------------------------------------------------

// Rows and columns of bench_quantize's matrix, with --quick as without it: 64 Mi elements, so that
// the smallest traffic measured (a BF16 input read once and its E4M3 codes written: 3 bytes per
// element, 192 MiB) is several times the 50 MiB L2 of an H100 or H200 and no repetition reads the
// last one's data from L2. (A 4096 x 4096 matrix would move 48 MiB: mostly L2 hits.)
inline constexpr std::size_t quantize_matrix_side = 8192;

}  // namespace fp8_bench

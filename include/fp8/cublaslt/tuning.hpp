// Tuning: timing the heuristic's candidate algorithms of one product on the device and keeping the
// fastest. cuBLASLt's heuristic ranks its candidates by a model, not by a measurement, and for some
// shapes and scale modes its first pick is not its fastest; PyTorch's TunableOp and hipBLASLt's
// tuning tools time the candidates for the same reason. What is timed, how the samples are taken,
// how the order is chosen and where the timed runs write lives here and needs no CUDA; tune.hpp
// runs it on a GPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "problem.hpp"
#include "validate.hpp"

namespace fp8::cublaslt {

// How a handle tunes (handle::set_tuning, handle::tune).
struct tuning_options {
  // Tune every plan on its first call (handle::set_tuning). handle::tune() tunes when asked,
  // whatever this says.
  bool enabled = false;
  // How many algorithms the heuristic is asked for (1 to max_tuning_candidates); all that run are
  // timed. An untuned plan asks for 8 (heuristic_candidates).
  int candidates = 32;
  // Timings per candidate, taken in turns (every candidate once, then again) so that a clock or a
  // neighbour's load that changes during tuning touches every candidate alike; the median counts.
  int rounds = 5;
  // Back-to-back calls inside one timing: more hides the launch gaps of small products.
  int calls_per_timing = 3;
};

inline constexpr int max_tuning_candidates = 64;

// Why `options` cannot tune; empty when they can.
inline std::string find_tuning_options_problem(const tuning_options& options) {
  if (options.candidates < 1 || options.candidates > max_tuning_candidates) {
    return "tuning_options::candidates is " + std::to_string(options.candidates) + ": it must be 1 to " +
           std::to_string(max_tuning_candidates);
  }
  if (options.rounds < 1) {
    return "tuning_options::rounds is " + std::to_string(options.rounds) +
           ": at least 1 timing per candidate";
  }
  if (options.calls_per_timing < 1) {
    return "tuning_options::calls_per_timing is " + std::to_string(options.calls_per_timing) +
           ": at least 1 call per timing";
  }
  return {};
}

// One candidate's outcome. `rank` is its place in the heuristic's list (0 = the heuristic's pick).
template <class Status>
struct candidate_timing {
  std::size_t rank = 0;
  Status status{};  // of its first call; a candidate that fails there is not timed
  bool worked = false;
  bool failed_while_timed = false;  // ran its first call, then failed in a timing: not kept
  std::vector<double> ms{};         // per call, one entry per timing
  double median_ms = std::numeric_limits<double>::quiet_NaN();
  std::string algorithm{};  // its configuration as cuBLASLt reports it (tune.hpp: describe_algorithm)
};

template <class Status>
struct tuning_result {
  std::vector<candidate_timing<Status>> candidates{};  // in the heuristic's order
  std::vector<std::size_t> fastest_first{};            // ranks of the candidates that worked

  bool any_worked() const noexcept { return !fastest_first.empty(); }
  // The heuristic's pick's median over the fastest's: how much tuning gained (1 when the heuristic
  // was right; NaN when its pick failed or nothing worked).
  double gain() const noexcept {
    if (fastest_first.empty() || candidates.empty() || !candidates.front().worked) {
      return std::numeric_limits<double>::quiet_NaN();
    }
    return candidates.front().median_ms / candidates[fastest_first.front()].median_ms;
  }
};

// The median of a non-empty list (the mean of the middle two for an even count).
inline double median_of(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const std::size_t half = values.size() / 2;
  return values.size() % 2 == 1 ? values[half] : 0.5 * (values[half - 1] + values[half]);
}

// Tries each of `count` candidates once (`probe(i)` returns its status, `success` when it ran), then
// takes options.rounds timings in turns of those that ran (`time(i)`: milliseconds per call over
// options.calls_per_timing calls; NaN when a call failed, which drops the candidate) and orders them
// by median, the heuristic's order breaking ties.
template <class Status, class Probe, class Time>
tuning_result<Status> time_candidates(std::size_t count, const tuning_options& options, Status success,
                                      Probe&& probe, Time&& time) {
  tuning_result<Status> result;
  result.candidates.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    candidate_timing<Status>& c = result.candidates[i];
    c.rank = i;
    c.status = probe(i);
    c.worked = c.status == success;
  }
  for (int round = 0; round < options.rounds; ++round) {
    for (candidate_timing<Status>& c : result.candidates) {
      if (!c.worked) continue;
      const double ms = time(c.rank);
      if (std::isnan(ms)) {
        c.worked = false;
        c.failed_while_timed = true;
        continue;
      }
      c.ms.push_back(ms);
    }
  }
  for (candidate_timing<Status>& c : result.candidates) {
    if (!c.worked) continue;
    c.median_ms = median_of(c.ms);
    result.fastest_first.push_back(c.rank);
  }
  std::stable_sort(result.fastest_first.begin(), result.fastest_first.end(),
                   [&](std::size_t x, std::size_t y) {
                     return result.candidates[x].median_ms < result.candidates[y].median_ms;
                   });
  return result;
}

// Where tuning's runs write. Tuning never writes the caller's memory: every output a run writes (D,
// the GELU aux matrix, a bias gradient, D's amax) goes to scratch of its size instead, so that a run
// repeated many times cannot feed on its own output (an in-place accumulation C = D, a dgelu whose D
// is its aux, overlapping buffers) and the caller's outputs are written once, by the call after the
// tuning, or not at all by handle::tune(). Offsets are in bytes from the start of one block; each
// part starts 256-byte aligned, as cudaMalloc's allocations do, so that the plan (chosen for the
// caller's alignments, at most 256) fits the scratch too.
struct tuning_scratch {
  std::size_t d = 0, aux = 0, bias_gradient = 0, amax = 0;
  std::size_t bytes = 0;  // the whole block
  bool aux_written = false, bias_gradient_written = false, amax_written = false;
};

inline constexpr std::size_t tuning_scratch_alignment = 256;

// The bytes D's storage spans (column-major m x n with leading dimension ld; in a strided batch
// the last matrix starts (count - 1) · stride elements in), of a problem whose leading dimensions
// and strides are resolved (with_packed_leading_dimensions).
inline std::size_t output_storage_bytes(const gemm_problem& p) noexcept {
  const std::size_t one = std::size_t(p.d.ld) * std::size_t(p.n);
  const std::size_t before_last =
      p.batch.count > 1 ? std::size_t(p.batch.count - 1) * std::size_t(p.batch.stride_d) : 0;
  return (before_last + one) * element_bytes(p.d.type);
}

inline tuning_scratch tuning_scratch_for(const gemm_problem& p) noexcept {
  tuning_scratch s;
  const auto place = [&s](std::size_t bytes) {
    const std::size_t offset = s.bytes;
    s.bytes += (bytes + tuning_scratch_alignment - 1) / tuning_scratch_alignment * tuning_scratch_alignment;
    return offset;
  };
  s.d = place(output_storage_bytes(p));
  const epilogue kind = p.options.epilogue_kind;
  if (writes_aux(kind)) {
    s.aux_written = true;
    const std::int64_t ld = std::max(p.options.aux_ld, p.m);
    s.aux = place(std::size_t(ld) * std::size_t(p.n) * element_bytes(aux_type_of(p)));
  }
  if (writes_bias_gradient(kind)) {
    s.bias_gradient_written = true;
    s.bias_gradient = place(std::size_t(bias_length(kind, p.m, p.n)) * element_bytes(bias_type_of(p)));
  }
  if (is_fp8(p.d.type) && p.d.amax != nullptr) {
    s.amax_written = true;
    s.amax = place(sizeof(float));
  }
  return s;
}

}  // namespace fp8::cublaslt

// Tuning: timing the heuristic's candidate algorithms of one product on the device and keeping the
// fastest. cuBLASLt's heuristic ranks its candidates by a model, not by a measurement, and for some
// shapes and scale modes its first pick is not its fastest; PyTorch's TunableOp and hipBLASLt's
// tuning tools time the candidates for the same reason. What is timed, how the samples are taken
// and how the order is chosen lives here and needs no CUDA; tune.hpp runs it on a GPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

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
  Status status{};  // of its first call; a candidate that fails is not timed
  bool worked = false;
  std::vector<double> ms{};  // per call, one entry per timing
  double median_ms = std::numeric_limits<double>::quiet_NaN();
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
        c.worked = false;  // it ran once and then failed: not one to keep
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

}  // namespace fp8::cublaslt

// fp8 — the timeout of a collective (MPI or NCCL): checked, and turned into a deadline.
#pragma once

#include <chrono>
#include <string>

#include "../error.hpp"

namespace fp8::distributed::detail {

// steady_clock counts int64 nanoseconds, about 292 years: a deadline further out would wrap into the
// past and expire at the first poll. 1e9 s (about 31 years) stays far inside; 0 means no deadline.
inline constexpr double longest_timeout_seconds = 1e9;

// Throws fp8::invalid_argument naming `who` for a negative, NaN, infinite or too large timeout.
inline void check_timeout(double seconds, const std::string& who) {
  if (!(seconds >= 0.0) || !(seconds <= longest_timeout_seconds))
    throw invalid_argument(
        who + ": the timeout must be a finite number of seconds >= 0 and <= 1e9 (0 for no deadline; got " +
        std::to_string(seconds) + ")");
}

// Now plus a timeout that check_timeout accepted.
inline std::chrono::steady_clock::time_point deadline_after(double seconds) {
  using clock = std::chrono::steady_clock;
  return clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace fp8::distributed::detail

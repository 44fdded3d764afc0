// Falling back to the next algorithm: cuBLASLt's heuristic returns candidates best first, and the
// first can fail at run time (no kernel image for this GPU, a workspace or alignment it cannot
// use). The handle tries the next before giving up and then keeps the one that worked. Needs no CUDA.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace fp8::cublaslt {

// What trying candidates gave: the index of the one that worked (or `count` when none did) and
// the status of every attempt, in order.
template <class Status>
struct fallback_result {
  std::size_t index = 0;
  std::vector<Status> statuses{};
  bool succeeded(std::size_t count) const noexcept { return index < count; }
};

// Calls attempt(i) for i = start, start + 1, ..., count - 1 until one returns `success`, or one
// returns a status for which retry(status) is false: a failure that may have come after the
// algorithm began to write (an execution error), when the next candidate would read a D (as C,
// beta = 1) already changed and add the product twice, or fail alike on a device that faulted.
template <class Status, class Attempt, class Retry>
fallback_result<Status> first_that_works(std::size_t count, std::size_t start, Status success,
                                         Attempt&& attempt, Retry&& retry) {
  fallback_result<Status> result{count, {}};
  for (std::size_t i = start; i < count; ++i) {
    const Status status = attempt(i);
    result.statuses.push_back(status);
    if (status == success) {
      result.index = i;
      return result;
    }
    if (!retry(status)) return result;
  }
  return result;
}

// What every attempt of first_that_works from `start` gave, for the error when none worked:
// "candidate 2: NAME, candidate 3: NAME", each status named by name_of(status).
template <class Status, class Name>
std::string attempts_text(const fallback_result<Status>& result, std::size_t start, Name&& name_of) {
  std::string text;
  for (std::size_t i = 0; i < result.statuses.size(); ++i) {
    if (i != 0) text += ", ";
    text += "candidate " + std::to_string(start + i) + ": " + std::string(name_of(result.statuses[i]));
  }
  return text;
}

}  // namespace fp8::cublaslt

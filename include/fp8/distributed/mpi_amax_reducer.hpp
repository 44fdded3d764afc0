// The MPI amax reducer for data-parallel FP8: one all-reduce with max over all of a step's amaxes
// (host buffers), NaN-dominant across ranks, with an optional deadline for ranks that never join.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../error.hpp"
#include "../scaling/amax_reducer.hpp"
#include "kept_buffers.hpp"
#include "mpi_communicator.hpp"

namespace fp8::distributed {

// Amaxes are non-negative floats or NaN. Their bit patterns, read as unsigned integers, order like
// their values with every NaN above +Inf, so one MPI_MAX over the patterns is exact and keeps NaN
// dominant across ranks (a NaN amax on one rank is a NaN amax on all). -0.0 would read as the largest
// pattern, so it is sent as +0.0; a negative amax is a caller's bug and is refused before any call.
//
// Usage (every rank, once per step, after the casts):
//   fp8::distributed::mpi_amax_reducer reducer(MPI_COMM_WORLD);  // or (comm, {30.0}): a 30 s deadline
//   state.update(reducer);              // fp8::delayed_scaling_state: one MPI call per step
//   reducer.reduce_max(amaxes, count);  // or directly, e.g. current scaling's amaxes
// With a timeout, a call that has not completed after that many seconds throws fp8::error naming the
// call, the rank and the seconds; the reducer then refuses every later call (the ranks no longer
// agree), and the job should end. All ranks must use the reducer in the same order.
class mpi_amax_reducer final : public amax_reducer {
 public:
  // Its communicator is made under the same deadline (mpi_communicator), so a rank that never builds
  // its reducer is an error on the others, not a hang.
  explicit mpi_amax_reducer(MPI_Comm comm, mpi_timeout timeout = {})
      : comm_(comm, timeout, "fp8::distributed::mpi_amax_reducer"),
        timeout_(timeout),
        guard_("fp8::distributed::mpi_amax_reducer", "MPI_Iallreduce (amax max)") {}
  ~mpi_amax_reducer() override {
    if (pending_ == MPI_REQUEST_NULL) return;
    int done = 0;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && MPI_Test(&pending_, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) return;
    // The vector's heap block moves with it: the address MPI writes into stays valid.
    detail::keep_until_exit(std::make_unique<std::vector<std::uint32_t>>(std::move(bits_)));
  }
  mpi_amax_reducer(const mpi_amax_reducer&) = delete;
  mpi_amax_reducer& operator=(const mpi_amax_reducer&) = delete;

  // Replaces amaxes[0..count) by their maxima over all ranks, with one MPI call. Throws
  // fp8::invalid_argument (before any MPI call, amaxes unchanged) on a null pointer, a count above
  // INT_MAX or a negative amax; fp8::error if MPI fails or the deadline passes (amaxes unchanged).
  void reduce_max(float* amaxes, std::size_t count) override {
    const std::string who = "fp8::distributed::mpi_amax_reducer";
    guard_.require_usable(comm_.get());
    if (count == 0) return;
    if (amaxes == nullptr) throw invalid_argument(who + ": amaxes is null");
    if (count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw invalid_argument(who + ": " + std::to_string(count) +
                             " amaxes are more than one MPI call can carry (at most INT_MAX)");
    bits_.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      const float amax = amaxes[i];
      if (amax < 0.0f)
        throw invalid_argument(who + ": amax " + std::to_string(i) + " is negative (" + std::to_string(amax) +
                               ")");
      std::memcpy(&bits_[i], &amax, sizeof amax);
      if (amax == 0.0f) bits_[i] = 0;  // -0.0 as +0.0
    }
    MPI_Request request = MPI_REQUEST_NULL;
    guard_.check_start(MPI_Iallreduce(MPI_IN_PLACE, bits_.data(), static_cast<int>(count), MPI_UINT32_T,
                                      MPI_MAX, comm_.get(), &request),
                       comm_.get());
    pending_ = request;
    guard_.wait(&pending_, 1, comm_.get(), timeout_);  // on a timeout bits_ stays in MPI's use
    ++calls_;
    for (std::size_t i = 0; i < count; ++i) std::memcpy(&amaxes[i], &bits_[i], sizeof(float));
  }

  const mpi_communicator& communicator() const noexcept { return comm_; }
  const mpi_timeout& timeout() const noexcept { return timeout_; }
  // How many reductions completed (one per step when used through a scaling state).
  std::size_t calls() const noexcept { return calls_; }

 private:
  mpi_communicator comm_;
  mpi_timeout timeout_;
  detail::mpi_collective_guard guard_;
  std::vector<std::uint32_t> bits_;
  MPI_Request pending_ = MPI_REQUEST_NULL;
  std::size_t calls_ = 0;
};

}  // namespace fp8::distributed

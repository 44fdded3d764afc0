// The MPI plumbing of fp8's collectives: errors as fp8::error naming the call and the rank, a private
// communicator that returns errors, and a wait with an optional deadline (a rank that never joins).
// Needs <mpi.h>; the core headers do not include this file.
#pragma once

// Only MPI's C interface is used; the deprecated C++ bindings (removed in MPI-3) do not compile warning-free.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <thread>

#include "../error.hpp"

namespace fp8::distributed {

// The rank of this process in comm, or -1 where even that cannot be asked.
inline int mpi_rank(MPI_Comm comm) noexcept {
  int rank = -1;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS) return -1;
  return rank;
}

// Throws fp8::error("<call> failed on rank <r>: <MPI's text>") unless rc is MPI_SUCCESS. The
// communicator must return errors (MPI_ERRORS_RETURN) for this to see them; the default handler aborts.
inline void mpi_check(int rc, const char* call, MPI_Comm comm) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  throw error(
      std::string(call) + " failed on rank " + std::to_string(mpi_rank(comm)) + ": " +
      (length > 0 ? std::string(text, static_cast<std::size_t>(length)) : "MPI error " + std::to_string(rc)));
}

// A private duplicate of a communicator, with MPI_ERRORS_RETURN, so that fp8's collectives neither
// match a caller's messages nor change the caller's error handler. Free it before MPI_Finalize.
class mpi_communicator {
 public:
  explicit mpi_communicator(MPI_Comm parent) {
    if (parent == MPI_COMM_NULL)
      throw invalid_argument("fp8::distributed::mpi_communicator: the communicator is MPI_COMM_NULL");
    mpi_check(MPI_Comm_dup(parent, &comm_), "MPI_Comm_dup", parent);
    const int rc = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
      MPI_Comm_free(&comm_);
      mpi_check(rc, "MPI_Comm_set_errhandler", parent);
    }
  }
  ~mpi_communicator() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  mpi_communicator(const mpi_communicator&) = delete;
  mpi_communicator& operator=(const mpi_communicator&) = delete;

  MPI_Comm get() const noexcept { return comm_; }
  int rank() const noexcept { return mpi_rank(comm_); }
  int size() const {
    int size = 0;
    mpi_check(MPI_Comm_size(comm_, &size), "MPI_Comm_size", comm_);
    return size;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// How long a collective may wait for the other ranks before it gives up with an fp8::error; 0 (the
// default) waits as long as MPI does. A rank that dies is normally noticed by the launcher (mpirun
// aborts the job); the deadline covers a rank that hangs or never reaches the call.
struct mpi_timeout {
  double seconds = 0.0;

  bool enabled() const noexcept { return seconds > 0.0; }
  // Throws fp8::invalid_argument naming `who` for a negative, NaN or infinite value.
  void validate(const char* who) const {
    if (!(seconds >= 0.0) || std::isinf(seconds))
      throw invalid_argument(std::string(who) +
                             ": the timeout must be a finite number of seconds >= 0 (got " +
                             std::to_string(seconds) + ")");
  }
};

namespace detail {

// Completes `count` requests started by `call`: MPI_Waitall without a deadline, else MPI_Testall
// polled (spinning briefly, then sleeping 100 us between polls, which also drives MPI's progress)
// until it succeeds or the deadline passes. On a timeout the requests stay active and their buffers
// stay in MPI's use: the caller keeps them alive and refuses further collectives on this communicator.
// Returns whether they completed; throws fp8::error on an MPI error.
inline bool mpi_wait_all(MPI_Request* requests, int count, const char* call, MPI_Comm comm,
                         const mpi_timeout& timeout) {
  if (!timeout.enabled()) {
    mpi_check(MPI_Waitall(count, requests, MPI_STATUSES_IGNORE), call, comm);
    return true;
  }
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout.seconds));
  for (long polls = 0;; ++polls) {
    int done = 0;
    mpi_check(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE), call, comm);
    if (done) return true;
    if (clock::now() >= deadline) return false;
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// The error of a collective that missed its deadline: the call, the rank, the seconds waited.
[[noreturn]] inline void throw_mpi_timeout(const char* call, MPI_Comm comm, const mpi_timeout& timeout) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeout.seconds);
  throw error(std::string(call) + " timed out on rank " + std::to_string(mpi_rank(comm)) + " after " +
              seconds +
              " s: another rank has died, hangs or skipped the call; the ranks no longer agree, so "
              "end the job (MPI_Abort)");
}

}  // namespace detail
}  // namespace fp8::distributed

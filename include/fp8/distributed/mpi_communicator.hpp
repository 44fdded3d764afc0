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
#include <memory>
#include <string>
#include <thread>

#include "../error.hpp"
#include "deadline.hpp"
#include "kept_buffers.hpp"

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

// How long a collective may wait for the other ranks before it gives up with an fp8::error; 0 (the
// default) waits as long as MPI does. A rank that dies is normally noticed by the launcher (mpirun
// aborts the job); the deadline covers a rank that hangs or never reaches the call.
struct mpi_timeout {
  double seconds = 0.0;

  bool enabled() const noexcept { return seconds > 0.0; }
  // Throws fp8::invalid_argument naming `who` for a negative, NaN, infinite or too large value.
  void validate(const char* who) const { detail::check_timeout(seconds, who); }
};

namespace detail {

// Completes `count` requests started by `call`: MPI_Waitall without a deadline, else MPI_Testall
// polled (spinning briefly, then sleeping 100 us between polls, which also drives MPI's progress)
// until it succeeds or the deadline passes. Returns whether they completed; throws fp8::error on an
// MPI error. On a timeout the requests stay active and their buffers stay in MPI's use.
inline bool mpi_wait_all(MPI_Request* requests, int count, const char* call, MPI_Comm comm,
                         const mpi_timeout& timeout) {
  if (!timeout.enabled()) {
    mpi_check(MPI_Waitall(count, requests, MPI_STATUSES_IGNORE), call, comm);
    return true;
  }
  using clock = std::chrono::steady_clock;
  const auto deadline = deadline_after(timeout.seconds);
  for (long polls = 0;; ++polls) {
    int done = 0;
    mpi_check(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE), call, comm);
    if (done) return true;
    if (clock::now() >= deadline) return false;
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// The state of an object that runs one kind of collective (`call`) on its communicator, step after
// step. Once a call has failed or missed its deadline the ranks no longer agree on which step they
// are in (and MPI cannot cancel a collective), so every later call is refused.
class mpi_collective_guard {
 public:
  mpi_collective_guard(const char* who, const char* call) : who_(who), call_(call) {}

  // Throws fp8::error if an earlier call failed or timed out.
  void require_usable(MPI_Comm comm) const {
    if (!broken_) return;
    throw error(std::string(who_) + ": an earlier " + call_ + " failed or timed out on rank " +
                std::to_string(mpi_rank(comm)) + "; the ranks no longer agree, so no further call can run");
  }
  // Throws fp8::error naming call_ unless rc (of the call starting a request) is MPI_SUCCESS.
  void check_start(int rc, MPI_Comm comm) {
    if (rc != MPI_SUCCESS) broken_ = true;
    mpi_check(rc, call_, comm);
  }
  // Completes the requests (see mpi_wait_all); throws fp8::error naming the call, the rank and the
  // seconds waited if the deadline passes.
  void wait(MPI_Request* requests, int count, MPI_Comm comm, const mpi_timeout& timeout) {
    bool done = false;
    try {
      done = mpi_wait_all(requests, count, call_, comm, timeout);
    } catch (...) {
      broken_ = true;
      throw;
    }
    if (done) return;
    broken_ = true;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeout.seconds);
    throw error(std::string(call_) + " timed out on rank " + std::to_string(mpi_rank(comm)) + " after " +
                seconds +
                " s: another rank has died, hangs or skipped the call; the ranks no longer agree, so end the "
                "job (MPI_Abort)");
  }
  bool broken() const noexcept { return broken_; }
  const char* call() const noexcept { return call_; }

 private:
  const char* who_;
  const char* call_;
  bool broken_ = false;
};

// One collective of an object's making: started by start(&request) (MPI's return code), then waited
// under the deadline; an error names `call`, the rank and the seconds (mpi_collective_guard). Where
// it fails or gives up, the pending call may still write `buffers` (its send and receive memory):
// they are kept for the rest of the program (kept_buffers.hpp), and the error goes on.
template <class T, class Start>
void run_one_collective(const char* who, const char* call, MPI_Comm comm, const mpi_timeout& timeout,
                        std::unique_ptr<T>& buffers, Start&& start) {
  mpi_collective_guard guard(who, call);
  try {
    MPI_Request request = MPI_REQUEST_NULL;
    guard.check_start(start(&request), comm);
    guard.wait(&request, 1, comm, timeout);
  } catch (...) {
    keep_until_exit(std::move(buffers));
    throw;
  }
}

}  // namespace detail

// A private duplicate of a communicator, with MPI_ERRORS_RETURN, so that fp8's collectives neither
// match a caller's messages nor change the caller's error handler. Free it before MPI_Finalize.
// Making it is a collective (MPI_Comm_idup), waited with the optional deadline: a rank that never
// makes its copy (or never builds the object that holds it) is then an fp8::error naming the call,
// the rank and the seconds on the others, not a hang. Given up on, the pending call still writes the
// new handle into its slot, which is kept (kept_buffers.hpp). `who` names the owner in messages.
class mpi_communicator {
 public:
  explicit mpi_communicator(MPI_Comm parent, mpi_timeout timeout = {},
                            const char* who = "fp8::distributed::mpi_communicator") {
    if (parent == MPI_COMM_NULL)
      throw invalid_argument(std::string(who) + ": the communicator is MPI_COMM_NULL");
    timeout.validate(who);
    auto slot = std::make_unique<MPI_Comm>(MPI_COMM_NULL);
    detail::run_one_collective(
        who, "MPI_Comm_idup (fp8's own communicator)", parent, timeout, slot,
        [&](MPI_Request* request) { return MPI_Comm_idup(parent, slot.get(), request); });
    comm_ = *slot;
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

}  // namespace fp8::distributed

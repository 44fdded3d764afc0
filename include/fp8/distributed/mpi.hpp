// MPI for data-parallel FP8: the amax reducer (one MPI_Allreduce with max over all of a step's amaxes)
// and the error check that turns an MPI failure into an fp8::error naming the call and the rank.
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

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../error.hpp"
#include "../scaling/amax_reducer.hpp"

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

// Amaxes are non-negative floats or NaN. Their bit patterns, read as unsigned integers, order like
// their values with every NaN above +Inf, so one MPI_MAX over the patterns is exact and keeps NaN
// dominant across ranks (a NaN amax on one rank is a NaN amax on all). -0.0 would read as the largest
// pattern, so it is sent as +0.0; a negative amax is a caller's bug and is refused before any call.
class mpi_amax_reducer final : public amax_reducer {
 public:
  explicit mpi_amax_reducer(MPI_Comm comm) : comm_(comm) {}

  void reduce_max(float* amaxes, std::size_t count) override {
    if (count == 0) return;
    if (count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw invalid_argument("fp8::distributed::mpi_amax_reducer: " + std::to_string(count) +
                             " amaxes are more than one MPI call can carry");
    bits_.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      const float amax = amaxes[i];
      if (amax < 0.0f)
        throw invalid_argument("fp8::distributed::mpi_amax_reducer: amax " + std::to_string(i) +
                               " is negative (" + std::to_string(amax) + ")");
      std::memcpy(&bits_[i], &amax, sizeof amax);
      if (amax == 0.0f) bits_[i] = 0;  // -0.0 as +0.0
    }
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, bits_.data(), static_cast<int>(count), MPI_UINT32_T, MPI_MAX,
                            comm_.get()),
              "MPI_Allreduce (amax max)", comm_.get());
    for (std::size_t i = 0; i < count; ++i) std::memcpy(&amaxes[i], &bits_[i], sizeof(float));
  }

  const mpi_communicator& communicator() const noexcept { return comm_; }

 private:
  mpi_communicator comm_;
  std::vector<std::uint32_t> bits_;
};

}  // namespace fp8::distributed

// The processes that train one model together (data parallelism): this process alone, or the ranks of
// an MPI job started by mpirun. The training loop sees only this interface; MPI lives in
// process_group_mpi.cpp, built where CMake finds MPI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fp8/scaling/amax_reducer.hpp>

namespace trainer {

class process_group {
 public:
  virtual ~process_group() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  bool is_root() const { return rank() == 0; }

  // Replaces data[0..count) by its sum over the ranks, in place: one collective (MPI_Allreduce).
  virtual void sum(float* data, std::size_t count) = 0;
  // Every rank's `values` (the same count on each), rank after rank: one collective (MPI_Allgather).
  virtual std::vector<std::uint64_t> gather(const std::vector<std::uint64_t>& values) = 0;
  // Rank 0's `values` on every rank (the same count on each): one collective (MPI_Bcast; by default
  // rank 0's share of a gather).
  virtual std::vector<std::uint64_t> broadcast(const std::vector<std::uint64_t>& values) {
    std::vector<std::uint64_t> all = gather(values);
    all.resize(values.size());
    return all;
  }
  // The reducer that makes the FP8 amaxes agree (a max over the ranks) once per step.
  virtual fp8::amax_reducer& amax_reducer() = 0;
  // Ends every process of the job with `exit_code` (MPI_Abort): for a failure on this rank alone,
  // which the other ranks would otherwise wait for in their next collective. Returns only for a
  // group of one process, which the caller then ends by returning the code.
  virtual void abort(int exit_code) = 0;

 protected:
  process_group() = default;
  process_group(const process_group&) = default;
  process_group& operator=(const process_group&) = default;
};

// fp8_trainer's exit statuses (main.cpp) that collective errors carry.
inline constexpr int usage_error_status = 2;  // found before training: options, inputs
inline constexpr int failure_status = 1;      // a failure while running

// A failure that every rank finds at the same point from the same gathered values (options or weights
// that differ between ranks, a batch that does not divide among them): each rank throws it, rank 0
// reports it, and all end with exit_code without aborting the job.
class collective_error : public std::runtime_error {
 public:
  collective_error(const std::string& message, int exit_code)
      : std::runtime_error(message), code_(exit_code) {}
  int exit_code() const noexcept { return code_; }

 private:
  int code_;
};

// This process alone (no MPI).
std::unique_ptr<process_group> single_process();

// The group this process was started in: the MPI job (MPI_Init) when mpirun or another MPI launcher
// started it, this process alone otherwise, so that a one-rank run needs no mpirun and pays nothing.
// Throws std::runtime_error if launched as one of several ranks by a trainer built without MPI.
std::unique_ptr<process_group> join_process_group();

// The rank the launcher gave this process (OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK), read before
// MPI starts; 0 when no launcher started it. Decides who prints a usage error found before MPI_Init.
int launcher_rank();
// The number of ranks the launcher started (OMPI_COMM_WORLD_SIZE or PMI_SIZE); -1 without a launcher.
int launcher_size();
// This process's rank among the ranks on its node (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or
// SLURM_LOCALID) and their number (OMPI_COMM_WORLD_LOCAL_SIZE or MPI_LOCALNRANKS); -1 where the
// launcher does not say. They choose each rank's GPU (gpu_ranks.hpp).
int launcher_local_rank();
int launcher_local_size();

// Compares values that must be equal on every rank (e.g. {"the weights", hash}) with one gather.
// Throws collective_error(exit_code) naming the first value that differs, `when` it was checked,
// and the ranks whose value differs from rank 0's. Nothing to do for a group of one.
struct replica_value {
  std::string what;
  std::uint64_t value = 0;
};
void check_same_on_all_ranks(process_group& group, const std::vector<replica_value>& values,
                             const std::string& when, const std::string& hint, int exit_code);

// Every rank must have been started with the same arguments (mpirun gives them the same; an MPMD
// command line, `mpirun -np 1 fp8_trainer --lr 1e-3 : -np 1 fp8_trainer --lr 2e-3`, may not): compares
// a fingerprint of argv[1..argc) with one gather; collective_error (exit status 2) naming the ranks.
void check_same_arguments(process_group& group, int argc, const char* const* argv);

}  // namespace trainer

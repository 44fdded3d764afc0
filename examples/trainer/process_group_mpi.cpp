// The MPI process group: MPI_COMM_WORLD of a job started by mpirun. Built only where CMake finds MPI
// (FP8_TRAINER_MPI); the trainer's other files never include <mpi.h>.
#include <fp8/distributed/mpi.hpp>  // first: it keeps MPI's C++ bindings out

#include <limits>

#include "process_group.hpp"

namespace trainer {

namespace {

// MPI_Init on construction, MPI_Finalize on destruction (after the communicators that need it).
class mpi_session {
 public:
  mpi_session() {
    int provided = 0;
    // Only the main thread calls MPI; OpenMP threads do the arithmetic in between.
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS)
      throw std::runtime_error("MPI_Init_thread failed (error " + std::to_string(rc) + ")");
  }
  ~mpi_session() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;
};

int checked_count(std::size_t count, const char* what) {
  if (count > std::size_t(std::numeric_limits<int>::max())) {
    throw std::runtime_error(std::string(what) + ": " + std::to_string(count) +
                             " values are more than one MPI call can carry");
  }
  return int(count);
}

class mpi_group final : public process_group {
 public:
  mpi_group() : comm_(MPI_COMM_WORLD), reducer_(MPI_COMM_WORLD), rank_(comm_.rank()), size_(comm_.size()) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void sum(float* data, std::size_t count) override {
    if (size_ == 1) return;
    fp8::distributed::mpi_check(MPI_Allreduce(MPI_IN_PLACE, data, checked_count(count, "gradient sum"),
                                              MPI_FLOAT, MPI_SUM, comm_.get()),
                                "MPI_Allreduce (gradient sum)", comm_.get());
  }

  std::vector<std::uint64_t> gather(const std::vector<std::uint64_t>& values) override {
    std::vector<std::uint64_t> all(values.size() * std::size_t(size_));
    const int count = checked_count(values.size(), "gather");
    fp8::distributed::mpi_check(
        MPI_Allgather(values.data(), count, MPI_UINT64_T, all.data(), count, MPI_UINT64_T, comm_.get()),
        "MPI_Allgather (replica check)", comm_.get());
    return all;
  }

  std::vector<std::uint64_t> broadcast(const std::vector<std::uint64_t>& values) override {
    std::vector<std::uint64_t> root = values;
    fp8::distributed::mpi_check(
        MPI_Bcast(root.data(), checked_count(root.size(), "broadcast"), MPI_UINT64_T, 0, comm_.get()),
        "MPI_Bcast", comm_.get());
    return root;
  }

  fp8::amax_reducer& amax_reducer() override { return reducer_; }

  void abort(int exit_code) override { MPI_Abort(MPI_COMM_WORLD, exit_code); }

 private:
  mpi_session session_;  // declared first: finalized last
  fp8::distributed::mpi_communicator comm_;
  fp8::distributed::mpi_amax_reducer reducer_;
  int rank_, size_;
};

}  // namespace

std::unique_ptr<process_group> join_process_group() {
  if (launcher_size() < 0) return single_process();
  return std::make_unique<mpi_group>();
}

}  // namespace trainer

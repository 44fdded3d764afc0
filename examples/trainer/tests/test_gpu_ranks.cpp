// Data parallelism on GPUs without a GPU: which GPU each rank drives, the refusal of more ranks than
// GPUs on a node, of two ranks on one GPU, and of several ranks without NCCL, with their messages.
// (tests/gpu_data_parallel.sh runs real ranks on a machine with several GPUs.)
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_ranks.hpp"
#include "process_group.hpp"

using namespace trainer;

namespace {

// The message of the std::invalid_argument gpu_for_rank throws ("" if it returns).
std::string refusal(int local_rank, int local_ranks, int devices, int ranks) {
  try {
    (void)gpu_for_rank(local_rank, local_ranks, devices, ranks);
  } catch (const std::invalid_argument& e) { return e.what(); }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Rank 1 of 2, whose peer (rank 0) holds {7, 8, ...}: what a gather returns on rank 1.
class second_of_two final : public process_group {
 public:
  int rank() const override { return 1; }
  int size() const override { return 2; }
  void sum(float*, std::size_t) override {}
  std::vector<std::uint64_t> gather(const std::vector<std::uint64_t>& values) override {
    std::vector<std::uint64_t> all;
    for (std::size_t i = 0; i < values.size(); ++i) all.push_back(7 + i);
    all.insert(all.end(), values.begin(), values.end());
    return all;
  }
  fp8::amax_reducer& amax_reducer() override { return identity_; }
  void abort(int) override {}

 private:
  fp8::identity_amax_reducer identity_;
};

}  // namespace

TEST_CASE("each rank of a node drives the GPU of its local rank") {
  CHECK(gpu_for_rank(0, 4, 4, 8) == 0);
  CHECK(gpu_for_rank(3, 4, 4, 8) == 3);
  CHECK(gpu_for_rank(1, 2, 8, 2) == 1);
  // Fewer ranks than GPUs: the first ones, distinct.
  CHECK(gpu_for_rank(0, 2, 8, 4) == 0);
  CHECK(gpu_for_rank(1, 2, 8, 4) == 1);
  // The local size unknown: the local rank must still name a GPU of its own.
  CHECK(gpu_for_rank(2, -1, 4, 6) == 2);
  // One process: the first visible GPU, whatever the launcher says.
  CHECK(gpu_for_rank(-1, -1, 2, 1) == 0);
  CHECK(gpu_for_rank(5, 6, 2, 1) == 0);
}

TEST_CASE("more ranks on a node than GPUs are refused, naming the counts and the fix") {
  const std::string message = refusal(0, 3, 2, 3);
  CHECK(contains(message, "3 ranks on this node but 2 GPUs visible"));
  CHECK(contains(message, "at most 2 ranks per node"));
  CHECK(contains(message, "mpirun -np 2"));
  // Every rank of the node refuses, not only those past the last GPU.
  CHECK(!refusal(1, 3, 2, 3).empty());
  CHECK(contains(refusal(0, 2, 1, 2), "1 GPU visible"));
  // Without the local size, a local rank past the last GPU.
  CHECK(contains(refusal(4, -1, 4, 8), "5 ranks on this node but 4 GPUs"));
}

TEST_CASE("no GPU, or no local rank from the launcher, is refused") {
  CHECK(contains(refusal(0, 2, 0, 2), "no CUDA device is visible"));
  CHECK(contains(refusal(0, 1, 0, 1), "no CUDA device is visible"));
  CHECK(contains(refusal(-1, -1, 4, 2), "OMPI_COMM_WORLD_LOCAL_RANK"));
}

TEST_CASE("two ranks on one GPU are refused for every rank alike, naming them") {
  CHECK_NOTHROW(check_one_rank_per_gpu({11, 12, 13}));
  CHECK_NOTHROW(check_one_rank_per_gpu({11}));
  try {
    check_one_rank_per_gpu({11, 12, 13, 12});
    FAIL("two ranks on one GPU were accepted");
  } catch (const collective_error& e) {
    CHECK(e.exit_code() == usage_error_status);
    CHECK(contains(e.what(), "ranks 1 and 3 would drive the same GPU"));
  }
}

TEST_CASE("a broadcast hands every rank rank 0's values (the NCCL id's way to the other ranks)") {
  second_of_two group;
  CHECK(group.broadcast({1, 2, 3}) == std::vector<std::uint64_t>{7, 8, 9});
  CHECK(group.broadcast({}).empty());
}

TEST_CASE("several GPU ranks need NCCL") {
  CHECK_NOTHROW(check_gpu_data_parallel(1, false));
  CHECK_NOTHROW(check_gpu_data_parallel(4, true));
  try {
    check_gpu_data_parallel(2, false);
    FAIL("2 ranks without NCCL were accepted");
  } catch (const collective_error& e) {
    CHECK(e.exit_code() == usage_error_status);
    CHECK(contains(e.what(), "--device cuda with 2 ranks needs NCCL"));
    CHECK(contains(e.what(), "--device cpu"));
  }
}

TEST_CASE("the launcher's local rank and size are read from its environment") {
  // Open MPI's names first; absent or malformed values read as -1.
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  CHECK(launcher_local_rank() == 3);
  CHECK(launcher_local_size() == 4);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  ::setenv("MPI_LOCALRANKID", "1", 1);
  CHECK(launcher_local_rank() == 1);  // MPICH's Hydra
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("MPI_LOCALRANKID");
  ::unsetenv("SLURM_LOCALID");
  ::unsetenv("MPI_LOCALNRANKS");
  CHECK(launcher_local_rank() == -1);
  CHECK(launcher_local_size() == -1);
}

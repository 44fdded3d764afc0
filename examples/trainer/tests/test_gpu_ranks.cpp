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
#include "option_checks.hpp"
#include "process_group.hpp"

using namespace trainer;
using trainer_tests::contains;

namespace {

// The message of the std::invalid_argument gpu_for_rank throws ("" if it returns).
std::string refusal(int local_rank, int devices, int ranks) {
  try {
    (void)gpu_for_rank(local_rank, devices, ranks);
  } catch (const std::invalid_argument& e) { return e.what(); }
  return "";
}

// The message of the collective_error check_one_rank_per_gpu throws ("" if it returns); its status
// must be the usage status.
std::string shared_gpu(const std::vector<gpu_claim>& claims) {
  try {
    check_one_rank_per_gpu(claims);
  } catch (const collective_error& e) {
    CHECK(e.exit_code() == usage_error_status);
    return e.what();
  }
  return "";
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
  CHECK(gpu_for_rank(0, 4, 8) == 0);
  CHECK(gpu_for_rank(3, 4, 8) == 3);
  CHECK(gpu_for_rank(1, 8, 2) == 1);
  // Past the last GPU: modulo (check_one_rank_per_gpu then finds the rank that shares it).
  CHECK(gpu_for_rank(4, 4, 8) == 0);
  // Each rank sees only its own GPU (CUDA_VISIBLE_DEVICES per rank): device 0 of what it sees.
  CHECK(gpu_for_rank(3, 1, 4) == 0);
  // One process: the first visible GPU, whatever the launcher says.
  CHECK(gpu_for_rank(-1, 2, 1) == 0);
  CHECK(gpu_for_rank(5, 2, 1) == 0);
}

TEST_CASE("no GPU, or no local rank from the launcher, is refused") {
  CHECK(refusal(0, 0, 2) == "--device cuda with 2 ranks: no CUDA device is visible (check nvidia-smi)");
  CHECK(contains(refusal(0, 0, 1), "--device cuda with 1 rank: no CUDA device is visible"));
  CHECK(contains(refusal(-1, 4, 2), "OMPI_COMM_WORLD_LOCAL_RANK"));
  CHECK(refusal(1, 2, 2).empty());
}

TEST_CASE("ranks on distinct GPUs pass, on one GPU are refused for every rank alike, naming them") {
  CHECK(shared_gpu({{11, 2, 2}, {12, 2, 2}, {13, 2, 2}, {14, 2, 2}}).empty());  // two nodes of 2
  CHECK(shared_gpu({{11, 4, 1}, {12, 4, 1}, {13, 4, 1}}).empty());  // one visible GPU each, all distinct
  CHECK(shared_gpu({{11, -1, 1}}).empty());
  // More ranks on a node than GPUs: the counts and the fix.
  const std::string crowded = shared_gpu({{11, 3, 2}, {12, 3, 2}, {11, 3, 2}});
  CHECK(contains(crowded, "ranks 0 and 2 would drive the same GPU, which NCCL refuses"));
  CHECK(contains(crowded, "their node runs 3 ranks but shows each of them 2 GPUs"));
  CHECK(contains(crowded, "start at most 2 ranks per node (mpirun -np 2"));
  CHECK(contains(shared_gpu({{11, 2, 1}, {11, 2, 1}}), "runs 2 ranks but shows each of them 1 GPU;"));
  // The same GPU named twice by CUDA_VISIBLE_DEVICES (or no local size): the ranks and the remedy.
  const std::string doubled = shared_gpu({{11, 2, 2}, {12, 2, 2}, {13, 2, 2}, {12, 2, 2}});
  CHECK(contains(doubled, "ranks 1 and 3 would drive the same GPU"));
  CHECK(contains(doubled, "CUDA_VISIBLE_DEVICES that differ"));
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

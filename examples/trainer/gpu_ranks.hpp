// Data parallelism on GPUs (--device cuda under mpirun): which GPU each rank drives, and what such a
// run refuses. Plain C++ without CUDA, so that the rules are tested on any machine; the GPU run
// (cuda/nccl_group.cu) applies them.
#pragma once

#include <cstdint>
#include <vector>

namespace trainer {

// The GPU of the rank `local_rank` of its node (as the launcher says) among the `devices` GPUs it
// sees: local_rank modulo devices, so that the ranks of a node that all see its GPUs take one each.
// Throws std::invalid_argument naming the problem when no GPU is visible, or when the launcher gave
// no local rank (-1) while `ranks` > 1. One rank: the first visible GPU.
int gpu_for_rank(int local_rank, int devices, int ranks);

// What a rank claims: its GPU as one number (the host name and the GPU's UUID hashed together), the
// number of ranks on its node (-1: the launcher does not say) and of GPUs it sees.
struct gpu_claim {
  std::uint64_t gpu = 0;
  int local_ranks = -1;
  int devices = 0;
};

// NCCL refuses two ranks on one GPU. With every rank's claim (rank after rank, from one gather), throws
// collective_error (usage status 2) naming the first two ranks that share a GPU and, where the cause is
// more ranks on a node than GPUs, the counts and the fix. Ranks that each see only their own GPU
// (CUDA_VISIBLE_DEVICES set per rank, as srun --gpus-per-task does) pass.
void check_one_rank_per_gpu(const std::vector<gpu_claim>& claims);

// Throws collective_error (usage status 2) when --device cuda runs on `ranks` > 1 ranks in a trainer
// built without NCCL (`nccl_built` false): the gradients could not be reduced on the GPU.
void check_gpu_data_parallel(int ranks, bool nccl_built);

}  // namespace trainer

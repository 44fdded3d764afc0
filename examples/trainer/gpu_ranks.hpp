// Data parallelism on GPUs (--device cuda under mpirun): which GPU each rank drives, and what such a
// run refuses. Plain C++ without CUDA, so that the rules are tested on any machine; the GPU run
// (cuda/nccl_group.cu) applies them.
#pragma once

#include <cstdint>
#include <vector>

namespace trainer {

// The GPU of the rank `local_rank` of the `local_ranks` ranks on its node (-1: the launcher does
// not say), among the `devices` GPUs it sees: local_rank modulo devices. NCCL refuses two ranks on
// one GPU, so this throws std::invalid_argument (naming the counts and the fix) when the node has
// more ranks than visible GPUs, when no GPU is visible, or when the local rank is unknown (-1)
// while `ranks` > 1.
int gpu_for_rank(int local_rank, int local_ranks, int devices, int ranks);

// Each rank's GPU as one number (its host and the GPU's UUID hashed together), rank after rank:
// throws collective_error (usage status 2) naming the first two ranks that share a GPU, which
// happens when each rank sees every GPU of its node but the launcher reported no local rank, or
// when CUDA_VISIBLE_DEVICES gives several ranks the same GPU.
void check_one_rank_per_gpu(const std::vector<std::uint64_t>& gpu_of_rank);

// Throws collective_error (usage status 2) when --device cuda runs on `ranks` > 1 ranks in a trainer
// built without NCCL (`nccl_built` false): the gradients could not be reduced on the GPU.
void check_gpu_data_parallel(int ranks, bool nccl_built);

}  // namespace trainer

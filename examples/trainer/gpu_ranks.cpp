// The GPU of each rank and the refusals of data-parallel --device cuda runs.
#include "gpu_ranks.hpp"

#include <stdexcept>
#include <string>

#include "process_group.hpp"

namespace trainer {

int gpu_for_rank(int local_rank, int devices, int ranks) {
  const std::string prefix =
      "--device cuda with " + std::to_string(ranks) + (ranks == 1 ? " rank: " : " ranks: ");
  if (devices <= 0) throw std::invalid_argument(prefix + "no CUDA device is visible (check nvidia-smi)");
  if (ranks <= 1) return 0;  // one process: the first visible GPU, as without mpirun
  if (local_rank < 0) {
    throw std::invalid_argument(
        prefix +
        "the launcher did not say which rank on this node this process is (OMPI_COMM_WORLD_LOCAL_RANK, "
        "MPI_LOCALRANKID or SLURM_LOCALID): start the job with Open MPI's mpirun, MPICH's mpiexec or srun");
  }
  return local_rank % devices;
}

void check_one_rank_per_gpu(const std::vector<gpu_claim>& claims) {
  for (std::size_t a = 0; a < claims.size(); ++a) {
    for (std::size_t b = a + 1; b < claims.size(); ++b) {
      if (claims[a].gpu != claims[b].gpu) continue;
      const gpu_claim& c = claims[a];
      std::string message = "--device cuda: ranks " + std::to_string(a) + " and " + std::to_string(b) +
                            " would drive the same GPU, which NCCL refuses";
      const std::string gpus = std::to_string(c.devices) + (c.devices == 1 ? " GPU" : " GPUs");
      if (c.local_ranks > c.devices) {
        message += ": their node runs " + std::to_string(c.local_ranks) + " ranks but shows each of them " +
                   gpus + "; start at most " + std::to_string(c.devices) + " ranks per node (mpirun -np " +
                   std::to_string(c.devices) + ", or --map-by ppr:" + std::to_string(c.devices) +
                   ":node on several nodes)";
      } else {
        message += " (rank " + std::to_string(a) + " sees " + gpus +
                   "): give every rank its own GPU, with fewer ranks per node or CUDA_VISIBLE_DEVICES "
                   "that differ";
      }
      throw collective_error(message + " (see docs/distributed_training.md)", usage_error_status);
    }
  }
}

void check_gpu_data_parallel(int ranks, bool nccl_built) {
  if (ranks <= 1 || nccl_built) return;
  throw collective_error("--device cuda with " + std::to_string(ranks) +
                             " ranks needs NCCL, and this fp8_trainer was built without it (CMake found no "
                             "nccl.h and libnccl beside the CUDA toolkit; set FP8_NCCL_INCLUDE_DIR and "
                             "FP8_NCCL_LIBRARY and rebuild), or train on the CPU ranks with --device cpu",
                         usage_error_status);
}

}  // namespace trainer

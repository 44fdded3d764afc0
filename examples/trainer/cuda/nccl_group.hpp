// The GPU side of a data-parallel run (mpirun ... --device cuda): one NCCL communicator over the
// ranks of the MPI job, one GPU per rank. A host header without <nccl.h>: the communicator lives in
// nccl_group.cu, built only where CMake finds NCCL (FP8_TRAINER_NCCL).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include <fp8/cuda/device_amax_reducer.hpp>

#include "../process_group.hpp"

namespace trainer::cuda {

// The collectives a GPU training step needs, queued on the step's stream.
class device_group {
 public:
  virtual ~device_group() = default;

  // Replaces data[0..count) (device memory) by its sum over the ranks, in place: one ncclAllReduce.
  virtual void sum(float* data, std::size_t count, cudaStream_t stream) = 0;
  // Makes the FP8 amaxes agree (a max over the ranks) before the next scales: linear_scaling's
  // end_step queues it once per step.
  virtual fp8::cuda::device_amax_reducer& amax_reducer() = 0;
  // Waits for `stream`, reporting a failed or dead peer as an error rather than hanging in a
  // synchronisation that never returns.
  virtual void wait(cudaStream_t stream) = 0;

 protected:
  device_group() = default;
  device_group(const device_group&) = default;
  device_group& operator=(const device_group&) = default;
};

#ifdef FP8_TRAINER_NCCL
// For a group of several ranks: selects this rank's GPU (gpu_for_rank from the launcher's local
// rank, then cudaSetDevice), checks with one gather that no two ranks drive the same GPU
// (check_one_rank_per_gpu), and creates
// the communicator (rank 0's ncclGetUniqueId handed to every rank through the MPI group, then
// ncclCommInitRank). Call it before anything is allocated on the GPU. Throws std::invalid_argument or
// collective_error (usage errors) and fp8::error (an NCCL or CUDA failure).
std::unique_ptr<device_group> join_nccl_group(process_group& group);
#endif

}  // namespace trainer::cuda

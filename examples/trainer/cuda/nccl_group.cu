// The NCCL communicator of a data-parallel GPU run, bootstrapped through the MPI process group.
#include "nccl_group.hpp"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>  // gethostname

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <fp8/cuda/error.hpp>
#include <fp8/distributed/nccl.hpp>

#include "../gpu_ranks.hpp"
#include "../hash.hpp"

namespace trainer::cuda {

namespace {

// This rank's GPU as one number: the host name and the GPU's UUID, hashed. Two ranks with the same
// number would share a GPU (NCCL refuses that with an error that names neither rank).
std::uint64_t gpu_identity(int device) {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  cudaDeviceProp properties{};
  FP8_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  const std::uint64_t hash = fnv1a(host.data(), std::strlen(host.data()));
  return fnv1a(properties.uuid.bytes, sizeof properties.uuid.bytes, hash);
}

// Throws fp8::error naming the call and the rank unless rc is ncclSuccess: for the calls made before a
// communicator exists (fp8::distributed::nccl_check reads the rank from one).
void check_setup(ncclResult_t rc, const char* call, int rank) {
  if (rc == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  throw fp8::error(std::string(call) + " failed on rank " + std::to_string(rank) + ": " +
                   ncclGetErrorString(rc) +
                   (last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : ""));
}

// rank 0's ncclUniqueId on every rank: its bytes travel as 64-bit words in one MPI_Bcast.
ncclUniqueId shared_unique_id(process_group& group) {
  static_assert(sizeof(ncclUniqueId) % sizeof(std::uint64_t) == 0, "ncclUniqueId is whole 64-bit words");
  ncclUniqueId id{};
  if (group.is_root()) check_setup(ncclGetUniqueId(&id), "ncclGetUniqueId", 0);
  std::vector<std::uint64_t> words(sizeof id / sizeof(std::uint64_t));
  std::memcpy(words.data(), &id, sizeof id);
  words = group.broadcast(words);
  std::memcpy(&id, words.data(), sizeof id);
  return id;
}

class nccl_group final : public device_group {
 public:
  explicit nccl_group(process_group& group) {
    const ncclUniqueId id = shared_unique_id(group);
    check_setup(ncclCommInitRank(&comm_, group.size(), id, group.rank()), "ncclCommInitRank", group.rank());
    reducer_ = std::make_unique<fp8::distributed::nccl_amax_reducer>(comm_);
  }
  ~nccl_group() override {
    reducer_.reset();
    (void)ncclCommDestroy(comm_);  // a destructor must not throw
  }
  nccl_group(const nccl_group&) = delete;
  nccl_group& operator=(const nccl_group&) = delete;

  void sum(float* data, std::size_t count, cudaStream_t stream) override {
    fp8::distributed::nccl_check(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream),
                                 "ncclAllReduce (gradient sum)", comm_);
  }

  fp8::cuda::device_amax_reducer& amax_reducer() override { return *reducer_; }

  // No deadline: a rank that dies ends the job through mpirun, and a slow step is not an error.
  void wait(cudaStream_t stream) override { fp8::distributed::nccl_wait(comm_, stream, 0.0, "the GPU step"); }

 private:
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<fp8::distributed::nccl_amax_reducer> reducer_;
};

}  // namespace

std::unique_ptr<device_group> join_nccl_group(process_group& group) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: gpu_for_rank names the problem
    devices = 0;
  }
  const int device = gpu_for_rank(launcher_local_rank(), devices, group.size());
  FP8_CUDA_CHECK(cudaSetDevice(device));
  // Every rank's claim in one gather, so that every rank finds a shared GPU at once (rank 0 reports).
  const std::vector<std::uint64_t> words = group.gather(
      {gpu_identity(device), std::uint64_t(std::int64_t(launcher_local_size())), std::uint64_t(devices)});
  std::vector<gpu_claim> claims;
  for (std::size_t i = 0; i + 2 < words.size(); i += 3)
    claims.push_back({words[i], int(std::int64_t(words[i + 1])), int(words[i + 2])});
  check_one_rank_per_gpu(claims);
  return std::make_unique<nccl_group>(group);
}

}  // namespace trainer::cuda

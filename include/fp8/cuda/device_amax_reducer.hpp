// The hook through which a distributed engine makes device-side amaxes agree across ranks (an
// all-reduce with max on a stream) before delayed_scaling_device_state computes the next scales.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace fp8::cuda {

// The device counterpart of fp8::amax_reducer: amaxes point to device memory (count floats, |x|
// values or NaN as the library's casts record them), and the reduction is queued on `stream`, so
// that work queued after it on the stream sees the reduced values. fp8::distributed::nccl_amax_reducer
// implements it with one ncclAllReduce.
class device_amax_reducer {
 public:
  virtual ~device_amax_reducer() = default;
  // Queues the replacement of amaxes[0..count) by their maxima over the group on `stream`. May throw
  // (before queueing anything where it can); the caller then skips the step's update.
  virtual void reduce_max(float* amaxes, std::size_t count, cudaStream_t stream) = 0;

 protected:
  device_amax_reducer() = default;
  device_amax_reducer(const device_amax_reducer&) = default;
  device_amax_reducer& operator=(const device_amax_reducer&) = default;
};

}  // namespace fp8::cuda

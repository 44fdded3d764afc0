// The packed gradient sum of a sharded GPU step (several passes on one GPU, or one rank of several):
// the CPU step's buffer and arithmetic (../data_parallel.cpp) on the device. The first pass's
// gradients are copied, later passes added in pass order, the losses summed on the host in float;
// after the sum over the ranks every gradient is divided by the number of passes of the whole step.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "adamw.hpp"
#include "device_buffer.hpp"
#include "nccl_group.hpp"

namespace trainer::cuda {

class device_gradient_sum {
 public:
  // Losses of a step, averaged over its passes.
  struct mean_losses {
    float loss = 0.0f;
    float shadow = 0.0f;
  };

  // Adds the gradients of pass `pass` (0: the first, copied) and its losses (host floats).
  void add_pass(const device_parameters& params, int pass, float loss, float shadow, cudaStream_t stream);
  // Sums the packed buffer [gradients, loss, shadow loss] over `group`'s ranks (null: one rank) with
  // one all-reduce, then params.grad = sum / shards (float division, as the CPU), and returns the
  // mean losses (waits for the stream).
  mean_losses finish(device_parameters& params, int shards, device_group* group, cudaStream_t stream);

 private:
  device_buffer<float> sum_;  // [size + 2]
  float loss_ = 0.0f, shadow_ = 0.0f;
};

}  // namespace trainer::cuda

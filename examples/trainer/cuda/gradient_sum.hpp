// The end of a sharded GPU step (several passes on one GPU, or one rank of several): the CPU step's
// sum and mean (../data_parallel.cpp) on the device. The passes have already summed their gradients
// in parameters().grad, in pass order (device_model::backward: the first pass writes, the others
// add; the embedding's kernel adds each pass's rows to the running sum, so its additions associate
// differently from the CPU's sum of whole pass gradients, which tests compare within tolerances),
// so no gradient buffer of the step's own is needed; the losses are summed on the host in
// float. After the sum over the ranks every gradient is divided by the number of passes of the
// whole step.
#pragma once

#include <cuda_runtime_api.h>

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

  // The losses of pass `pass` (0: the first of the step, which starts the sums).
  void add_pass_losses(int pass, float loss, float shadow);
  // Sums params.grad and the losses over `group`'s ranks (null: one rank) with one all-reduce each,
  // then params.grad /= shards in place (float division, as the CPU; skipped for one shard, where it
  // changes nothing), and returns the mean losses. With a group it waits for the stream (the summed
  // losses come back from the device); without one the division is only enqueued on the stream, and
  // whoever reads params.grad on the host must wait for the stream first.
  mean_losses finish(device_parameters& params, int shards, device_group* group, cudaStream_t stream);

 private:
  device_buffer<float> losses_;  // [2]: the all-reduce's copy of the losses
  float loss_ = 0.0f, shadow_ = 0.0f;
  bool started_ = false;
};

}  // namespace trainer::cuda

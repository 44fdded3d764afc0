// The loss end of a device model: the logits its head writes, the per-token losses, the gradient
// its backward pass starts from and the scratch of the mean, with the fused cross-entropy pass over
// them. Every model ends the same way; this holds that part once. A host header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "../precision.hpp"
#include "cross_entropy.hpp"
#include "device_buffer.hpp"

namespace trainer::cuda {

class device_loss {
 public:
  device_loss() = default;
  // For passes of up to `tokens` predictions over a vocabulary of `vocab`.
  device_loss(std::size_t tokens, int vocab)
      : vocab_(vocab),
        logits_(tokens * std::size_t(vocab)),
        losses_(tokens),
        dlogits_(tokens * std::size_t(vocab)),
        mean_scratch_(1) {}

  float* logits() { return logits_.data(); }                // [N, V], the head's output
  const float* dlogits() const { return dlogits_.data(); }  // [N, V], after forward_backward

  // The mean cross-entropy of the n predictions in logits() against targets ([N], device), and its
  // gradient into dlogits() stored in `stored`, in one pass (bit-identical to the device's own
  // forward, then backward; within rounding of the CPU's, whose exp and summation order differ).
  // Waits for `stream` to read the mean back.
  double forward_backward(const std::int32_t* targets, int n, storage stored, cudaStream_t stream) {
    return cross_entropy_forward_backward(losses_.data(), dlogits_.data(), logits_.data(), targets, n, vocab_,
                                          stored, mean_scratch_.data(), stream);
  }

 private:
  int vocab_ = 0;
  device_buffer<float> logits_, losses_, dlogits_;  // [N, V], [N], [N, V]
  device_buffer<double> mean_scratch_;              // [1]
};

}  // namespace trainer::cuda

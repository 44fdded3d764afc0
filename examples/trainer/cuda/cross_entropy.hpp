// Softmax cross-entropy of next-token predictions on the device, in nats per token. Mirrors
// ../cross_entropy.hpp, plus a fused forward + backward that writes dlogits without keeping probs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../precision.hpp"

namespace trainer::cuda {

// logits: [N, V]; targets: [N] in [0, V); probs: [N, V] softmax (FP32, kept for the backward pass);
// losses: [N] = -log softmax(logits)[target] (log-sum-exp form; NaN for a target outside [0, V)).
// mean_scratch: one device double. Returns the mean loss, summed in double in a fixed order; the
// call waits for `stream` to read it back.
double cross_entropy_forward(float* losses, float* probs, const float* logits, const std::int32_t* targets,
                             int n, int v, double* mean_scratch, cudaStream_t stream);

// dlogits: [N, V] = (probs - onehot(target)) / N, the gradient of the mean loss, stored in
// `dlogits_storage`.
void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets, int n, int v,
                            storage dlogits_storage, cudaStream_t stream);

// Both in one pass over the logits: losses and dlogits as above, bit-identical to
// cross_entropy_forward followed by cross_entropy_backward, without the [N, V] probs buffer.
double cross_entropy_forward_backward(float* losses, float* dlogits, const float* logits,
                                      const std::int32_t* targets, int n, int v, storage dlogits_storage,
                                      double* mean_scratch, cudaStream_t stream);

}  // namespace trainer::cuda

// Softmax cross-entropy of next-byte predictions: the training loss, in nats per token.
#pragma once

#include <cstdint>

#include "precision.hpp"

namespace trainer {

// logits: [N, V]; targets: [N] in [0, V); probs: [N, V] softmax (FP32, kept for the backward pass);
// losses: [N] = -log probs[target]. Returns the mean loss, summed in double in a fixed order.
double cross_entropy_forward(float* losses, float* probs, const float* logits, const std::int32_t* targets,
                             int n, int v);

// dlogits: [N, V] = (probs - onehot(target)) / N: the gradient of the mean loss.
void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets, int n, int v,
                            storage dlogits_storage);

}  // namespace trainer

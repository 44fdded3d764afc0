// Cross-entropy forward (a stable softmax per row) and backward.
#include "cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "parallel.hpp"

namespace trainer {

double cross_entropy_forward(float* losses, float* probs, const float* logits, const std::int32_t* targets,
                             int n, int v) {
  FP8_TRAINER_PARALLEL_FOR
  for (int row = 0; row < n; ++row) {
    const float* z = logits + std::size_t(row) * std::size_t(v);
    float* p = probs + std::size_t(row) * std::size_t(v);
    const float z_max = *std::max_element(z, z + v);
    double sum = 0.0;
    for (int j = 0; j < v; ++j) {
      p[j] = std::exp(z[j] - z_max);
      sum += p[j];
    }
    const float inverse = float(1.0 / sum);
    for (int j = 0; j < v; ++j) p[j] *= inverse;
    // -log softmax computed from the logits (log-sum-exp), not from a probability that may underflow.
    losses[row] = float(std::log(sum) - double(z[targets[row]] - z_max));
  }
  double total = 0.0;
  for (int row = 0; row < n; ++row) total += losses[row];
  return total / double(n);
}

void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets, int n, int v,
                            storage dlogits_storage) {
  const float inverse_n = 1.0f / float(n);
  FP8_TRAINER_PARALLEL_FOR
  for (int row = 0; row < n; ++row) {
    const float* p = probs + std::size_t(row) * std::size_t(v);
    float* d = dlogits + std::size_t(row) * std::size_t(v);
    for (int j = 0; j < v; ++j) d[j] = p[j] * inverse_n;
    d[targets[row]] -= inverse_n;
  }
  store(dlogits_storage, dlogits, std::size_t(n) * std::size_t(v));
}

}  // namespace trainer

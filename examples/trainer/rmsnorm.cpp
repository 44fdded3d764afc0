// RMSNorm forward and backward, one row (token) at a time.
#include "rmsnorm.hpp"

#include <cmath>
#include <cstddef>

#include "parallel.hpp"

namespace trainer {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int n, int c,
                     storage out_storage) {
  FP8_TRAINER_PARALLEL_FOR
  for (int row = 0; row < n; ++row) {
    const float* x = inp + std::size_t(row) * std::size_t(c);
    float* y = out + std::size_t(row) * std::size_t(c);
    float sum_squares = 0.0f;
    for (int j = 0; j < c; ++j) sum_squares += x[j] * x[j];
    const float s = 1.0f / std::sqrt(sum_squares / float(c) + rmsnorm_epsilon);
    rstd[row] = s;
    for (int j = 0; j < c; ++j) y[j] = x[j] * s * weight[j];
  }
  store(out_storage, out, std::size_t(n) * std::size_t(c));
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int n, int c, storage dinp_storage) {
  FP8_TRAINER_PARALLEL_FOR
  for (int row = 0; row < n; ++row) {
    const float* x = inp + std::size_t(row) * std::size_t(c);
    const float* dy = dout + std::size_t(row) * std::size_t(c);
    float* dx = dinp + std::size_t(row) * std::size_t(c);
    const float s = rstd[row];
    float mean_g_n = 0.0f;  // mean over channels of (dout * weight) * (inp * rstd)
    for (int j = 0; j < c; ++j) mean_g_n += dy[j] * weight[j] * x[j] * s;
    mean_g_n /= float(c);
    for (int j = 0; j < c; ++j) dx[j] += s * (dy[j] * weight[j] - x[j] * s * mean_g_n);
  }
  // The weight gradient sums over rows: serially, so the order (and the result) is fixed.
  for (int row = 0; row < n; ++row) {
    const float* x = inp + std::size_t(row) * std::size_t(c);
    const float* dy = dout + std::size_t(row) * std::size_t(c);
    const float s = rstd[row];
    for (int j = 0; j < c; ++j) dweight[j] += dy[j] * x[j] * s;
  }
  store(dinp_storage, dinp, std::size_t(n) * std::size_t(c));
}

}  // namespace trainer

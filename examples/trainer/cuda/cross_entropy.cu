// Cross-entropy: one warp per token row for the softmax and the loss, one thread per element for the
// gradient, one block for the mean.
#include "cross_entropy.hpp"

#include <math_constants.h>

#include <cstddef>
#include <string>

#include <fp8/cuda/error.hpp>

#include "kernel_support.cuh"

namespace trainer::cuda {

namespace {

// d = p / N, minus 1 / N at the target: the two roundings of the CPU layer, without an FMA.
__device__ __forceinline__ float logit_gradient(float p, bool is_target, float inverse_n) {
  const float d = __fmul_rn(p, inverse_n);
  return is_target ? d - inverse_n : d;
}

// logits: [N, V]; targets: [N]; losses: [N]; probs: [N, V] (written when kWriteProbs);
// dlogits: [N, V] (written when kWriteGradient). One warp per row (all lanes share the row, so the
// shuffles see the full warp), grid-stride over rows. The exponentials are written to the output
// buffer first and rescaled by the same lane after the sum.
template <bool kWriteProbs, bool kWriteGradient>
__global__ void cross_entropy_kernel(float* losses, float* probs, float* dlogits, const float* logits,
                                     const std::int32_t* targets, int n, int v, float inverse_n,
                                     storage dlogits_storage) {
  static_assert(kWriteProbs || kWriteGradient, "the kernel writes probabilities, gradients or both");
  const int lane = int(threadIdx.x) % detail::warp_size;
  const std::size_t warps = std::size_t(gridDim.x) * blockDim.x / detail::warp_size;
  for (std::size_t row = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / detail::warp_size;
       row < std::size_t(n); row += warps) {
    const float* z = logits + row * std::size_t(v);
    float* e = (kWriteProbs ? probs : dlogits) + row * std::size_t(v);
    float z_max = -CUDART_INF_F;
    for (int j = lane; j < v; j += detail::warp_size) z_max = fmaxf(z_max, z[j]);
    z_max = detail::warp_max(z_max);
    double sum = 0.0;
    for (int j = lane; j < v; j += detail::warp_size) {
      e[j] = expf(z[j] - z_max);
      sum += double(e[j]);
    }
    sum = detail::warp_sum(sum);
    const float inverse = float(1.0 / sum);
    const std::int32_t target = targets[row];
    for (int j = lane; j < v; j += detail::warp_size) {
      const float p = e[j] * inverse;
      if (kWriteProbs) probs[row * std::size_t(v) + std::size_t(j)] = p;
      if (kWriteGradient) {
        dlogits[row * std::size_t(v) + std::size_t(j)] =
            detail::store_value(dlogits_storage, logit_gradient(p, j == target, inverse_n));
      }
    }
    if (lane == 0) {
      losses[row] = (target >= 0 && target < v) ? float(log(sum) - double(z[target] - z_max)) : CUDART_NAN_F;
    }
  }
}

// dlogits: [N, V]; probs: [N, V]; targets: [N]. One thread per element, grid-stride.
__global__ void cross_entropy_backward_kernel(float* dlogits, const float* probs, const std::int32_t* targets,
                                              int n, int v, float inverse_n, storage dlogits_storage) {
  const std::size_t count = std::size_t(n) * std::size_t(v);
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const std::size_t row = i / std::size_t(v), j = i % std::size_t(v);
    dlogits[i] = detail::store_value(dlogits_storage,
                                     logit_gradient(probs[i], std::int32_t(j) == targets[row], inverse_n));
  }
}

// mean: [1] = sum of losses[N] / N, in double: one block, each thread a strided partial sum, then the
// block's fixed reduction tree, so the result does not depend on the device.
__global__ void mean_kernel(double* mean, const float* losses, int n) {
  __shared__ double scratch[detail::warp_size];
  double partial = 0.0;
  for (int i = int(threadIdx.x); i < n; i += int(blockDim.x)) partial += double(losses[i]);
  const double total = detail::block_sum(partial, scratch);
  if (threadIdx.x == 0) *mean = total / double(n);
}

// The shape and the pointers every entry point has: its [N, V] output and input (named as the
// caller's arguments, so that a null pointer is reported under its own name) and the targets.
void check(const char* function, const void* output, const char* output_name, const void* input,
           const char* input_name, const void* targets, int n, int v) {
  detail::require(
      n > 0 && v > 0, function,
      "needs n > 0 tokens and v > 0 classes (got n " + std::to_string(n) + ", v " + std::to_string(v) + ")");
  const std::size_t count = std::size_t(n) * std::size_t(v);
  detail::check_pointer(output, count, function, output_name);
  detail::check_pointer(input, count, function, input_name);
  detail::check_pointer(targets, std::size_t(n), function, "targets");
}

double read_mean(double* mean_scratch, const float* losses, int n, cudaStream_t stream) {
  mean_kernel<<<1, detail::block_threads, 0, stream>>>(mean_scratch, losses, n);
  detail::check_launch("mean_kernel");
  double mean = 0.0;
  FP8_CUDA_CHECK(cudaMemcpyAsync(&mean, mean_scratch, sizeof(double), cudaMemcpyDeviceToHost, stream));
  FP8_CUDA_CHECK(cudaStreamSynchronize(stream));
  return mean;
}

unsigned row_grid(int n) { return detail::grid_for_rows(std::size_t(n), detail::warps_per_block); }

}  // namespace

double cross_entropy_forward(float* losses, float* probs, const float* logits, const std::int32_t* targets,
                             int n, int v, double* mean_scratch, cudaStream_t stream) {
  const char* function = "trainer::cuda::cross_entropy_forward";
  check(function, probs, "probs", logits, "logits", targets, n, v);
  detail::check_pointer(losses, std::size_t(n), function, "losses");
  detail::check_pointer(mean_scratch, 1, function, "mean_scratch");
  cross_entropy_kernel<true, false><<<row_grid(n), detail::block_threads, 0, stream>>>(
      losses, probs, nullptr, logits, targets, n, v, 0.0f, storage::fp32);
  detail::check_launch("cross_entropy_kernel");
  return read_mean(mean_scratch, losses, n, stream);
}

void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets, int n, int v,
                            storage dlogits_storage, cudaStream_t stream) {
  const char* function = "trainer::cuda::cross_entropy_backward";
  check(function, dlogits, "dlogits", probs, "probs", targets, n, v);
  const std::size_t count = std::size_t(n) * std::size_t(v);
  cross_entropy_backward_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(
      dlogits, probs, targets, n, v, 1.0f / float(n), dlogits_storage);
  detail::check_launch("cross_entropy_backward_kernel");
}

double cross_entropy_forward_backward(float* losses, float* dlogits, const float* logits,
                                      const std::int32_t* targets, int n, int v, storage dlogits_storage,
                                      double* mean_scratch, cudaStream_t stream) {
  const char* function = "trainer::cuda::cross_entropy_forward_backward";
  check(function, dlogits, "dlogits", logits, "logits", targets, n, v);
  detail::check_pointer(losses, std::size_t(n), function, "losses");
  detail::check_pointer(mean_scratch, 1, function, "mean_scratch");
  cross_entropy_kernel<false, true><<<row_grid(n), detail::block_threads, 0, stream>>>(
      losses, nullptr, dlogits, logits, targets, n, v, 1.0f / float(n), dlogits_storage);
  detail::check_launch("cross_entropy_kernel");
  return read_mean(mean_scratch, losses, n, stream);
}

}  // namespace trainer::cuda

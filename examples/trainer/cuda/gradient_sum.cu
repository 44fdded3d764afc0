// The sharded step's gradient sum and mean on the device.
#include "gradient_sum.hpp"

#include <fp8/cuda/error.hpp>

#include "kernel_support.cuh"
#include "residual.hpp"

namespace trainer::cuda {

namespace {

// grad[i] = sum[i] / shards: one correctly rounded float division per element (nvcc's default
// -prec-div=true), the CPU step's arithmetic, so the two devices agree on the mean.
__global__ void mean_kernel(float* grad, const float* sum, std::size_t count, float shards) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    grad[i] = sum[i] / shards;
  }
}

}  // namespace

void device_gradient_sum::add_pass(const device_parameters& params, int pass, float loss, float shadow,
                                   cudaStream_t stream) {
  const std::size_t n = params.size();
  if (sum_.size() != n + 2) sum_ = device_buffer<float>(n + 2);
  // The first pass is copied, not added to zero: 0 + -0 would turn a -0 into +0 (as on the CPU).
  if (pass == 0) {
    FP8_CUDA_CHECK(cudaMemcpyAsync(sum_.data(), params.grad.data(), n * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream));
    loss_ = loss;
    shadow_ = shadow;
  } else {
    residual_forward(sum_.data(), sum_.data(), params.grad.data(), n, storage::fp32, stream);
    loss_ += loss;
    shadow_ += shadow;
  }
}

device_gradient_sum::mean_losses device_gradient_sum::finish(device_parameters& params, int shards,
                                                             device_group* group, cudaStream_t stream) {
  const std::size_t n = params.size();
  if (sum_.size() != n + 2)
    throw fp8::invalid_argument("trainer::cuda::device_gradient_sum: no pass was added");
  float losses[2] = {loss_, shadow_};
  // The losses travel in the gradients' all-reduce: one collective per step.
  FP8_CUDA_CHECK(cudaMemcpyAsync(sum_.data() + n, losses, sizeof losses, cudaMemcpyHostToDevice, stream));
  if (group != nullptr) group->sum(sum_.data(), n + 2, stream);
  if (n > 0) {
    mean_kernel<<<detail::grid_for(n), detail::block_threads, 0, stream>>>(params.grad.data(), sum_.data(), n,
                                                                           float(shards));
    detail::check_launch("trainer::cuda::mean_kernel");
  }
  // The all-reduce is waited for first (a failed peer is reported, not waited for forever); the
  // copy to pageable memory then returns at once.
  if (group != nullptr) group->wait(stream);
  FP8_CUDA_CHECK(cudaMemcpyAsync(losses, sum_.data() + n, sizeof losses, cudaMemcpyDeviceToHost, stream));
  FP8_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {losses[0] / float(shards), losses[1] / float(shards)};
}

}  // namespace trainer::cuda

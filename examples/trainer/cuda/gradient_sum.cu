// The sharded step's gradient sum over the ranks and its mean, on the device.
#include "gradient_sum.hpp"

#include <fp8/cuda/error.hpp>

#include "kernel_support.cuh"

namespace trainer::cuda {

namespace {

// grad[i] /= shards: one correctly rounded float division per element (nvcc's default
// -prec-div=true), the CPU step's arithmetic, so the two devices agree on the mean.
__global__ void mean_kernel(float* grad, std::size_t count, float shards) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    grad[i] = grad[i] / shards;
  }
}

}  // namespace

void device_gradient_sum::add_pass_losses(int pass, float loss, float shadow) {
  if (pass == 0) {
    loss_ = loss;
    shadow_ = shadow;
    started_ = true;
  } else {
    loss_ += loss;
    shadow_ += shadow;
  }
}

device_gradient_sum::mean_losses device_gradient_sum::finish(device_parameters& params, int shards,
                                                             device_group* group, cudaStream_t stream) {
  if (!started_) throw fp8::invalid_argument("trainer::cuda::device_gradient_sum: no pass was added");
  started_ = false;
  const std::size_t n = params.size();
  float losses[2] = {loss_, shadow_};
  if (group != nullptr) {
    if (losses_.size() != 2) losses_ = device_buffer<float>(2);
    FP8_CUDA_CHECK(cudaMemcpyAsync(losses_.data(), losses, sizeof losses, cudaMemcpyHostToDevice, stream));
    group->sum(params.grad.data(), n, stream);
    group->sum(losses_.data(), 2, stream);
  }
  if (n > 0 && shards > 1) {
    mean_kernel<<<detail::grid_for(n), detail::block_threads, 0, stream>>>(params.grad.data(), n,
                                                                           float(shards));
    detail::check_launch("trainer::cuda::mean_kernel");
  }
  if (group != nullptr) {
    // The all-reduces are waited for first (a failed peer is reported, not waited for forever); the
    // copy to pageable memory then returns at once.
    group->wait(stream);
    FP8_CUDA_CHECK(cudaMemcpyAsync(losses, losses_.data(), sizeof losses, cudaMemcpyDeviceToHost, stream));
    FP8_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return {losses[0] / float(shards), losses[1] / float(shards)};
}

}  // namespace trainer::cuda

// AdamW, gradient norm and clipping kernels (grid-stride loops), and the device parameter buffers.
#include "adamw.hpp"

#include <cuda_bf16.h>

#include <cmath>
#include <optional>
#include <string>

#include <fp8/cuda/error.hpp>

#include "kernel_support.cuh"
#include "storage.hpp"

namespace trainer::cuda {

namespace {

// AdamW's constants for one step, as the CPU layer computes them.
struct adamw_constants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, correction1, correction2, epsilon, learning_rate;
};

// The CPU update for one range of tensors with the same decay. Every product, quotient, sum and root
// is an IEEE-rounded intrinsic, so nvcc does not contract a * b + c into an FMA; the host compiler may
// still contract the CPU loop (GCC does with -march=native), which is why the test allows a few ulp.
// With adamw_fusion's work: g clipped first (`clip`: g * clip_factor, the product clip_gradients
// stores), and the new weight as stored (compute_storage) into compute and/or into its BF16 copy,
// each when set.
__global__ void adamw_kernel(float* master, float* adam_m, float* adam_v, const float* grad,
                             std::size_t begin, std::size_t end, adamw_constants k, float decay, bool clip,
                             float clip_factor, float* compute, storage compute_storage,
                             __nv_bfloat16* weights16) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = begin + std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < end; i += stride) {
    const float g = clip ? __fmul_rn(grad[i], clip_factor) : grad[i];
    const float m = __fadd_rn(__fmul_rn(k.beta1, adam_m[i]), __fmul_rn(k.one_minus_beta1, g));
    const float v = __fadd_rn(__fmul_rn(k.beta2, adam_v[i]), __fmul_rn(__fmul_rn(k.one_minus_beta2, g), g));
    adam_m[i] = m;
    adam_v[i] = v;
    const float m_hat = __fdiv_rn(m, k.correction1);
    const float v_hat = __fdiv_rn(v, k.correction2);
    const float w = master[i];
    const float step =
        __fadd_rn(__fdiv_rn(m_hat, __fadd_rn(__fsqrt_rn(v_hat), k.epsilon)), __fmul_rn(decay, w));
    const float updated = __fsub_rn(w, __fmul_rn(k.learning_rate, step));
    master[i] = updated;
    const float stored = detail::store_value(compute_storage, updated);
    if (compute != nullptr) compute[i] = stored;
    if (weights16 != nullptr) weights16[i] = fp8::cuda::narrow<__nv_bfloat16>(stored);  // canonical NaN
  }
}

// partials: [gridDim.x] per-block sums of grad[i]^2 in double (grid-stride, then the block's tree).
__global__ void squares_kernel(double* partials, const float* grad, std::size_t count) {
  __shared__ double scratch[detail::warp_size];
  double sum = 0.0;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    sum += double(grad[i]) * double(grad[i]);
  }
  const double block_total = detail::block_sum(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = block_total;
}

// total: [1] = sum of partials[count], one block.
__global__ void sum_partials_kernel(double* total, const double* partials, int count) {
  __shared__ double scratch[detail::warp_size];
  double sum = 0.0;
  for (int i = int(threadIdx.x); i < count; i += int(blockDim.x)) sum += partials[i];
  const double block_total = detail::block_sum(sum, scratch);
  if (threadIdx.x == 0) *total = block_total;
}

// grad: [count] *= factor.
__global__ void scale_kernel(float* grad, std::size_t count, float factor) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    grad[i] *= factor;
}

}  // namespace

device_parameters::device_parameters(const parameter_set& layout)
    : master(layout.size()),
      compute(layout.size()),
      grad(layout.size()),
      adam_m(layout.size()),
      adam_v(layout.size()),
      norm_partials(norm_blocks + 1),
      specs_(layout.specs()) {
  for (std::size_t i = 0; i < layout.tensor_count(); ++i) offsets_.push_back(layout.offset(i));
  upload(layout);
}

void device_parameters::check_layout(const parameter_set& host, const char* function) const {
  bool same = host.size() == size() && host.tensor_count() == specs_.size();
  for (std::size_t i = 0; same && i < specs_.size(); ++i) {
    same = host.specs()[i].name == specs_[i].name && host.specs()[i].shape == specs_[i].shape &&
           host.offset(i) == offsets_[i];
  }
  detail::require(same, function, "the parameter_set has another layout than the device parameters");
}

void device_parameters::upload(const parameter_set& host) {
  check_layout(host, "trainer::cuda::device_parameters::upload");
  master.upload(host.master);
  compute.upload(host.compute);
  grad.upload(host.grad);
  adam_m.upload(host.adam_m);
  adam_v.upload(host.adam_v);
}

void device_parameters::download(parameter_set& host, parameter_buffers which) const {
  check_layout(host, "trainer::cuda::device_parameters::download");
  if (which.master) master.download(host.master);
  if (which.compute) compute.download(host.compute);
  if (which.grad) grad.download(host.grad);
  if (which.moments) {
    adam_m.download(host.adam_m);
    adam_v.download(host.adam_v);
  }
}

void device_parameters::refresh_compute(storage compute_storage, cudaStream_t stream) {
  store_copy(compute_storage, compute.data(), master.data(), size(), stream);
}

double gradient_norm(device_parameters& params, cudaStream_t stream) {
  double* partials = params.norm_partials.data();
  squares_kernel<<<norm_blocks, detail::block_threads, 0, stream>>>(partials, params.grad.data(),
                                                                    params.size());
  detail::check_launch("squares_kernel");
  sum_partials_kernel<<<1, detail::block_threads, 0, stream>>>(partials + norm_blocks, partials, norm_blocks);
  detail::check_launch("sum_partials_kernel");
  double sum = 0.0;
  FP8_CUDA_CHECK(
      cudaMemcpyAsync(&sum, partials + norm_blocks, sizeof(double), cudaMemcpyDeviceToHost, stream));
  FP8_CUDA_CHECK(cudaStreamSynchronize(stream));
  return std::sqrt(sum);
}

void clip_gradients(device_parameters& params, double norm, double max_norm, cudaStream_t stream) {
  const std::optional<float> factor = clip_factor(norm, max_norm);
  if (!factor || params.size() == 0) return;
  scale_kernel<<<detail::grid_for(params.size()), detail::block_threads, 0, stream>>>(params.grad.data(),
                                                                                      params.size(), *factor);
  detail::check_launch("scale_kernel");
}

void adamw_update(device_parameters& params, const adamw_options& options, float learning_rate, long step,
                  cudaStream_t stream, const adamw_fusion& fused) {
  // The bias corrections exactly as the CPU layer computes them (in double, then rounded to float).
  const double t = double(step + 1);
  const adamw_constants k{options.beta1,
                          1.0f - options.beta1,
                          options.beta2,
                          1.0f - options.beta2,
                          float(1.0 - std::pow(double(options.beta1), t)),
                          float(1.0 - std::pow(double(options.beta2), t)),
                          options.epsilon,
                          learning_rate};
  float* compute = fused.refresh_compute ? params.compute.data() : nullptr;
  auto* weights16 = reinterpret_cast<__nv_bfloat16*>(fused.weights16);
  // One launch per run of consecutive tensors with the same decay.
  const std::vector<tensor_spec>& specs = params.specs();
  std::size_t first = 0;
  while (first < specs.size()) {
    std::size_t last = first + 1;
    while (last < specs.size() && specs[last].weight_decay == specs[first].weight_decay) ++last;
    const std::size_t begin = params.offset(first);
    const std::size_t end = last < specs.size() ? params.offset(last) : params.size();
    const float decay = specs[first].weight_decay ? options.weight_decay : 0.0f;
    if (end > begin) {
      adamw_kernel<<<detail::grid_for(end - begin), detail::block_threads, 0, stream>>>(
          params.master.data(), params.adam_m.data(), params.adam_v.data(), params.grad.data(), begin, end, k,
          decay, fused.clip_factor.has_value(), fused.clip_factor.value_or(1.0f), compute,
          fused.compute_storage, weights16);
      detail::check_launch("adamw_kernel");
    }
    first = last;
  }
}

}  // namespace trainer::cuda

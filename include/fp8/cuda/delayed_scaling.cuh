// Delayed scaling with its state on the device (Transformer Engine's layout): casts record amaxes,
// one kernel per step rolls the histories and makes the next scales as delayed_scaling_state does.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/delayed_scaling.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../scaling/amax_history.hpp"
#include "../scaling/delayed_scaling_state.hpp"
#include "../scaling/recipe.hpp"
#include "amax.cuh"
#include "device_amax_reducer.hpp"
#include "error.hpp"
#include "launch.cuh"
#include "scale.cuh"

namespace fp8::cuda {
namespace detail {

inline constexpr int history_threads = 128;
// The inverse scales lie 4 floats (16 bytes) apart: cuBLASLt refuses a tensorwise inverse scale that
// is not 16-byte aligned (cublaslt::tensorwise_scale_alignment), so that each scale_inv(i) can go
// to a product as it is.
inline constexpr std::size_t scale_inv_stride = 4;

// One block per tensor (grid-stride). The history is [length][tensors], row 0 the current step:
//  1. the window amax: NaN-dominant maximum of the column (max) or its row 0 (most_recent);
//  2. roll: row k takes row k - 1, from the oldest row down, and row 0 becomes 0;
//  3. scale = scale_from_amax(amax, format's rule, previous scale), scale_inv = 1 / scale (at
//     scale_inv[t * scale_inv_stride]).
// The shift runs in passes of `Threads` rows from the bottom: a pass reads rows [top - Threads, top)
// and, after a barrier, writes rows (top - Threads, top], so no row is overwritten before it is read.
template <int Threads>
__global__ void __launch_bounds__(Threads)
    update_history_kernel(float* history, std::size_t tensors, std::size_t length, const fp8_format* formats,
                          float e4m3_max, float e5m2_max, amax_algorithm algorithm, int margin,
                          bool power_of_two, float* scale, float* scale_inv) {
  for (std::size_t t = blockIdx.x; t < tensors; t += gridDim.x) {
    float* column = history + t;
    const bool window_max = algorithm == amax_algorithm::max;
    // The oldest row leaves the window below but still counts for this step's amax.
    std::uint32_t bits = threadIdx.x == 0 && window_max ? amax_bits(column[(length - 1) * tensors]) : 0u;
    if (!window_max && threadIdx.x == 0) bits = amax_bits(column[0]);
    for (std::size_t top = length - 1; top >= 1; top = top > std::size_t(Threads) ? top - Threads : 0) {
      const std::size_t k = top >= threadIdx.x ? top - threadIdx.x : 0;  // the row this thread writes
      const bool active = k >= 1 && top >= threadIdx.x;
      float value = 0.0f;
      if (active) {
        value = column[(k - 1) * tensors];
        if (window_max) bits = max(bits, amax_bits(value));
      }
      __syncthreads();
      if (active) column[k * tensors] = value;
      __syncthreads();
    }
    bits = block_max<Threads>(bits);
    if (threadIdx.x == 0) {
      column[0] = 0.0f;
      const fp8_format format = formats[t];
      const scale_rule rule{format == fp8_format::e5m2 ? e5m2_max : e4m3_max, margin, power_of_two};
      const float next = scale_from_amax(__uint_as_float(bits), rule, scale[t]);
      scale[t] = next;
      scale_inv[t * scale_inv_stride] = 1.0f / next;
    }
    __syncthreads();
  }
}

// A cudaMalloc'd array that frees itself (destructors never throw).
template <class T>
class device_array {
 public:
  device_array() = default;
  explicit device_array(std::size_t count) : count_(count) {
    if (count > 0) FP8_CUDA_CHECK(cudaMalloc(&data_, count * sizeof(T)));
  }
  device_array(device_array&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  device_array& operator=(device_array&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  ~device_array() { reset(); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }

 private:
  void reset() noexcept {
    if (data_ != nullptr) (void)cudaFree(data_);
    data_ = nullptr;
  }
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace detail

// The delayed-scaling state of a set of tensors in device memory, Transformer Engine's layout but
// for the spacing of the inverse scales:
//   amax_history  [history_length][tensor_count] floats, row 0 = the current step;
//   scale  [tensor_count] floats (start at 1);
//   scale_inv  [tensor_count] floats 16 bytes apart (start at 1), so that each is aligned as
//   cuBLASLt needs.
// Per step:
//   fp8::cuda::quantize(x, n, state.format(i), {state.scale(i), nullptr, state.amax(i)}, x_fp8, stream);
//   ... GEMMs read state.scale_inv(i) ...
//   state.update(stream);   // roll, new scales: step N + 1 uses amaxes up to step N
// Multi-GPU: state.update(reducer, stream) first reduces the tensor_count floats at current_amaxes()
// across ranks (one call, e.g. fp8::distributed::nccl_amax_reducer: ncclAllReduce with ncclMax over
// their bits as uint32, which keeps NaN on top), then updates, both in order on `stream`.
// download(stream) / upload(host, stream) convert to and from the host fp8::delayed_scaling_state
// (checkpoints). They are ordered on `stream` like every other call: pass the stream that ran the
// casts and update(), so that a checkpoint sees the state after them (a plain cudaMemcpy would not
// wait for work on a non-blocking stream).
class delayed_scaling_device_state {
 public:
  delayed_scaling_device_state(const delayed_scaling& config, std::vector<fp8_format> formats)
      : config_(checked(config)), formats_(std::move(formats)) {
    for (const fp8_format format : formats_) {
      detail::require(is_valid(format), "fp8::cuda::delayed_scaling_device_state",
                      "unknown fp8_format value");
    }
    allocate();
    const std::vector<float> ones(formats_.size(), 1.0f);
    const std::vector<float> spaced_ones = spaced(ones);
    FP8_CUDA_CHECK(cudaMemset(history_.data(), 0, history_.size() * sizeof(float)));
    copy_in(scale_, ones, nullptr);
    copy_in(scale_inv_, spaced_ones, nullptr);
    FP8_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

  // The device copy of a host state (same configuration, formats, histories and scales).
  explicit delayed_scaling_device_state(const delayed_scaling_state& host) : config_(host.config()) {
    for (const auto& tensor : host.tensors()) formats_.push_back(tensor.format);
    allocate();
    upload(host);
  }

  std::size_t tensor_count() const noexcept { return formats_.size(); }
  std::size_t history_length() const noexcept { return config_.history_length; }
  const delayed_scaling& config() const noexcept { return config_; }
  fp8_format format(std::size_t i) const { return formats_.at(checked_index(i)); }

  // Where the casts of tensor i record this step's amax (row 0 of its history column).
  float* amax(std::size_t i) const { return history_.data() + checked_index(i); }
  // The row of current amaxes of all tensors, contiguous (for an all-reduce across ranks).
  float* current_amaxes() const noexcept { return history_.data(); }
  float* amax_history() const noexcept { return history_.data(); }
  const float* scale(std::size_t i) const { return scale_.data() + checked_index(i); }
  // 16-byte aligned (see detail::scale_inv_stride).
  const float* scale_inv(std::size_t i) const {
    return scale_inv_.data() + checked_index(i) * detail::scale_inv_stride;
  }

  // Ends the step on `stream`: window amaxes, roll, new scales (see update_history_kernel).
  void update(cudaStream_t stream = nullptr) {
    if (formats_.empty()) return;
    const unsigned grid = detail::grid_for(formats_.size(), 1);
    detail::update_history_kernel<detail::history_threads><<<grid, detail::history_threads, 0, stream>>>(
        history_.data(), formats_.size(), config_.history_length, formats_device_.data(),
        max_finite(fp8_format::e4m3), max_finite(fp8_format::e5m2), config_.algorithm, config_.margin,
        config_.power_of_two_scales, scale_.data(), scale_inv_.data());
    detail::check_launch("fp8::cuda::detail::update_history_kernel", config_.history_length, formats_.size(),
                         grid, detail::history_threads);
  }

  // The same after reducing this step's amaxes across ranks with one reducer call on `stream`.
  void update(device_amax_reducer& reducer, cudaStream_t stream = nullptr) {
    if (formats_.empty()) return;
    reducer.reduce_max(current_amaxes(), formats_.size(), stream);
    update(stream);
  }

  // The state as a host object, after the work already queued on `stream` (which it waits for).
  delayed_scaling_state download(cudaStream_t stream = nullptr) const {
    const std::size_t tensors = formats_.size();
    const std::size_t length = config_.history_length;
    std::vector<float> rows(history_.size()), scales(tensors), spaced_inverses(scale_inv_.size());
    copy_out(rows, history_, stream);
    copy_out(scales, scale_, stream);
    copy_out(spaced_inverses, scale_inv_, stream);
    FP8_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<float> inverses = unspaced(spaced_inverses);
    std::vector<delayed_scaling_state::tensor> parts;
    for (std::size_t t = 0; t < tensors; ++t) {
      std::vector<float> newest_first(length);
      for (std::size_t k = 0; k < length; ++k) newest_first[k] = rows[k * tensors + t];
      parts.push_back(
          {formats_[t], amax_history::from_values(newest_first), scale_pair{scales[t], inverses[t]}});
    }
    return delayed_scaling_state::from_parts(config_, std::move(parts));
  }

  // Replaces the device state with a host one of the same shape, ordered after the work queued on
  // `stream` and complete when it returns (it waits for the stream). Throws fp8::invalid_argument,
  // changing nothing, if the configuration or the formats differ.
  void upload(const delayed_scaling_state& host, cudaStream_t stream = nullptr) {
    const char* function = "fp8::cuda::delayed_scaling_device_state::upload";
    detail::require(host.config() == config_, function, "the host state has a different configuration");
    detail::require(host.size() == formats_.size(), function,
                    "the host state has " + std::to_string(host.size()) + " tensors, the device state " +
                        std::to_string(formats_.size()));
    for (std::size_t t = 0; t < formats_.size(); ++t) {
      detail::require(host[t].format == formats_[t], function,
                      "tensor " + std::to_string(t) + " has another format");
    }
    const std::size_t tensors = formats_.size();
    const std::size_t length = config_.history_length;
    std::vector<float> rows(tensors * length), scales(tensors), inverses(tensors);
    for (std::size_t t = 0; t < tensors; ++t) {
      for (std::size_t k = 0; k < length; ++k) rows[k * tensors + t] = host[t].history.at(k);
      scales[t] = host[t].scales.scale;
      inverses[t] = host[t].scales.scale_inv;
    }
    const std::vector<float> spaced_inverses = spaced(inverses);
    copy_in(history_, rows, stream);
    copy_in(scale_, scales, stream);
    copy_in(scale_inv_, spaced_inverses, stream);
    FP8_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vectors must outlive the copies
  }

 private:
  static const delayed_scaling& checked(const delayed_scaling& config) {
    config.validate();
    return config;
  }
  std::size_t checked_index(std::size_t i) const {
    detail::require(i < formats_.size(), "fp8::cuda::delayed_scaling_device_state",
                    "tensor index " + std::to_string(i) + " out of range (" +
                        std::to_string(formats_.size()) + " tensors)");
    return i;
  }
  void allocate() {
    history_ = detail::device_array<float>(formats_.size() * config_.history_length);
    scale_ = detail::device_array<float>(formats_.size());
    scale_inv_ = detail::device_array<float>(formats_.size() * detail::scale_inv_stride);
    formats_device_ = detail::device_array<fp8_format>(formats_.size());
    if (!formats_.empty()) {
      FP8_CUDA_CHECK(cudaMemcpy(formats_device_.data(), formats_.data(), formats_.size() * sizeof(fp8_format),
                                cudaMemcpyHostToDevice));
    }
  }
  // One value per tensor, laid out as scale_inv_ holds them (the gaps 0), and back.
  static std::vector<float> spaced(const std::vector<float>& values) {
    std::vector<float> out(values.size() * detail::scale_inv_stride, 0.0f);
    for (std::size_t t = 0; t < values.size(); ++t) out[t * detail::scale_inv_stride] = values[t];
    return out;
  }
  static std::vector<float> unspaced(const std::vector<float>& spaced_values) {
    std::vector<float> out(spaced_values.size() / detail::scale_inv_stride);
    for (std::size_t t = 0; t < out.size(); ++t) out[t] = spaced_values[t * detail::scale_inv_stride];
    return out;
  }
  // Copies queued on `stream`; the caller synchronises it before the host vectors go away.
  template <class T>
  static void copy_in(const detail::device_array<T>& to, const std::vector<T>& from, cudaStream_t stream) {
    if (!from.empty()) {
      FP8_CUDA_CHECK(
          cudaMemcpyAsync(to.data(), from.data(), from.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    }
  }
  template <class T>
  static void copy_out(std::vector<T>& to, const detail::device_array<T>& from, cudaStream_t stream) {
    if (!to.empty()) {
      FP8_CUDA_CHECK(
          cudaMemcpyAsync(to.data(), from.data(), to.size() * sizeof(T), cudaMemcpyDeviceToHost, stream));
    }
  }

  delayed_scaling config_;
  std::vector<fp8_format> formats_;
  detail::device_array<float> history_;
  detail::device_array<float> scale_;
  detail::device_array<float> scale_inv_;
  detail::device_array<fp8_format> formats_device_;
};

}  // namespace fp8::cuda

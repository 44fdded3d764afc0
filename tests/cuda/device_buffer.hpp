// A device allocation for the GPU tests: zero-filled (at least one element, so that an empty buffer
// has an address), uploaded from and downloaded to host vectors; errors throw fp8::cuda_error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include <fp8/cuda/error.hpp>

namespace fp8_test {

template <class T>
class device_buffer {
 public:
  explicit device_buffer(std::size_t count) : count_(count) {
    FP8_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), (count == 0 ? 1 : count) * sizeof(T)));
    FP8_CUDA_CHECK(cudaMemset(data_, 0, (count == 0 ? 1 : count) * sizeof(T)));
  }
  explicit device_buffer(const std::vector<T>& host) : device_buffer(host.size()) {
    if (!host.empty())
      FP8_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { cudaFree(data_); }
  T* data() const { return data_; }
  std::vector<T> download() const {
    FP8_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> host(count_);
    FP8_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  std::size_t count_;
};

}  // namespace fp8_test

// A device allocation for the GPU tests: at least one element (so that an empty buffer has an
// address), every byte set before use (zero unless the placement says otherwise), uploaded from and
// downloaded to host vectors; errors throw fp8::cuda_error.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include <fp8/cuda/error.hpp>

namespace fp8_test {

// Where a buffer's elements start and what its bytes hold before a kernel writes them.
struct device_placement {
  // Elements past the start of the allocation (cudaMalloc aligns that to 256 bytes): an unaligned
  // address when offset * sizeof(T) is not a multiple of the alignment a kernel's fast path needs.
  std::size_t offset = 0;
  // Every byte of the allocation; a pattern such as 0xCD (not zeros) shows outputs left unwritten.
  unsigned char fill = 0;
};

template <class T>
class device_buffer {
 public:
  explicit device_buffer(std::size_t count, device_placement placement = {})
      : count_(count), offset_(placement.offset) {
    const std::size_t bytes = (std::max<std::size_t>(count, 1) + offset_) * sizeof(T);
    FP8_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&base_), bytes));
    FP8_CUDA_CHECK(cudaMemset(base_, placement.fill, bytes));
  }
  explicit device_buffer(const std::vector<T>& host, device_placement placement = {})
      : device_buffer(host.size(), placement) {
    if (!host.empty())
      FP8_CUDA_CHECK(cudaMemcpy(data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { cudaFree(base_); }

  T* data() const { return base_ + offset_; }
  std::size_t size() const { return count_; }
  // Waits for the device, then copies the elements back.
  std::vector<T> download() const {
    FP8_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> host(count_);
    if (count_ > 0)
      FP8_CUDA_CHECK(cudaMemcpy(host.data(), data(), count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* base_ = nullptr;
  std::size_t count_;
  std::size_t offset_;
};

}  // namespace fp8_test

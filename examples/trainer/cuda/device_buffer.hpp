// An owning device allocation (RAII over cudaMalloc / cudaFree) and the copies between it and host
// vectors. A host header: it needs the CUDA toolkit's include path, not nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <fp8/cuda/error.hpp>
#include <fp8/error.hpp>

#include "device_memory.hpp"

namespace trainer::cuda {

// `count` elements of T in device memory, uninitialised. Movable, not copyable.
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  // Throws fp8::cuda_error; when the device has no room, its message says how much was asked, how
  // much this process's buffers already hold and how much the device has free.
  explicit device_buffer(std::size_t count) : count_(count) {
    if (count_ == 0) return;
    const cudaError_t status = cudaMalloc(reinterpret_cast<void**>(&data_), bytes());
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it so that later checks do not see it
      std::size_t free = 0, total = 0;
      if (cudaMemGetInfo(&free, &total) != cudaSuccess) free = total = 0;
      throw fp8::cuda_error(status, "cudaMalloc(" + std::to_string(bytes()) + " bytes)", {},
                            out_of_memory_reason(bytes(), buffer_bytes_held().load(), free, total));
    }
    FP8_CUDA_CHECK(status);
    buffer_bytes_held() += bytes();
  }
  // A device copy of `host`.
  explicit device_buffer(const std::vector<T>& host) : device_buffer(host.size()) { upload(host); }
  ~device_buffer() { release(); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  device_buffer& operator=(device_buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }

  // Synchronous copies of the whole buffer (the sizes must match). cudaMemcpy waits for work on the
  // legacy default stream and on blocking streams, not on streams made with cudaStreamNonBlocking:
  // synchronize such a stream before reading what it wrote.
  void upload(const std::vector<T>& host) {
    require_size(host.size(), "upload");
    if (count_ > 0)
      FP8_CUDA_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  void download(std::vector<T>& host) const {
    host.resize(count_);
    if (count_ > 0)
      FP8_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
  }
  std::vector<T> to_host() const {
    std::vector<T> host;
    download(host);
    return host;
  }

 private:
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }
  void release() noexcept {
    if (data_ == nullptr) return;
    cudaFree(data_);  // errors are ignored: a destructor must not throw
    buffer_bytes_held() -= bytes();
    data_ = nullptr;
  }
  void require_size(std::size_t host_count, const char* what) const {
    if (host_count != count_) {
      throw fp8::invalid_argument("device_buffer::" + std::string(what) + ": the host vector holds " +
                                  std::to_string(host_count) + " elements, the device buffer " +
                                  std::to_string(count_));
    }
  }

  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace trainer::cuda

// device_vector<T>: an owning cudaMalloc allocation of `count` elements, zeroed on the stream that
// will use it and freed when it goes out of scope: the example's only memory management.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include <fp8/cuda/error.hpp>

namespace linear_step {

template <class T>
class device_vector {
 public:
  // The zeros are written on `stream`, not by a plain cudaMemset: that one runs on the legacy
  // default stream, which a cudaStreamNonBlocking stream does not wait for, so a kernel on `stream`
  // could otherwise read (or be overwritten by) the zeros out of order.
  device_vector(std::size_t count, cudaStream_t stream) : count_(count) {
    void* p = nullptr;
    FP8_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
    data_.reset(static_cast<T*>(p));
    FP8_CUDA_CHECK(cudaMemsetAsync(p, 0, count * sizeof(T), stream));
  }
  T* data() const noexcept { return data_.get(); }
  std::size_t size() const noexcept { return count_; }

 private:
  struct free_on_device {
    void operator()(T* p) const noexcept { cudaFree(p); }  // errors ignored: called from destructors
  };
  std::size_t count_;
  std::unique_ptr<T, free_on_device> data_;
};

}  // namespace linear_step

// device_vector<T>: an owning cudaMalloc allocation of `count` elements, freed when it goes out of
// scope: the example's only memory management.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include <fp8/cuda/error.hpp>

namespace linear_step {

template <class T>
class device_vector {
 public:
  explicit device_vector(std::size_t count) : count_(count) {
    void* p = nullptr;
    FP8_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
    data_.reset(static_cast<T*>(p));
    FP8_CUDA_CHECK(cudaMemset(p, 0, count * sizeof(T)));
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

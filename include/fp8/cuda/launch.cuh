// Host-side helpers of the kernel launchers: grid sizes from the device's SM count, argument checks
// that throw fp8::invalid_argument before anything is launched, and the launch-error check.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/launch.cuh is used by device kernels: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "../error.hpp"
#include "../scaling/fp8_format.hpp"
#include "error.hpp"

namespace fp8::cuda::detail {

// Threads per block of the element-wise kernels, and how many blocks per SM a grid-stride loop
// needs to keep every SM busy with enough loads in flight.
inline constexpr int block_threads = 256;
inline constexpr int blocks_per_sm = 8;

inline int multiprocessor_count() {
  int device = 0;
  FP8_CUDA_CHECK(cudaGetDevice(&device));
  int count = 0;
  FP8_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

// Blocks for a grid-stride loop over `work_items` items of `block_threads` each: enough to cover the
// work, at most blocks_per_sm per SM.
inline unsigned grid_for(std::size_t work_items, int threads = block_threads) {
  const std::size_t needed = (work_items + std::size_t(threads) - 1) / std::size_t(threads);
  const std::size_t cap = std::size_t(multiprocessor_count()) * blocks_per_sm;
  const std::size_t blocks = needed < cap ? needed : cap;
  return unsigned(blocks == 0 ? 1 : blocks);
}

inline void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw cuda_error(status, std::string("launching ") + kernel, {}, fp8::detail::cuda_hint(status));
  }
}

inline void require(bool condition, const char* function, const std::string& what) {
  if (!condition) throw invalid_argument(std::string(function) + ": " + what);
}

inline void require_pointer(const void* pointer, std::size_t count, const char* function, const char* name) {
  require(pointer != nullptr || count == 0, function,
          std::string(name) + " is null but " + std::to_string(count) + " elements were requested");
}

inline void require_format(fp8_format format, const char* function) {
  require(is_valid(format), function, "unknown fp8_format value");
}

__host__ __device__ inline bool is_aligned(const void* pointer, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

// Calls f(descriptor) with e4m3_format or e5m2_format (the kernels are templates on the format).
template <class Function>
void dispatch_format(fp8_format format, Function&& f) {
  if (format == fp8_format::e5m2) {
    f(e5m2_format{});
  } else {
    f(e4m3_format{});
  }
}

}  // namespace fp8::cuda::detail

// Included once by every `gpu` test: before any test case runs, a machine without a usable CUDA
// device prints "no CUDA device: skipped" and exits with FP8_GPU_SKIP_CODE, which ctest reports as
// skipped. A device that is present but broken is not skipped: its tests fail.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#ifndef FP8_GPU_SKIP_CODE
#error "FP8_GPU_SKIP_CODE must be defined by the build (tests/cuda/CMakeLists.txt)"
#endif

namespace gpu_test {

inline bool skip_without_device() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver || (status == cudaSuccess && count == 0)) {
    std::printf("no CUDA device: skipped (%s)\n", status == cudaSuccess ? "0 devices" : cudaGetErrorName(status));
    std::fflush(stdout);
    std::exit(FP8_GPU_SKIP_CODE);
  }
  return true;
}

// Runs during static initialisation, i.e. before doctest's main() starts the test cases.
inline const bool device_present = skip_without_device();

}  // namespace gpu_test

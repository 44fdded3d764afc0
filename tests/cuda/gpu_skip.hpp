// Included once by every `gpu` test: before any test case runs, a machine without a CUDA device
// (no GPU, or no NVIDIA driver at all) prints "no CUDA device: skipped" and exits with
// FP8_GPU_SKIP_CODE, which ctest reports as skipped. A device that is present but unusable is not
// skipped: a driver older than the toolkit, or any other failure to count devices, prints why and
// exits 1, so the test fails.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include <fp8/cuda/error.hpp>

#ifndef FP8_GPU_SKIP_CODE
#error "FP8_GPU_SKIP_CODE must be defined by the build (tests/cuda/CMakeLists.txt)"
#endif

namespace gpu_test {

inline bool skip_without_device() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  switch (fp8::detail::classify_device(status, count, driver)) {
    case fp8::detail::device_presence::present: return true;
    case fp8::detail::device_presence::absent:
      std::printf("no CUDA device: skipped (%s)\n",
                  status == cudaSuccess ? "0 devices" : cudaGetErrorName(status));
      std::fflush(stdout);
      std::exit(FP8_GPU_SKIP_CODE);
    case fp8::detail::device_presence::driver_too_old:
      std::printf("FAILED: %s\n", fp8::detail::driver_too_old_message(driver, CUDART_VERSION).c_str());
      break;
    case fp8::detail::device_presence::error:
      std::printf("FAILED: cudaGetDeviceCount returned %s (%s)\n", cudaGetErrorName(status),
                  cudaGetErrorString(status));
      break;
  }
  std::fflush(stdout);
  std::exit(1);
}

// Runs during static initialisation, i.e. before doctest's main() starts the test cases.
inline const bool device_present = skip_without_device();

}  // namespace gpu_test

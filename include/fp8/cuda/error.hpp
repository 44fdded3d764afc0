// fp8::cuda_error and the check that turns a failed CUDA runtime call into it, naming the call, the
// status and where it happened. A host header: it needs the CUDA toolkit's include path, not nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <sstream>
#include <string>

#include "../error.hpp"

namespace fp8 {

// A CUDA runtime call failed. what() reads, for example:
//   "fp8: cudaMalloc(&workspace, 33554432) failed: cudaErrorMemoryAllocation (out of memory)
//    at fp8/cublaslt/handle.hpp:120"
// followed by a hint where one is known.
class cuda_error : public error {
 public:
  cuda_error(cudaError_t status, const std::string& call, const std::string& where,
             const std::string& hint = {})
      : error(format(status, call, where, hint)), status_(status), call_(call) {}

  cudaError_t status() const noexcept { return status_; }
  const std::string& call() const noexcept { return call_; }

  // The message, as a pure function of its parts (so it can be tested without a GPU).
  static std::string format(cudaError_t status, const std::string& call, const std::string& where,
                            const std::string& hint) {
    std::ostringstream message;
    message << "fp8: " << call << " failed: " << cudaGetErrorName(status) << " ("
            << cudaGetErrorString(status) << ")";
    if (!where.empty()) message << " at " << where;
    if (!hint.empty()) message << "; " << hint;
    return message.str();
  }

 private:
  cudaError_t status_;
  std::string call_;
};

namespace detail {

// What to try when a call fails with this status; empty when there is nothing useful to say.
inline std::string cuda_hint(cudaError_t status) {
  switch (status) {
    case cudaErrorNoDevice:
      return "no CUDA device: this machine has no usable NVIDIA GPU "
             "(check nvidia-smi and CUDA_VISIBLE_DEVICES)";
    case cudaErrorInsufficientDriver:
      return "the NVIDIA driver is missing or older than the CUDA toolkit this program was built with "
             "(compare nvidia-smi's \"CUDA Version\" with nvcc --version)";
    case cudaErrorNoKernelImageForDevice:
      return "the binary holds no code for this GPU: rebuild with CMAKE_CUDA_ARCHITECTURES set to "
             "the device's compute capability (89 for Ada, 90a for Hopper)";
    case cudaErrorMemoryAllocation: return "the GPU is out of memory";
    // Faults of device code are sticky and reported by whichever CUDA call comes next, so the call
    // named above may not be the one that caused them.
    case cudaErrorIllegalAddress:
    case cudaErrorMisalignedAddress:
    case cudaErrorLaunchFailure:
      return "a kernel faulted; this call may only be the first to report it (device errors surface at the "
             "next CUDA call): run under compute-sanitizer, or with CUDA_LAUNCH_BLOCKING=1, to find the "
             "kernel";
    default: return {};
  }
}

// Whether a CUDA device can be used, from what cudaGetDeviceCount and cudaDriverGetVersion said.
// A machine with no NVIDIA driver at all (driver version 0) has no device; a driver that is
// installed but older than the runtime (cudaErrorInsufficientDriver with a version > 0) is a broken
// installation on a machine that has a GPU: callers must fail, never report "no device".
enum class device_presence { present, absent, driver_too_old, error };

inline device_presence classify_device(cudaError_t count_status, int device_count,
                                       int driver_version) noexcept {
  if (count_status == cudaSuccess)
    return device_count > 0 ? device_presence::present : device_presence::absent;
  if (count_status == cudaErrorNoDevice) return device_presence::absent;
  if (count_status == cudaErrorInsufficientDriver) {
    return driver_version == 0 ? device_presence::absent : device_presence::driver_too_old;
  }
  return device_presence::error;
}

// "13.0" for a CUDA version number such as 13000.
inline std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// The message of a driver older than the runtime: both versions and what to do.
inline std::string driver_too_old_message(int driver_version, int runtime_version) {
  return "the NVIDIA driver supports CUDA " + cuda_version_text(driver_version) +
         " but this program was built with CUDA " + cuda_version_text(runtime_version) +
         ": install a newer driver (or build with an older toolkit); a GPU is present, so this is a "
         "failure, not a missing device";
}

inline std::string source_location(const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line);
}

// Throws cuda_error when `status` is not cudaSuccess. Clears the runtime's sticky "last error" for
// non-sticky failures so that a later, unrelated check does not report this one again.
inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();
  throw cuda_error(status, call, source_location(file, line), cuda_hint(status));
}

}  // namespace detail
}  // namespace fp8

// FP8_CUDA_CHECK(cudaMemsetAsync(p, 0, n, stream)); throws fp8::cuda_error naming the call.
#define FP8_CUDA_CHECK(call) ::fp8::detail::check_cuda((call), #call, __FILE__, __LINE__)

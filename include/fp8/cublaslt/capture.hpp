// CUDA graph capture, as the handle meets it: whether a stream is being captured, and a guard under
// which calls that may synchronise the device (allocations, event waits) leave a capture valid.
#pragma once

#include <cuda_runtime_api.h>

#include <new>

#include "../cuda/error.hpp"

namespace fp8::cublaslt::detail {

// This thread's stream-capture mode set to relaxed for the guard's life, then restored. While a
// stream is being captured in global or thread-local mode, calls that may synchronise the device
// (cudaMalloc of a stream's first workspace, the event waits of tuning on another stream) would
// otherwise be refused and invalidate that capture; relaxed, they run and capture nothing.
// The std::nothrow form is for code that must not throw (a destructor's cudaFree): where the mode
// cannot be changed, it leaves it as it is.
class relaxed_capture_mode {
 public:
  relaxed_capture_mode() { FP8_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&previous_)); }
  explicit relaxed_capture_mode(std::nothrow_t) noexcept
      : changed_(cudaThreadExchangeStreamCaptureMode(&previous_) == cudaSuccess) {}
  relaxed_capture_mode(const relaxed_capture_mode&) = delete;
  relaxed_capture_mode& operator=(const relaxed_capture_mode&) = delete;
  ~relaxed_capture_mode() {
    if (changed_) (void)cudaThreadExchangeStreamCaptureMode(&previous_);
  }

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
  bool changed_ = true;
};

// Whether work enqueued on `stream` would be captured into a graph instead of run. The legacy
// default stream answers cudaErrorStreamCaptureImplicit while any blocking stream is being captured
// (it cannot be used then): that counts as capturing, and that error, which is not sticky, is
// cleared.
inline bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t result = cudaStreamIsCapturing(stream, &status);
  if (result == cudaErrorStreamCaptureImplicit) {
    if (cudaPeekAtLastError() == cudaErrorStreamCaptureImplicit) (void)cudaGetLastError();
    return true;
  }
  FP8_CUDA_CHECK(result);
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace fp8::cublaslt::detail

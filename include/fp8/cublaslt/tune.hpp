// Tuning one plan on the device: every candidate algorithm of the plan is run and timed with CUDA
// events on the caller's stream (tuning.hpp says how), and the plan keeps its candidates fastest
// first. The handle calls this from handle::tune() and, with tuning enabled, on a plan's first call.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../cuda/error.hpp"
#include "error.hpp"
#include "plan.hpp"
#include "problem.hpp"
#include "tuning.hpp"
#include "validate.hpp"
#include "workspace.hpp"

namespace fp8::cublaslt {

// What tuning one product found: every candidate's status and timings, and the order kept.
using tuning_report = tuning_result<cublasStatus_t>;

namespace detail {

// A start and a stop event, destroyed with the pair.
class event_pair {
 public:
  event_pair() {
    FP8_CUDA_CHECK(cudaEventCreate(&start));
    const cudaError_t status = cudaEventCreate(&stop);
    if (status != cudaSuccess) {
      (void)cudaEventDestroy(start);
      FP8_CUDA_CHECK(status);
    }
  }
  event_pair(const event_pair&) = delete;
  event_pair& operator=(const event_pair&) = delete;
  ~event_pair() {
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
  }
  cudaEvent_t start{}, stop{};
};

// Device memory that lives as long as the tuning that needs it.
class scratch_output {
 public:
  explicit scratch_output(std::size_t bytes) { FP8_CUDA_CHECK(cudaMalloc(&data, bytes == 0 ? 1 : bytes)); }
  scratch_output(const scratch_output&) = delete;
  scratch_output& operator=(const scratch_output&) = delete;
  ~scratch_output() { (void)cudaFree(data); }
  void* data = nullptr;
};

// The bytes D's storage spans (column-major m x n with leading dimension ld; in a strided batch
// the last matrix starts (count - 1) · stride elements in).
inline std::size_t output_storage_bytes(const gemm_problem& p) noexcept {
  const std::size_t one = std::size_t(p.d.ld) * std::size_t(p.n);
  const std::size_t before_last =
      p.batch.count > 1 ? std::size_t(p.batch.count - 1) * std::size_t(p.batch.stride_d) : 0;
  return (before_last + one) * element_bytes(p.d.type);
}

// Running `p` again changes its result when it adds into D in place (C is D, beta != 0): tuning
// then writes into scratch. Every other product reads nothing it writes, so a repeat writes the
// same D, the same aux matrix or bias gradient, and the same amax (cuBLASLt overwrites it).
inline bool accumulates_in_place(const gemm_problem& p) noexcept {
  return reads_c(p) && p.c.data == p.d.data;
}

// Whether work enqueued on `stream` would be captured into a graph instead of run. The legacy
// default stream answers cudaErrorStreamCaptureImplicit while another stream captures in global
// mode (it cannot be used then): that counts as capturing, and the error, which is not sticky, is
// cleared.
inline bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t result = cudaStreamIsCapturing(stream, &status);
  if (result == cudaErrorStreamCaptureImplicit) {
    (void)cudaGetLastError();
    return true;
  }
  FP8_CUDA_CHECK(result);
  return status != cudaStreamCaptureStatusNone;
}

// Times every candidate of `plan` (built for `p`, with p's pointers set on its descriptor) on
// `stream`, then orders plan.algorithms fastest first and marks the plan tuned. Synchronises the
// stream. When no candidate runs, throws fp8::cublas_error and leaves the plan as it was.
inline tuning_report tune_plan(cublasLtHandle_t handle, plan& plan, const gemm_problem& p,
                               const device_info& device, cudaStream_t stream, workspace scratch,
                               const tuning_options& options) {
  std::optional<scratch_output> redirected;
  void* d = p.d.data;
  if (accumulates_in_place(p)) {
    redirected.emplace(output_storage_bytes(p));
    d = redirected->data;
  }
  event_pair events;
  const auto probe = [&](std::size_t i) { return matmul(handle, plan, i, p, d, stream, scratch); };
  const auto time = [&](std::size_t i) {
    FP8_CUDA_CHECK(cudaEventRecord(events.start, stream));
    bool ran = true;
    for (int call = 0; call < options.calls_per_timing && ran; ++call) {
      ran = matmul(handle, plan, i, p, d, stream, scratch) == CUBLAS_STATUS_SUCCESS;
    }
    FP8_CUDA_CHECK(cudaEventRecord(events.stop, stream));
    FP8_CUDA_CHECK(cudaEventSynchronize(events.stop));
    float ms = 0.0f;
    FP8_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
    return ran ? double(ms) / options.calls_per_timing : std::numeric_limits<double>::quiet_NaN();
  };
  tuning_report report = time_candidates(plan.algorithms.size(), options, CUBLAS_STATUS_SUCCESS, probe, time);
  // A kernel that faulted surfaces here (a sticky error), not as a fast candidate.
  FP8_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (!report.any_worked()) {
    const cublasStatus_t first =
        report.candidates.empty() ? CUBLAS_STATUS_NOT_SUPPORTED : report.candidates.front().status;
    throw cublas_error(first, "cublasLtMatmul", describe(p),
                       "tuning the product (" + std::to_string(report.candidates.size()) +
                           " candidate algorithms tried, all failed): " + likely_cause(first, device),
                       fp8::detail::source_location(__FILE__, __LINE__));
  }
  std::vector<cublasLtMatmulAlgo_t> fastest_first;
  fastest_first.reserve(report.fastest_first.size());
  for (const std::size_t rank : report.fastest_first) fastest_first.push_back(plan.algorithms[rank]);
  plan.algorithms = std::move(fastest_first);
  plan.chosen = 0;
  plan.tuned = true;
  return report;
}

}  // namespace detail

}  // namespace fp8::cublaslt

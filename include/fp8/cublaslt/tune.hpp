// Tuning one plan on the device: every candidate algorithm of the plan is run and timed with CUDA
// events on the caller's stream (tuning.hpp says how, and where the runs write), and the plan keeps
// its candidates fastest first. The handle calls this from handle::tune() and, with tuning enabled,
// on a plan's first call.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "../cuda/error.hpp"
#include "capture.hpp"
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

// Device memory ordered on one stream (cudaMallocAsync / cudaFreeAsync): neither call synchronises
// the device, so tuning on one stream leaves work and graph captures on others alone.
class stream_scratch {
 public:
  stream_scratch(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
    const cudaError_t status = cudaMallocAsync(&data, bytes == 0 ? 1 : bytes, stream);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();  // out of memory is not sticky: clear it
      throw cuda_error(status, "cudaMallocAsync(tuning scratch, " + std::to_string(bytes) + ")",
                       fp8::detail::source_location(__FILE__, __LINE__),
                       "tuning writes every output of the product into scratch of its size");
    }
  }
  stream_scratch(const stream_scratch&) = delete;
  stream_scratch& operator=(const stream_scratch&) = delete;
  ~stream_scratch() { (void)cudaFreeAsync(data, stream_); }
  char* bytes() const noexcept { return static_cast<char*>(data); }
  void* data = nullptr;

 private:
  cudaStream_t stream_;
};

// One configuration attribute of an algorithm as an unsigned number (the attributes are 16- or
// 32-bit; the size is asked first, so a changed width is read whole); "?" where cuBLASLt refuses it.
inline std::string algorithm_attribute(const cublasLtMatmulAlgo_t& algo,
                                       cublasLtMatmulAlgoConfigAttributes_t attribute) {
  std::size_t size = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, nullptr, 0, &size) != CUBLAS_STATUS_SUCCESS ||
      size == 0 || size > sizeof(std::uint64_t)) {
    return "?";
  }
  std::uint64_t value = 0;  // little-endian: the low bytes hold a narrower attribute
  std::size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, size, &written) !=
      CUBLAS_STATUS_SUCCESS) {
    return "?";
  }
  return std::to_string(value);
}

// What distinguishes one candidate from another, for reports and logs: cuBLASLt's algorithm id,
// tile, stages, split-K count, reduction scheme, CTA swizzling and cluster shape (the numbers of
// cublasLt.h's enums), space-separated so that a CSV cell can hold it.
inline std::string describe_algorithm(const cublasLtMatmulAlgo_t& algo) {
  const std::pair<const char*, cublasLtMatmulAlgoConfigAttributes_t> fields[] = {
      {"id", CUBLASLT_ALGO_CONFIG_ID},
      {"tile", CUBLASLT_ALGO_CONFIG_TILE_ID},
      {"stages", CUBLASLT_ALGO_CONFIG_STAGES_ID},
      {"split-k", CUBLASLT_ALGO_CONFIG_SPLITK_NUM},
      {"reduction", CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME},
      {"swizzle", CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING},
      {"cluster", CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID}};
  std::string text;
  for (const auto& [name, attribute] : fields) {
    if (!text.empty()) text += ' ';
    text += std::string(name) + ' ' + algorithm_attribute(algo, attribute);
  }
  return text;
}

// Points the descriptor's written outputs other than D (aux, bias gradient, amax) into `scratch`.
inline void redirect_outputs(cublasLtMatmulDesc_t desc, const gemm_problem& p, const device_info& device,
                             const tuning_scratch& layout, char* scratch) {
  if (layout.aux_written) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(scratch + layout.aux),
                  p, device);
  }
  if (layout.bias_gradient_written) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                  static_cast<const void*>(scratch + layout.bias_gradient), p, device);
  }
  if (layout.amax_written) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, static_cast<void*>(scratch + layout.amax), p,
                  device);
  }
}

// Times every candidate of `plan` (built for `p`, with p's pointers set on its descriptor) on
// `stream`, every output written into scratch (tuning_scratch), then orders plan.algorithms fastest
// first and marks the plan tuned. Synchronises the stream; the descriptor's pointers are p's again
// when it returns or throws. When no candidate runs, throws fp8::cublas_error and leaves the
// algorithms as they were.
inline tuning_report tune_plan(cublasLtHandle_t handle, plan& plan, const gemm_problem& p,
                               const device_info& device, cudaStream_t stream, workspace scratch,
                               const tuning_options& options) {
  const relaxed_capture_mode relaxed;
  const tuning_scratch layout = tuning_scratch_for(p);
  const stream_scratch outputs(layout.bytes, stream);
  void* const d = outputs.bytes() + layout.d;
  event_pair events;
  cublasStatus_t timed_failure = CUBLAS_STATUS_SUCCESS;  // the last status of a run that failed while timed
  const auto probe = [&](std::size_t i) { return matmul(handle, plan, i, p, d, stream, scratch); };
  const auto time = [&](std::size_t i) {
    FP8_CUDA_CHECK(cudaEventRecord(events.start, stream));
    bool ran = true;
    for (int call = 0; call < options.calls_per_timing && ran; ++call) {
      const cublasStatus_t status = matmul(handle, plan, i, p, d, stream, scratch);
      ran = status == CUBLAS_STATUS_SUCCESS;
      if (!ran) timed_failure = status;
    }
    FP8_CUDA_CHECK(cudaEventRecord(events.stop, stream));
    // A kernel that faulted surfaces here or at the synchronisation below, as fp8::cuda_error.
    FP8_CUDA_CHECK(cudaEventSynchronize(events.stop));
    float ms = 0.0f;
    FP8_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
    return ran ? double(ms) / options.calls_per_timing : std::numeric_limits<double>::quiet_NaN();
  };
  tuning_report report;
  try {
    redirect_outputs(plan.desc.get, p, device, layout, outputs.bytes());
    report = time_candidates(plan.algorithms.size(), options, CUBLAS_STATUS_SUCCESS, probe, time);
    FP8_CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (...) {
    try {
      set_pointers(plan.desc.get, p, device);
    } catch (...) {  // the first error is the one to report
    }
    throw;
  }
  set_pointers(plan.desc.get, p, device);
  for (candidate_timing<cublasStatus_t>& c : report.candidates)
    c.algorithm = describe_algorithm(plan.algorithms[c.rank]);
  if (!report.any_worked()) {
    // The first candidate's refusal, or, where it passed its first run and failed while timed,
    // the status of a timed run that failed (its own first status says only that it once ran).
    const cublasStatus_t first = report.candidates.empty() ? CUBLAS_STATUS_NOT_SUPPORTED
                                 : report.candidates.front().failed_while_timed
                                     ? timed_failure
                                     : report.candidates.front().status;
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

// fp8::cublaslt::handle: a cuBLASLt handle, a workspace per stream (32 MiB each by default) and a
// bounded cache of descriptors and candidate algorithms per problem; gemm() and linear() validate,
// then run one product (falling back to the next candidate algorithm if the first fails). Plans
// may be tuned: their candidates timed on the device, the fastest kept (tune.hpp).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "../cuda/error.hpp"
#include "../error.hpp"
#include "capture.hpp"
#include "error.hpp"
#include "fallback.hpp"
#include "plan.hpp"
#include "plan_cache.hpp"
#include "problem.hpp"
#include "tune.hpp"
#include "tuning.hpp"
#include "validate.hpp"
#include "workspace.hpp"

namespace fp8::cublaslt {

// Hopper's split-K and stream-K kernels want scratch space; 0 (cuBLASLt's default preference)
// would exclude them. 32 MiB is what cuBLAS itself reserves on Hopper.
inline constexpr std::size_t default_workspace_bytes = std::size_t(32) << 20;
// How many plans a handle keeps (least recently used out): enough for every GEMM of a model with
// a few dozen sequence lengths, bounded for programs that see a new shape every step.
inline constexpr std::size_t default_plan_capacity = 1024;

// The current device as the checks see it, with the cuBLASLt versions (headers and loaded
// library). device_count is 0 only when the machine has no GPU; a driver older than the toolkit
// is an error (fp8::cuda_error, cudaErrorInsufficientDriver), never taken for "no device".
inline device_info query_device() {
  device_info info{};
  info.cublaslt_header_version = CUBLAS_VERSION;
  info.cublaslt_version = cublasLtGetVersion();
  const cudaError_t count_status = cudaGetDeviceCount(&info.device_count);
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  switch (fp8::detail::classify_device(count_status, info.device_count, driver)) {
    case fp8::detail::device_presence::present: break;
    case fp8::detail::device_presence::absent:
      (void)cudaGetLastError();
      info.device_count = 0;
      return info;
    case fp8::detail::device_presence::driver_too_old:
      (void)cudaGetLastError();
      throw cuda_error(count_status, "cudaGetDeviceCount", {},
                       fp8::detail::driver_too_old_message(driver, CUDART_VERSION));
    case fp8::detail::device_presence::error: break;
  }
  FP8_CUDA_CHECK(count_status);
  if (info.device_count == 0) return info;
  FP8_CUDA_CHECK(cudaGetDevice(&info.ordinal));
  cudaDeviceProp properties{};
  FP8_CUDA_CHECK(cudaGetDeviceProperties(&properties, info.ordinal));
  info.major = properties.major;
  info.minor = properties.minor;
  info.name = properties.name;
  return info;
}

namespace detail {

// Allocates workspaces with cudaMalloc (one per stream, see workspace_pool). A stream's first
// product may come inside a CUDA graph capture (of that stream or another, in global mode): the
// allocation runs in relaxed capture mode, as PyTorch's allocator does, so the capture stays valid
// (the allocation is not captured; the graph reads the buffer, which the handle keeps).
struct cuda_workspace_allocator {
  void* allocate(std::size_t bytes) {
    void* data = nullptr;
    const relaxed_capture_mode relaxed;
    const cudaError_t status = cudaMalloc(&data, bytes);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      throw cuda_error(status, "cudaMalloc(workspace, " + std::to_string(bytes) + ")",
                       fp8::detail::source_location(__FILE__, __LINE__), fp8::detail::cuda_hint(status));
    }
    return data;
  }
  // Relaxed too: a handle destroyed (or a workspace released) while another stream is captured in
  // global mode would otherwise invalidate that capture, and leak the buffer. Should CUDA still
  // refuse the free, its error is cleared (a later call would otherwise report it as its own) and
  // the pool keeps the buffer.
  bool release(void* data) noexcept {
    const relaxed_capture_mode relaxed(std::nothrow);
    if (cudaFree(data) == cudaSuccess) return true;
    (void)cudaGetLastError();
    return false;
  }
};

// The key of a stream's workspace. A created stream is told apart by its handle value. The special
// handles are not one stream each: null and cudaStreamLegacy name the same legacy stream, and
// cudaStreamPerThread (or null in code built with per-thread default streams) names each thread's
// own stream, and those run at once. They take CUDA's stream id (unique for the program's life)
// with the top bit set, which no handle value (a user-space address) has.
inline bool is_special_stream(cudaStream_t stream) noexcept {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}
inline constexpr std::uint64_t stream_id_tag = std::uint64_t(1) << 63;
// Sets `key` and returns cudaSuccess, or returns CUDA's error where it cannot name the stream. A
// thread names the same stream by a special handle on a device every time, so it asks CUDA once
// per handle and device: the key is wanted for every product. `device` must be the current device:
// a special handle names a stream of the current device, and the answer is kept under `device`.
inline cudaError_t find_workspace_key(cudaStream_t stream, int device, std::uint64_t& key) noexcept {
  if (!is_special_stream(stream)) {
    key = std::uint64_t(reinterpret_cast<std::uintptr_t>(stream));
    return cudaSuccess;
  }
  struct answer {
    int device;
    cudaStream_t stream;
    std::uint64_t key;
  };
  thread_local std::vector<answer> answers;  // at most 3 per device
  for (const answer& a : answers) {
    if (a.device == device && a.stream == stream) {
      key = a.key;
      return cudaSuccess;
    }
  }
  unsigned long long id = 0;
  const cudaError_t status = cudaStreamGetId(stream, &id);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: reported through the returned status
    return status;
  }
  key = std::uint64_t(id) | stream_id_tag;
  try {
    answers.push_back({device, stream, key});
  } catch (...) {  // not remembered: asked again next time
  }
  return cudaSuccess;
}
inline std::uint64_t workspace_key(cudaStream_t stream, int device) {
  std::uint64_t key = 0;
  FP8_CUDA_CHECK(find_workspace_key(stream, device, key));
  return key;
}

}  // namespace detail

// A cuBLASLt handle bound to the device that was current when it was made, with a workspace per
// stream and a bounded plan cache. Not thread-safe: use one per thread (or guard it); calls on it
// may target any stream of its device.
//
// Workspaces: each stream a product runs on gets its own buffer of workspace_bytes() (allocated
// on first use, kept until release_workspace(stream) or the handle's end), so that products on
// concurrent streams never share scratch memory. A caller that manages memory itself passes a
// `workspace` to gemm(); it must not be in use by another stream while the product runs, it
// must be at least as large as the handle's workspace_bytes() (plans are chosen for that size),
// and it must start 256-byte aligned (find_workspace_problem).
// Errors throw fp8::cublas_error or fp8::cuda_error; the destructor never throws.
//
//   fp8::cublaslt::handle lt;                        // 32 MiB workspace per stream
//   fp8::cublaslt::linear_problem p{};               // Y[m,n] = X[m,k] · W[n,k]ᵀ, row-major
//   p.m = tokens; p.n = out_features; p.k = in_features;
//   p.x = {x_fp8, fp8::cublaslt::data_type::e4m3, 0, fp8::cublaslt::scale_mode::tensorwise, x_scale_inv};
//   p.w = {w_fp8, fp8::cublaslt::data_type::e4m3, 0, fp8::cublaslt::scale_mode::tensorwise, w_scale_inv};
//   p.y = {y_bf16, fp8::cublaslt::data_type::bf16};
//   lt.linear(p, stream);
class handle {
 public:
  explicit handle(std::size_t workspace_bytes = default_workspace_bytes,
                  std::size_t plan_capacity = default_plan_capacity)
      : device_(query_device()),
        workspace_bytes_(workspace_bytes),
        workspaces_(workspace_bytes, detail::cuda_workspace_allocator{}),
        plans_(plan_capacity) {
    if (device_.device_count == 0) {
      throw cuda_error(cudaErrorNoDevice, "fp8::cublaslt::handle()", {},
                       "no CUDA device: a cuBLASLt handle needs an NVIDIA GPU");
    }
    const cublasStatus_t status = cublasLtCreate(&handle_);
    if (status != CUBLAS_STATUS_SUCCESS) {
      throw cublas_error(status, "cublasLtCreate", {}, detail::likely_cause(status, device_),
                         fp8::detail::source_location(__FILE__, __LINE__));
    }
  }

  handle(const handle&) = delete;
  handle& operator=(const handle&) = delete;
  handle(handle&& other) noexcept
      : device_(std::move(other.device_)),
        handle_(std::exchange(other.handle_, nullptr)),
        workspace_bytes_(other.workspace_bytes_),
        workspaces_(std::move(other.workspaces_)),
        cache_enabled_(other.cache_enabled_),
        tuning_(other.tuning_),
        tunings_(other.tunings_),
        plans_(std::move(other.plans_)) {}
  handle& operator=(handle&&) = delete;
  ~handle() {
    plans_.clear();  // descriptors first, then the handle they belong to
    workspaces_.release_all();
    if (handle_) (void)cublasLtDestroy(handle_);
  }

  // D = alpha · op(A) · op(B) + beta · C (+ epilogue), column-major (see gemm_problem). Validates
  // first; runs on `stream` with that stream's workspace.
  void gemm(const gemm_problem& unresolved, cudaStream_t stream = nullptr) {
    const gemm_problem problem = with_packed_leading_dimensions(unresolved);
    check_current_device();
    validate(problem, device_);  // before the stream's workspace is allocated
    run_validated(problem, stream, workspaces_.for_stream(detail::workspace_key(stream, device_.ordinal)));
  }

  // As above with a workspace of the caller's (see the class comment for the rule).
  void gemm(const gemm_problem& unresolved, cudaStream_t stream, workspace scratch) {
    const gemm_problem problem = with_packed_leading_dimensions(unresolved);
    check_current_device();
    validate(problem, device_);
    const std::string why = find_workspace_problem(scratch, workspace_bytes_);
    if (!why.empty()) throw invalid_argument("fp8::cublaslt::handle::gemm: " + why);
    run_validated(problem, stream, scratch);
  }

  // Row-major Y[m, n] = X[m, k] · W[n, k]ᵀ (+ beta · C) (+ bias[n]), mapped onto cuBLASLt's TN
  // form by to_gemm().
  void linear(const linear_problem& problem, cudaStream_t stream = nullptr) {
    gemm(to_gemm(problem), stream);
  }

  // Many products of different shapes on one stream, e.g. the experts of a mixture-of-experts
  // layer (each its own token count M). Every member is checked, and its plan built (descriptors
  // and the heuristic's algorithms), before the first runs, so a member the checks or cuBLASLt's
  // heuristic refuse leaves nothing half done; each then runs through its cached plan (with tuning
  // enabled, a member's untuned plan is tuned just before it runs, after the members before it). (cuBLASLt
  // 13.1's headers have no grouped matrix layout: this is one cublasLtMatmul per member, in order,
  // on `stream`, sharing its workspace, which is safe as they run one after another.)
  void grouped_linear(const std::vector<linear_problem>& problems, cudaStream_t stream = nullptr) {
    std::vector<gemm_problem> resolved;
    resolved.reserve(problems.size());
    for (const linear_problem& p : problems) resolved.push_back(with_packed_leading_dimensions(to_gemm(p)));
    grouped_gemm(resolved, stream);
  }
  void grouped_gemm(const std::vector<gemm_problem>& problems, cudaStream_t stream = nullptr) {
    check_current_device();
    std::vector<gemm_problem> resolved;
    resolved.reserve(problems.size());
    for (const gemm_problem& p : problems) resolved.push_back(with_packed_leading_dimensions(p));
    validate_group(resolved, device_);
    const workspace scratch = workspaces_.for_stream(detail::workspace_key(stream, device_.ordinal));
    if (!cache_enabled_) {
      // Every member's plan built before the first runs, as with the cache: a member the heuristic
      // refuses stops the group with nothing done.
      std::deque<detail::plan> plans;
      for (const gemm_problem& p : resolved) {
        detail::build_plan(plans.emplace_back(), handle_, workspace_bytes_, p, device_);
      }
      for (std::size_t i = 0; i < resolved.size(); ++i) run(plans[i], resolved[i], stream, scratch);
      return;
    }
    for (const gemm_problem& p : resolved) (void)cached_plan(p);  // may evict, but proves each builds
    for (const gemm_problem& p : resolved) run_validated(p, stream, scratch);
  }

  // The plan cache (on by default, at most plan_capacity() plans, least recently used out). Off,
  // every call builds descriptors and queries the heuristic again, as frameworks without a cache
  // do; benchmarks compare the two. Tuned plans live in the cache: it stays on while tuning is.
  void set_algorithm_cache(bool enabled) {
    if (!enabled && tuning_.enabled) {
      throw invalid_argument(
          "fp8::cublaslt::handle::set_algorithm_cache(false): tuning is enabled and keeps what it "
          "measures in the plan cache; disable tuning first (set_tuning)");
    }
    cache_enabled_ = enabled;
    if (!enabled) plans_.clear();
  }
  bool algorithm_cache() const noexcept { return cache_enabled_; }
  std::size_t cached_plans() const noexcept { return plans_.size(); }
  void set_plan_capacity(std::size_t capacity) { plans_.set_capacity(capacity); }
  std::size_t plan_capacity() const noexcept { return plans_.capacity(); }

  // Tuning (off by default). Enabled, each new plan asks the heuristic for options.candidates
  // algorithms, and its first call outside a CUDA graph capture times them all on the call's
  // stream (synchronising it; tuning.hpp says how, and that the timed runs write scratch, never the
  // caller's outputs) and keeps them fastest first; later calls pay nothing. A plan first called
  // during a capture keeps the heuristic's order until a call outside one; a plan whose tuning
  // fails (no memory for the scratch, every candidate refused) keeps it for good, and the call runs
  // as untuned calls do. Enabling drops the plans cached so far, which were chosen among fewer
  // candidates. The options also serve tune(). Needs the plan cache.
  void set_tuning(const tuning_options& options) {
    const std::string why = find_tuning_options_problem(options);
    if (!why.empty()) throw invalid_argument("fp8::cublaslt::handle::set_tuning: " + why);
    if (options.enabled && !cache_enabled_) {
      throw invalid_argument(std::string("fp8::cublaslt::handle::set_tuning: ") + tuning_needs_cache);
    }
    if (options.enabled && !tuning_.enabled) plans_.clear();
    tuning_ = options;
  }
  const tuning_options& tuning() const noexcept { return tuning_; }
  // How many plans have been tuned (by tune() or on a first call) since the handle was made.
  std::size_t tunings() const noexcept { return tunings_; }

  // Tunes `problem`'s plan now, whether or not tuning is enabled: asks the heuristic for
  // tuning().candidates algorithms, times each on `stream` with the problem's own operands, keeps
  // them fastest first in the plan cache (replacing the cached plan only once the tuning
  // succeeded) and says what it measured. The product runs candidates x (1 + rounds x
  // calls_per_timing) times, every run writing scratch: the problem's outputs are left as they
  // were. Synchronises `stream`; refused while the stream is being captured into a CUDA graph.
  tuning_report tune(const gemm_problem& unresolved, cudaStream_t stream = nullptr) {
    const gemm_problem problem = with_packed_leading_dimensions(unresolved);
    check_current_device();
    validate(problem, device_);
    if (!cache_enabled_)
      throw invalid_argument(std::string("fp8::cublaslt::handle::tune: ") + tuning_needs_cache);
    if (detail::is_capturing(stream)) {
      throw invalid_argument(
          "fp8::cublaslt::handle::tune: the stream is being captured into a CUDA graph (for the legacy "
          "default stream: a blocking stream is), and tuning must time the product and synchronise; "
          "tune before the capture (or enable tuning and make one call outside it)");
    }
    detail::plan fresh;
    detail::build_plan(fresh, handle_, workspace_bytes_, problem, device_, tuning_.candidates);
    tuning_report report = tune_now(fresh, problem, stream,
                                    workspaces_.for_stream(detail::workspace_key(stream, device_.ordinal)));
    const detail::plan_key key = detail::make_key(problem, workspace_bytes_);
    plans_.erase(key);
    plans_.insert(key) = std::move(fresh);
    return report;
  }
  tuning_report tune_linear(const linear_problem& problem, cudaStream_t stream = nullptr) {
    return tune(to_gemm(problem), stream);
  }

  // Frees the workspace of a stream that will not be used with this handle again (after its work
  // is done, e.g. before cudaStreamDestroy).
  void release_workspace(cudaStream_t stream) noexcept {
    // A special handle names a stream of the current device: it is asked with this handle's device
    // current, so that a release from another device frees this handle's workspace of that stream.
    int current = device_.ordinal;
    if (detail::is_special_stream(stream) && cudaGetDevice(&current) != cudaSuccess) {
      (void)cudaGetLastError();  // not the caller's error; nothing can be named, so nothing is freed
      return;
    }
    if (current != device_.ordinal && cudaSetDevice(device_.ordinal) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    std::uint64_t key = 0;  // none where CUDA cannot name the stream: then nothing was allocated for it
    if (detail::find_workspace_key(stream, device_.ordinal, key) == cudaSuccess) workspaces_.release(key);
    if (current != device_.ordinal && cudaSetDevice(current) != cudaSuccess) (void)cudaGetLastError();
  }
  std::size_t workspace_streams() const noexcept { return workspaces_.streams(); }

  const device_info& device() const noexcept { return device_; }
  std::size_t workspace_bytes() const noexcept { return workspace_bytes_; }
  cublasLtHandle_t native_handle() const noexcept { return handle_; }

 private:
  void check_current_device() const {
    int current = 0;
    FP8_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device_.ordinal) {
      throw invalid_argument("fp8::cublaslt::handle: made on device " + std::to_string(device_.ordinal) +
                             " but device " + std::to_string(current) +
                             " is current; make one handle per device");
    }
  }

  void run_validated(const gemm_problem& problem, cudaStream_t stream, workspace scratch) {
    if (!cache_enabled_) {
      detail::plan fresh;
      detail::build_plan(fresh, handle_, workspace_bytes_, problem, device_);
      run(fresh, problem, stream, scratch);
      return;
    }
    detail::plan& plan = cached_plan(problem);
    if (tuning_.enabled && !plan.tuned && !detail::is_capturing(stream))
      tune_first_call(plan, problem, stream, scratch);
    run(plan, problem, stream, scratch);
  }

  // Tuning on a plan's first call. Where it cannot be done (cuBLASLt refuses every candidate, the
  // scratch does not fit in memory, or the device has no stream-ordered allocator for it), the plan
  // keeps the heuristic's order for good and the call goes on as an untuned one would: run() then
  // reports a product that cannot run at all. Any other CUDA error (a fault, which is sticky) is
  // thrown.
  void tune_first_call(detail::plan& plan, const gemm_problem& problem, cudaStream_t stream,
                       workspace scratch) {
    try {
      (void)tune_now(plan, problem, stream, scratch);
    } catch (const cublas_error&) { plan.tuned = true; } catch (const cuda_error& e) {
      if (e.status() != cudaErrorMemoryAllocation && e.status() != cudaErrorNotSupported) throw;
      plan.tuned = true;
    }
  }

  tuning_report tune_now(detail::plan& plan, const gemm_problem& problem, cudaStream_t stream,
                         workspace scratch) {
    tuning_report report = detail::tune_plan(handle_, plan, problem, device_, stream, scratch, tuning_);
    ++tunings_;
    return report;
  }

  // The cached plan of `problem` with its pointers set, built (and cached) when absent, asking the
  // heuristic for 8 algorithms, or tuning().candidates while tuning is enabled. The reference is
  // valid until the next insertion may evict it.
  detail::plan& cached_plan(const gemm_problem& problem) {
    const detail::plan_key key = detail::make_key(problem, workspace_bytes_);
    if (detail::plan* found = plans_.find(key)) {
      detail::set_pointers(found->desc.get, problem, device_);
      return *found;
    }
    const int candidates = tuning_.enabled ? tuning_.candidates : heuristic_candidates;
    detail::plan& inserted = plans_.insert(key);
    try {
      detail::build_plan(inserted, handle_, workspace_bytes_, problem, device_, candidates);
    } catch (...) {
      plans_.erase(key);  // a failed build leaves no half-made entry behind
      throw;
    }
    return inserted;
  }

  // Runs the plan's chosen algorithm, falling back to the next candidates if it fails; the one
  // that works becomes the plan's choice. C is passed only when it is read (beta != 0).
  void run(detail::plan& plan, const gemm_problem& p, cudaStream_t stream, workspace scratch) {
    const auto attempt = [&](std::size_t i) {
      return detail::matmul(handle_, plan, i, p, p.d.data, stream, scratch);
    };
    const std::size_t start = plan.chosen;
    const auto result = first_that_works(plan.algorithms.size(), start, CUBLAS_STATUS_SUCCESS, attempt,
                                         detail::refused_before_running);
    if (result.succeeded(plan.algorithms.size())) {
      plan.chosen = result.index;
      return;
    }
    const cublasStatus_t last =
        result.statuses.empty() ? CUBLAS_STATUS_NOT_SUPPORTED : result.statuses.back();
    if (!detail::refused_before_running(last)) {
      // The device's own error, if it had one, says more than cuBLAS's status.
      const cudaError_t device_error = cudaPeekAtLastError();
      throw cublas_error(last, "cublasLtMatmul", describe(p),
                         "running the product (" + attempts_text(result, start, cublasLtGetStatusName) +
                             "; no later candidate tried: the last may have written part of D before it "
                             "failed" +
                             (device_error != cudaSuccess
                                  ? std::string("; the device reports ") + cudaGetErrorName(device_error)
                                  : std::string()) +
                             "): " + detail::likely_cause(last, device_),
                         fp8::detail::source_location(__FILE__, __LINE__));
    }
    const cublasStatus_t first =
        result.statuses.empty() ? CUBLAS_STATUS_NOT_SUPPORTED : result.statuses.front();
    throw cublas_error(first, "cublasLtMatmul", describe(p),
                       "running the product (" + std::to_string(result.statuses.size()) +
                           " candidate algorithms tried, all refused: " +
                           attempts_text(result, start, cublasLtGetStatusName) +
                           "): " + detail::likely_cause(first, device_),
                       fp8::detail::source_location(__FILE__, __LINE__));
  }

  device_info device_{};
  cublasLtHandle_t handle_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  workspace_pool<detail::cuda_workspace_allocator> workspaces_;
  bool cache_enabled_ = true;
  // Why tuning is refused while the plan cache is off (set_tuning, tune).
  static constexpr const char* tuning_needs_cache =
      "tuning keeps what it measures in the plan cache, which is off; turn it on first "
      "(set_algorithm_cache(true))";
  tuning_options tuning_{};
  std::size_t tunings_ = 0;
  lru_cache<detail::plan_key, detail::plan, detail::plan_key_hash> plans_;
};

}  // namespace fp8::cublaslt

// fp8::cublaslt::handle: a cuBLASLt handle, its workspace (32 MiB by default) and a per-problem
// cache of descriptors and chosen algorithm; gemm() and linear() validate, then run one product.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>
#include <string>
#include <unordered_map>
#include <utility>

#include "../cuda/error.hpp"
#include "../error.hpp"
#include "error.hpp"
#include "problem.hpp"
#include "validate.hpp"

namespace fp8::cublaslt {

// Hopper's split-K and stream-K kernels want scratch space; 0 (cuBLASLt's default preference)
// would exclude them. 32 MiB is what cuBLAS itself reserves on Hopper.
inline constexpr std::size_t default_workspace_bytes = std::size_t(32) << 20;

// The current device as the checks see it; device_count is 0 when there is no GPU or no driver.
inline device_info query_device() {
  device_info info{};
  const cudaError_t count_status = cudaGetDeviceCount(&info.device_count);
  if (count_status == cudaErrorNoDevice || count_status == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
    info.device_count = 0;
    return info;
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

constexpr cudaDataType_t cuda_type(data_type type) noexcept {
  switch (type) {
    case data_type::e4m3: return CUDA_R_8F_E4M3;
    case data_type::e5m2: return CUDA_R_8F_E5M2;
    case data_type::bf16: return CUDA_R_16BF;
    case data_type::fp16: return CUDA_R_16F;
    case data_type::fp32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}
constexpr std::int32_t cuda_scale_mode(scale_mode mode) noexcept {
  switch (mode) {
    case scale_mode::tensorwise: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    case scale_mode::row_wise: return CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    case scale_mode::block_1x128: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case scale_mode::block_128x128: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  }
  return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
}
constexpr std::uint32_t cuda_epilogue(epilogue kind) noexcept {
  switch (kind) {
    case epilogue::none: return CUBLASLT_EPILOGUE_DEFAULT;
    case epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case epilogue::gelu: return CUBLASLT_EPILOGUE_GELU;
    case epilogue::gelu_bias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}
constexpr std::int32_t cuda_operation(operation op) noexcept {
  return op == operation::none ? CUBLAS_OP_N : CUBLAS_OP_T;
}

// The C matrix is never read (beta = 0) but its type is part of the kernel's signature: the output
// type, except FP8 outputs, which pair with a bf16 or fp16 C (the bias type).
inline data_type c_type_of(const gemm_problem& problem) {
  return is_fp8(problem.d.type) ? bias_type_of(problem) : problem.d.type;
}

// The largest power of two (up to 256, cuBLASLt's default assumption) that divides an address.
inline std::uint32_t pointer_alignment(const void* pointer) noexcept {
  constexpr std::uintptr_t max_alignment = 256;
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(pointer);
  if (address == 0) return max_alignment;
  const std::uintptr_t lowest_bit = address & (~address + 1);
  return std::uint32_t(lowest_bit < max_alignment ? lowest_bit : max_alignment);
}

// What usually explains a status from cuBLASLt itself, after the wrapper's checks passed.
inline std::string likely_cause(cublasStatus_t status, const device_info& device) {
  switch (status) {
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "cuBLASLt has no kernel for this combination of types, scale modes and epilogue on sm_" +
             std::to_string(device.major) + std::to_string(device.minor);
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an attribute or pointer does not fit the product (scale tensor size or layout, bias "
             "length, or a pointer that is not device memory)";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the GPU is too old for this product";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the kernel failed to launch or run (see compute-sanitizer)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLASLt could not allocate host or device memory";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the handle is not initialised (no device or driver)";
    default: return "cuBLASLt reported an unexpected status";
  }
}

// Throws cublas_error for a failed status; `context` says what the call was for.
inline void check_cublas(cublasStatus_t status, const char* call, const gemm_problem& problem,
                         const device_info& device, const char* context, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw cublas_error(status, call, describe(problem), std::string(context) + ": " + likely_cause(status, device),
                     fp8::detail::source_location(file, line));
}

// FP8_CUBLAS_CHECK(cublasLtSomething(...), problem, device, "what it was for");
#define FP8_CUBLAS_CHECK(call, problem, device, context) \
  ::fp8::cublaslt::detail::check_cublas((call), #call, (problem), (device), (context), __FILE__, __LINE__)

// Owning wrappers of the descriptors; destructors never throw.
struct matmul_desc {
  cublasLtMatmulDesc_t get = nullptr;
  matmul_desc() = default;
  matmul_desc(const matmul_desc&) = delete;
  matmul_desc& operator=(const matmul_desc&) = delete;
  ~matmul_desc() {
    if (get) (void)cublasLtMatmulDescDestroy(get);
  }
};
struct matrix_layout {
  cublasLtMatrixLayout_t get = nullptr;
  matrix_layout() = default;
  matrix_layout(const matrix_layout&) = delete;
  matrix_layout& operator=(const matrix_layout&) = delete;
  ~matrix_layout() {
    if (get) (void)cublasLtMatrixLayoutDestroy(get);
  }
};
struct matmul_preference {
  cublasLtMatmulPreference_t get = nullptr;
  matmul_preference() = default;
  matmul_preference(const matmul_preference&) = delete;
  matmul_preference& operator=(const matmul_preference&) = delete;
  ~matmul_preference() {
    if (get) (void)cublasLtMatmulPreferenceDestroy(get);
  }
};

// Everything cuBLASLt needs to run a problem except the data: built once per distinct problem.
struct plan {
  matmul_desc desc;
  matrix_layout a, b, c, d;
  cublasLtMatmulAlgo_t algorithm{};
};

// What makes two problems need different descriptors or algorithms: shapes, types, layouts, scale
// modes, epilogue, accumulation, pointer alignments and which optional pointers are set.
struct plan_key {
  std::int64_t m, n, k, lda, ldb, ldd;
  std::int32_t op_a, op_b;
  data_type a_type, b_type, d_type, c_type, bias_type;
  scale_mode a_scaling, b_scaling;
  epilogue epilogue_kind;
  bool fast_accum, has_a_scale, has_b_scale, has_d_scale, has_amax;
  std::uint32_t align_a, align_b, align_d, align_bias;

  friend bool operator==(const plan_key& x, const plan_key& y) noexcept {
    return x.m == y.m && x.n == y.n && x.k == y.k && x.lda == y.lda && x.ldb == y.ldb && x.ldd == y.ldd &&
           x.op_a == y.op_a && x.op_b == y.op_b && x.a_type == y.a_type && x.b_type == y.b_type &&
           x.d_type == y.d_type && x.c_type == y.c_type && x.bias_type == y.bias_type &&
           x.a_scaling == y.a_scaling && x.b_scaling == y.b_scaling && x.epilogue_kind == y.epilogue_kind &&
           x.fast_accum == y.fast_accum && x.has_a_scale == y.has_a_scale && x.has_b_scale == y.has_b_scale &&
           x.has_d_scale == y.has_d_scale && x.has_amax == y.has_amax && x.align_a == y.align_a &&
           x.align_b == y.align_b && x.align_d == y.align_d && x.align_bias == y.align_bias;
  }
};

struct plan_key_hash {
  std::size_t operator()(const plan_key& key) const noexcept {
    // FNV-1a style mixing of every field.
    std::uint64_t hash = 1469598103934665603ull;
    const auto mix = [&hash](std::uint64_t value) {
      hash ^= value;
      hash *= 1099511628211ull;
    };
    mix(std::uint64_t(key.m));
    mix(std::uint64_t(key.n));
    mix(std::uint64_t(key.k));
    mix(std::uint64_t(key.lda));
    mix(std::uint64_t(key.ldb));
    mix(std::uint64_t(key.ldd));
    mix((std::uint64_t(key.op_a) << 8) | std::uint64_t(key.op_b));
    mix((std::uint64_t(key.a_type) << 32) | (std::uint64_t(key.b_type) << 24) |
        (std::uint64_t(key.d_type) << 16) | (std::uint64_t(key.c_type) << 8) | std::uint64_t(key.bias_type));
    mix((std::uint64_t(key.a_scaling) << 16) | (std::uint64_t(key.b_scaling) << 8) |
        std::uint64_t(key.epilogue_kind));
    mix((std::uint64_t(key.fast_accum) << 4) | (std::uint64_t(key.has_a_scale) << 3) |
        (std::uint64_t(key.has_b_scale) << 2) | (std::uint64_t(key.has_d_scale) << 1) |
        std::uint64_t(key.has_amax));
    mix((std::uint64_t(key.align_a) << 48) | (std::uint64_t(key.align_b) << 32) |
        (std::uint64_t(key.align_d) << 16) | std::uint64_t(key.align_bias));
    return std::size_t(hash);
  }
};

inline plan_key make_key(const gemm_problem& p) noexcept {
  return plan_key{p.m, p.n, p.k, p.a.ld, p.b.ld, p.d.ld,
                  cuda_operation(p.op_a), cuda_operation(p.op_b),
                  p.a.type, p.b.type, p.d.type, c_type_of(p), bias_type_of(p),
                  p.a.scaling, p.b.scaling, p.options.epilogue_kind,
                  is_fp8(p.a.type) && uses_fast_accumulation(p),
                  p.a.scale_inv != nullptr, p.b.scale_inv != nullptr, p.d.scale != nullptr, p.d.amax != nullptr,
                  pointer_alignment(p.a.data), pointer_alignment(p.b.data), pointer_alignment(p.d.data),
                  pointer_alignment(p.options.bias)};
}

template <class T>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value,
                   const gemm_problem& problem, const device_info& device) {
  FP8_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)), problem, device,
                   "setting a matmul attribute (the row-wise and block scale modes need cuBLAS 12.9+)");
}

// The attributes that change from call to call (data-dependent pointers), set on a cached plan.
inline void set_pointers(cublasLtMatmulDesc_t desc, const gemm_problem& p, const device_info& device) {
  if (is_fp8(p.a.type)) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(p.a.scale_inv), p, device);
    set_attribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(p.b.scale_inv), p, device);
  }
  if (is_fp8(p.d.type)) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, static_cast<const void*>(p.d.scale), p, device);
    set_attribute(desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, static_cast<void*>(p.d.amax), p, device);
  }
  if (uses_bias(p.options.epilogue_kind)) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.options.bias, p, device);
  }
}

inline void create_layout(matrix_layout& layout, data_type type, std::int64_t rows, std::int64_t cols,
                          std::int64_t ld, const gemm_problem& p, const device_info& device) {
  FP8_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout.get, cuda_type(type), std::uint64_t(rows),
                                              std::uint64_t(cols), ld),
                   p, device, "creating a matrix layout");
}

// Builds the descriptors of `p` and asks cuBLASLt's heuristic for its best algorithm.
inline void build_plan(plan& out, cublasLtHandle_t handle, std::size_t workspace_bytes, const gemm_problem& p,
                       const device_info& device) {
  FP8_CUBLAS_CHECK(cublasLtMatmulDescCreate(&out.desc.get, CUBLAS_COMPUTE_32F, CUDA_R_32F), p, device,
                   "creating the matmul descriptor");
  const cublasLtMatmulDesc_t desc = out.desc.get;
  set_attribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, cuda_operation(p.op_a), p, device);
  set_attribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, cuda_operation(p.op_b), p, device);
  if (is_fp8(p.a.type)) {
    const std::int8_t fast = uses_fast_accumulation(p) ? 1 : 0;
    set_attribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast, p, device);
    if (p.a.scaling != scale_mode::tensorwise || p.b.scaling != scale_mode::tensorwise) {
      set_attribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, cuda_scale_mode(p.a.scaling), p, device);
      set_attribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, cuda_scale_mode(p.b.scaling), p, device);
    }
  }
  set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, cuda_epilogue(p.options.epilogue_kind), p, device);
  if (uses_bias(p.options.epilogue_kind)) {
    const std::int32_t bias_type = cuda_type(bias_type_of(p));
    set_attribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type, p, device);
  }
  set_pointers(desc, p, device);

  create_layout(out.a, p.a.type, stored_rows_a(p), stored_cols_a(p), p.a.ld, p, device);
  create_layout(out.b, p.b.type, stored_rows_b(p), stored_cols_b(p), p.b.ld, p, device);
  create_layout(out.c, c_type_of(p), p.m, p.n, p.d.ld, p, device);
  create_layout(out.d, p.d.type, p.m, p.n, p.d.ld, p, device);

  matmul_preference preference;
  FP8_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference.get), p, device, "creating the preference");
  const std::uint64_t workspace = workspace_bytes;
  FP8_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference.get, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                        &workspace, sizeof(workspace)),
                   p, device, "setting the workspace size");
  const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, pointer_alignment(p.a.data)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, pointer_alignment(p.b.data)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, pointer_alignment(p.d.data)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, pointer_alignment(p.d.data)}};
  for (const auto& [attribute, alignment] : alignments) {
    FP8_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference.get, attribute, &alignment, sizeof(alignment)),
                     p, device, "setting the pointer alignments");
  }

  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  FP8_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, desc, out.a.get, out.b.get, out.c.get, out.d.get,
                                                  preference.get, 1, &result, &returned),
                   p, device, "choosing an algorithm");
  if (returned == 0) {
    throw cublas_error(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic", describe(p),
                       "no algorithm returned: " + likely_cause(CUBLAS_STATUS_NOT_SUPPORTED, device),
                       fp8::detail::source_location(__FILE__, __LINE__));
  }
  out.algorithm = result.algo;
}

}  // namespace detail

// A cuBLASLt handle bound to the device that was current when it was made, with its workspace and
// plan cache. Not thread-safe: use one per thread (or guard it); calls on it may target any stream
// of its device. Errors throw fp8::cublas_error or fp8::cuda_error; the destructor never throws.
//
//   fp8::cublaslt::handle lt;                        // 32 MiB workspace
//   fp8::cublaslt::linear_problem p{};               // Y[m,n] = X[m,k] · W[n,k]ᵀ, row-major
//   p.m = tokens; p.n = out_features; p.k = in_features;
//   p.x = {x_fp8, fp8::cublaslt::data_type::e4m3, 0, fp8::cublaslt::scale_mode::tensorwise, x_scale_inv};
//   p.w = {w_fp8, fp8::cublaslt::data_type::e4m3, 0, fp8::cublaslt::scale_mode::tensorwise, w_scale_inv};
//   p.y = {y_bf16, fp8::cublaslt::data_type::bf16};
//   lt.linear(p, stream);
class handle {
 public:
  explicit handle(std::size_t workspace_bytes = default_workspace_bytes)
      : device_(query_device()), workspace_bytes_(workspace_bytes) {
    if (device_.device_count == 0) {
      throw cuda_error(cudaErrorNoDevice, "fp8::cublaslt::handle()", {},
                       "no CUDA device: a cuBLASLt handle needs an NVIDIA GPU");
    }
    const cublasStatus_t status = cublasLtCreate(&handle_);
    if (status != CUBLAS_STATUS_SUCCESS) {
      throw cublas_error(status, "cublasLtCreate", {}, detail::likely_cause(status, device_),
                         fp8::detail::source_location(__FILE__, __LINE__));
    }
    if (workspace_bytes_ > 0) {
      const cudaError_t allocated = cudaMalloc(&workspace_, workspace_bytes_);
      if (allocated != cudaSuccess) {
        (void)cudaGetLastError();
        (void)cublasLtDestroy(handle_);
        throw cuda_error(allocated, "cudaMalloc(workspace, " + std::to_string(workspace_bytes_) + ")",
                         fp8::detail::source_location(__FILE__, __LINE__), fp8::detail::cuda_hint(allocated));
      }
    }
  }

  handle(const handle&) = delete;
  handle& operator=(const handle&) = delete;
  handle(handle&& other) noexcept { swap(other); }
  handle& operator=(handle&& other) noexcept {
    if (this != &other) {
      handle moved(std::move(other));
      swap(moved);
    }
    return *this;
  }
  ~handle() {
    plans_.clear();  // descriptors first, then the handle they belong to
    if (workspace_) (void)cudaFree(workspace_);
    if (handle_) (void)cublasLtDestroy(handle_);
  }

  // D = alpha · op(A) · op(B) (+ epilogue), column-major (see gemm_problem). Validates first.
  void gemm(const gemm_problem& unresolved, cudaStream_t stream = nullptr) {
    const gemm_problem problem = with_packed_leading_dimensions(unresolved);
    check_current_device();
    validate(problem, device_);
    if (!cache_enabled_) {
      detail::plan fresh;
      detail::build_plan(fresh, handle_, workspace_bytes_, problem, device_);
      run(fresh, problem, stream);
      return;
    }
    const detail::plan_key key = detail::make_key(problem);
    auto found = plans_.find(key);
    if (found == plans_.end()) {
      auto inserted = plans_.emplace(std::piecewise_construct, std::forward_as_tuple(key), std::forward_as_tuple());
      try {
        detail::build_plan(inserted.first->second, handle_, workspace_bytes_, problem, device_);
      } catch (...) {
        plans_.erase(inserted.first);  // a failed build leaves no half-made entry behind
        throw;
      }
      found = inserted.first;
    } else {
      detail::set_pointers(found->second.desc.get, problem, device_);
    }
    run(found->second, problem, stream);
  }

  // Row-major Y[m, n] = X[m, k] · W[n, k]ᵀ (+ bias[n]), mapped onto cuBLASLt's TN form by to_gemm().
  void linear(const linear_problem& problem, cudaStream_t stream = nullptr) { gemm(to_gemm(problem), stream); }

  // The algorithm cache (on by default). Off, every call builds descriptors and queries the
  // heuristic again, as frameworks without a cache do; benchmarks compare the two.
  void set_algorithm_cache(bool enabled) {
    cache_enabled_ = enabled;
    if (!enabled) plans_.clear();
  }
  bool algorithm_cache() const noexcept { return cache_enabled_; }
  std::size_t cached_plans() const noexcept { return plans_.size(); }

  const device_info& device() const noexcept { return device_; }
  std::size_t workspace_bytes() const noexcept { return workspace_bytes_; }
  cublasLtHandle_t native_handle() const noexcept { return handle_; }

 private:
  void swap(handle& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(handle_, other.handle_);
    std::swap(workspace_, other.workspace_);
    std::swap(workspace_bytes_, other.workspace_bytes_);
    std::swap(cache_enabled_, other.cache_enabled_);
    std::swap(plans_, other.plans_);
  }

  void check_current_device() const {
    int current = 0;
    FP8_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device_.ordinal) {
      throw invalid_argument("fp8::cublaslt::handle: made on device " + std::to_string(device_.ordinal) +
                             " but device " + std::to_string(current) +
                             " is current; make one handle per device");
    }
  }

  void run(detail::plan& plan, const gemm_problem& p, cudaStream_t stream) {
    const float alpha = p.options.alpha;
    const float beta = 0.0f;
    FP8_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc.get, &alpha, p.a.data, plan.a.get, p.b.data, plan.b.get,
                                    &beta, p.d.data, plan.c.get, p.d.data, plan.d.get, &plan.algorithm,
                                    workspace_, workspace_bytes_, stream),
                     p, device_, "running the product");
  }

  device_info device_{};
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  bool cache_enabled_ = true;
  std::unordered_map<detail::plan_key, detail::plan, detail::plan_key_hash> plans_;
};

}  // namespace fp8::cublaslt

// fp8::cublaslt::handle: a cuBLASLt handle, a workspace per stream (32 MiB each by default) and a
// bounded cache of descriptors and candidate algorithms per problem; gemm() and linear() validate,
// then run one product (falling back to the next candidate algorithm if the first fails).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../cuda/error.hpp"
#include "../error.hpp"
#include "error.hpp"
#include "fallback.hpp"
#include "plan_cache.hpp"
#include "problem.hpp"
#include "validate.hpp"
#include "workspace.hpp"

// The row-wise and 128-block scale modes exist in the headers of cuBLAS 12.9 and newer; older
// headers compile the wrapper without them (the checks then reject those modes, naming the version).
#if defined(CUBLAS_VERSION) && CUBLAS_VERSION >= 120900
#define FP8_CUBLASLT_HAS_SCALE_MODES 1
#else
#define FP8_CUBLASLT_HAS_SCALE_MODES 0
#endif

namespace fp8::cublaslt {

// Hopper's split-K and stream-K kernels want scratch space; 0 (cuBLASLt's default preference)
// would exclude them. 32 MiB is what cuBLAS itself reserves on Hopper.
inline constexpr std::size_t default_workspace_bytes = std::size_t(32) << 20;
// How many plans a handle keeps (least recently used out): enough for every GEMM of a model with
// a few dozen sequence lengths, bounded for programs that see a new shape every step.
inline constexpr std::size_t default_plan_capacity = 1024;
// How many algorithms the heuristic is asked for: the first is used, the others are fallbacks.
inline constexpr int heuristic_candidates = 8;

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
#if FP8_CUBLASLT_HAS_SCALE_MODES
constexpr std::int32_t cuda_scale_mode(scale_mode mode) noexcept {
  switch (mode) {
    case scale_mode::tensorwise: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    case scale_mode::row_wise: return CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    case scale_mode::block_1x128: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case scale_mode::block_128x128: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  }
  return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
}
#endif
constexpr std::uint32_t cuda_epilogue(epilogue kind) noexcept {
  switch (kind) {
    case epilogue::none: return CUBLASLT_EPILOGUE_DEFAULT;
    case epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case epilogue::gelu: return CUBLASLT_EPILOGUE_GELU;
    case epilogue::gelu_bias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case epilogue::gelu_aux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case epilogue::gelu_aux_bias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case epilogue::dgelu: return CUBLASLT_EPILOGUE_DGELU;
    case epilogue::dgelu_bias_gradient: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case epilogue::bias_gradient_b: return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}
constexpr std::int32_t cuda_operation(operation op) noexcept {
  return op == operation::none ? CUBLAS_OP_N : CUBLAS_OP_T;
}

// The largest power of two (up to 256, cuBLASLt's default assumption) that divides an address.
inline std::uint32_t pointer_alignment(const void* pointer) noexcept {
  constexpr std::uintptr_t max_alignment = 256;
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(pointer);
  if (address == 0) return max_alignment;
  const std::uintptr_t lowest_bit = address & (~address + 1);
  return std::uint32_t(lowest_bit < max_alignment ? lowest_bit : max_alignment);
}

// The alignment every matrix of an operand keeps: its pointer's, and in a strided batch no more
// than the stride's (matrix i starts i · stride elements later), so that the heuristic is never
// promised a 256-byte alignment that the second matrix of a 16-byte-strided FP8 batch lacks.
inline std::uint32_t operand_alignment(const void* pointer, std::int64_t batch, std::int64_t stride,
                                       data_type type) noexcept {
  const std::uint32_t own = pointer_alignment(pointer);
  if (batch <= 1) return own;
  const std::uintptr_t stride_bytes = std::uintptr_t(stride) * element_bytes(type);
  const std::uint32_t kept = pointer_alignment(reinterpret_cast<const void*>(stride_bytes));
  return own < kept ? own : kept;
}

// What usually explains a status from cuBLASLt itself, after the wrapper's checks passed.
inline std::string likely_cause(cublasStatus_t status, const device_info& device) {
  switch (status) {
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "cuBLASLt has no kernel for this combination of types, scale modes and epilogue on sm_" +
             std::to_string(device.major) + std::to_string(device.minor);
    case CUBLAS_STATUS_INVALID_VALUE:
      return "cuBLASLt found an argument inconsistent with the others after the wrapper's checks passed "
             "(a pointer that is not device memory, a workspace too small for the chosen algorithm, or a "
             "layout cuBLASLt treats differently than the wrapper assumes); CUBLASLT_LOG_LEVEL=5 names it";
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
  throw cublas_error(status, call, describe(problem),
                     std::string(context) + ": " + likely_cause(status, device),
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
// `algorithms` are the heuristic's candidates, best first; `chosen` is the one in use.
struct plan {
  matmul_desc desc;
  matrix_layout a, b, c, d;
  std::vector<cublasLtMatmulAlgo_t> algorithms{};
  std::size_t chosen = 0;
};

// What makes two problems need different descriptors or algorithms: shapes, types, layouts, scale
// modes, epilogue, accumulation, batch, workspace, pointer alignments and which optional pointers
// are set.
struct plan_key {
  std::int64_t m, n, k, lda, ldb, ldc, ldd, aux_ld;
  std::int64_t batch, stride_a, stride_b, stride_c, stride_d;
  std::int32_t op_a, op_b;
  data_type a_type, b_type, d_type, c_type, bias_type, aux_type;
  scale_mode a_scaling, b_scaling;
  epilogue epilogue_kind;
  bool fast_accum, reads_c, has_a_scale, has_b_scale, has_d_scale, has_amax;
  std::uint32_t align_a, align_b, align_c, align_d, align_bias, align_aux;
  std::size_t workspace_bytes;

  auto fields() const noexcept {
    return std::tie(m, n, k, lda, ldb, ldc, ldd, aux_ld, batch, stride_a, stride_b, stride_c, stride_d, op_a,
                    op_b, a_type, b_type, d_type, c_type, bias_type, aux_type, a_scaling, b_scaling,
                    epilogue_kind, fast_accum, reads_c, has_a_scale, has_b_scale, has_d_scale, has_amax,
                    align_a, align_b, align_c, align_d, align_bias, align_aux, workspace_bytes);
  }
  friend bool operator==(const plan_key& x, const plan_key& y) noexcept { return x.fields() == y.fields(); }
};

struct plan_key_hash {
  std::size_t operator()(const plan_key& key) const noexcept {
    // FNV-1a style mixing of every field.
    std::uint64_t hash = 1469598103934665603ull;
    const auto mix = [&hash](auto value) {
      hash ^= std::uint64_t(value);
      hash *= 1099511628211ull;
    };
    std::apply([&mix](const auto&... field) { (mix(field), ...); }, key.fields());
    return std::size_t(hash);
  }
};

inline plan_key make_key(const gemm_problem& p, std::size_t workspace_bytes) noexcept {
  const bool c_read = reads_c(p);
  return plan_key{p.m,
                  p.n,
                  p.k,
                  p.a.ld,
                  p.b.ld,
                  c_read ? p.c.ld : p.d.ld,
                  p.d.ld,
                  p.options.aux_ld,
                  p.batch.count,
                  p.batch.stride_a,
                  p.batch.stride_b,
                  p.batch.stride_c,
                  p.batch.stride_d,
                  cuda_operation(p.op_a),
                  cuda_operation(p.op_b),
                  p.a.type,
                  p.b.type,
                  p.d.type,
                  c_type_of(p),
                  bias_type_of(p),
                  aux_type_of(p),
                  p.a.scaling,
                  p.b.scaling,
                  p.options.epilogue_kind,
                  is_fp8(p.a.type) && uses_fast_accumulation(p),
                  c_read,
                  p.a.scale_inv != nullptr,
                  p.b.scale_inv != nullptr,
                  p.d.scale != nullptr,
                  p.d.amax != nullptr,
                  operand_alignment(p.a.data, p.batch.count, p.batch.stride_a, p.a.type),
                  operand_alignment(p.b.data, p.batch.count, p.batch.stride_b, p.b.type),
                  c_read ? operand_alignment(p.c.data, p.batch.count, p.batch.stride_c, c_type_of(p)) : 0u,
                  operand_alignment(p.d.data, p.batch.count, p.batch.stride_d, p.d.type),
                  pointer_alignment(p.options.bias),
                  pointer_alignment(p.options.aux),
                  workspace_bytes};
}

// The attribute's name, for messages.
inline const char* attribute_name(cublasLtMatmulDescAttributes_t attribute) noexcept {
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return "CUBLASLT_MATMUL_DESC_TRANSA";
    case CUBLASLT_MATMUL_DESC_TRANSB: return "CUBLASLT_MATMUL_DESC_TRANSB";
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return "CUBLASLT_MATMUL_DESC_FAST_ACCUM";
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return "CUBLASLT_MATMUL_DESC_EPILOGUE";
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return "CUBLASLT_MATMUL_DESC_BIAS_POINTER";
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE";
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER";
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD";
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE";
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return "CUBLASLT_MATMUL_DESC_A_SCALE_POINTER";
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return "CUBLASLT_MATMUL_DESC_B_SCALE_POINTER";
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: return "CUBLASLT_MATMUL_DESC_D_SCALE_POINTER";
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: return "CUBLASLT_MATMUL_DESC_AMAX_D_POINTER";
#if FP8_CUBLASLT_HAS_SCALE_MODES
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE: return "CUBLASLT_MATMUL_DESC_A_SCALE_MODE";
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE: return "CUBLASLT_MATMUL_DESC_B_SCALE_MODE";
#endif
    default: return "a matmul descriptor attribute";
  }
}

// A value as messages show it: numbers in decimal, pointers in hex.
template <class T>
std::string attribute_value(const T& value) {
  if constexpr (std::is_pointer_v<T>) {
    return detail::hex_address(value);
  } else {
    return std::to_string(value);
  }
}

template <class T>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value,
                   const gemm_problem& problem, const device_info& device) {
  const cublasStatus_t status = cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value));
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw cublas_error(
      status, "cublasLtMatmulDescSetAttribute", describe(problem),
      attribute_refused_cause(attribute_name(attribute), attribute_value(value), device.cublaslt_version),
      fp8::detail::source_location(__FILE__, __LINE__));
}

// The attributes that change from call to call (data-dependent pointers), set on a cached plan.
inline void set_pointers(cublasLtMatmulDesc_t desc, const gemm_problem& p, const device_info& device) {
  if (is_fp8(p.a.type)) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(p.a.scale_inv), p,
                  device);
    set_attribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(p.b.scale_inv), p,
                  device);
  }
  if (is_fp8(p.d.type)) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, static_cast<const void*>(p.d.scale), p, device);
    set_attribute(desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, static_cast<void*>(p.d.amax), p, device);
  }
  if (needs_bias_pointer(p.options.epilogue_kind)) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.options.bias, p, device);
  }
  if (uses_aux(p.options.epilogue_kind)) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.options.aux, p, device);
  }
}

inline void create_layout(matrix_layout& layout, data_type type, std::int64_t rows, std::int64_t cols,
                          std::int64_t ld, std::int64_t batch, std::int64_t stride, const gemm_problem& p,
                          const device_info& device) {
  FP8_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&layout.get, cuda_type(type), std::uint64_t(rows), std::uint64_t(cols), ld),
      p, device, "creating a matrix layout");
  if (batch != 1) {
    const std::int32_t count = std::int32_t(batch);
    FP8_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout.get, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                      sizeof(count)),
                     p, device, "setting CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT of a matrix layout");
    FP8_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout.get, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                      &stride, sizeof(stride)),
                     p, device, "setting CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET of a matrix layout");
  }
}

// Builds the descriptors of `p` and asks cuBLASLt's heuristic for its candidate algorithms.
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
#if FP8_CUBLASLT_HAS_SCALE_MODES
      set_attribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, cuda_scale_mode(p.a.scaling), p, device);
      set_attribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, cuda_scale_mode(p.b.scaling), p, device);
#else
      // find_version_rejection refused the problem before this point; kept for direct callers.
      throw_rejection(*find_version_rejection(p, CUBLAS_VERSION, device.cublaslt_version), p);
#endif
    }
  }
  set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, cuda_epilogue(p.options.epilogue_kind), p, device);
  if (needs_bias_pointer(p.options.epilogue_kind)) {
    const std::int32_t bias_type = cuda_type(bias_type_of(p));
    set_attribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type, p, device);
  }
  if (uses_aux(p.options.epilogue_kind)) {
    set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, p.options.aux_ld, p, device);
    const std::int32_t aux_type = cuda_type(aux_type_of(p));
    set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, aux_type, p, device);
  }
  set_pointers(desc, p, device);

  // C's layout is part of the kernel's signature even when C is not passed (beta = 0): then it is
  // described like D (leading dimension and stride) in C's type.
  const bool c_read = reads_c(p);
  const std::int64_t batch = p.batch.count;
  create_layout(out.a, p.a.type, stored_rows_a(p), stored_cols_a(p), p.a.ld, batch, p.batch.stride_a, p,
                device);
  create_layout(out.b, p.b.type, stored_rows_b(p), stored_cols_b(p), p.b.ld, batch, p.batch.stride_b, p,
                device);
  create_layout(out.c, c_type_of(p), p.m, p.n, c_read ? p.c.ld : p.d.ld, batch,
                c_read ? p.batch.stride_c : p.batch.stride_d, p, device);
  create_layout(out.d, p.d.type, p.m, p.n, p.d.ld, batch, p.batch.stride_d, p, device);

  matmul_preference preference;
  FP8_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference.get), p, device, "creating the preference");
  const std::uint64_t workspace = workspace_bytes;
  FP8_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference.get, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace, sizeof(workspace)),
      p, device, "setting CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES");
  // The alignment of what is passed: C's own pointer when it is read; no C, no C constraint.
  // In a strided batch, no more than the batch stride keeps (operand_alignment).
  // The same values as the plan key's (make_key), so that a cached plan is only reused for
  // pointers at least as aligned as those it was chosen for.
  const plan_key key = make_key(p, workspace_bytes);
  struct alignment_preference {
    cublasLtMatmulPreferenceAttributes_t attribute;
    const char* name;  // for the message if cuBLASLt refuses it
    std::uint32_t bytes;
  };
  std::vector<alignment_preference> alignments = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES", key.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES", key.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES",
       key.align_d}};
  if (c_read) {
    alignments.push_back({CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                          "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES", key.align_c});
  }
  for (const alignment_preference& a : alignments) {
    const std::string context = std::string("setting ") + a.name + " = " + std::to_string(a.bytes);
    FP8_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(preference.get, a.attribute, &a.bytes, sizeof(a.bytes)), p,
        device, context.c_str());
  }

  cublasLtMatmulHeuristicResult_t results[heuristic_candidates] = {};
  int returned = 0;
  FP8_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, desc, out.a.get, out.b.get, out.c.get, out.d.get,
                                                  preference.get, heuristic_candidates, results, &returned),
                   p, device, "choosing an algorithm");
  for (int i = 0; i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) out.algorithms.push_back(results[i].algo);
  }
  if (out.algorithms.empty()) {
    throw cublas_error(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic", describe(p),
                       "no algorithm returned: " + likely_cause(CUBLAS_STATUS_NOT_SUPPORTED, device),
                       fp8::detail::source_location(__FILE__, __LINE__));
  }
}

// Allocates workspaces with cudaMalloc (one per stream, see workspace_pool).
struct cuda_workspace_allocator {
  void* allocate(std::size_t bytes) {
    void* data = nullptr;
    const cudaError_t status = cudaMalloc(&data, bytes);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      throw cuda_error(status, "cudaMalloc(workspace, " + std::to_string(bytes) + ")",
                       fp8::detail::source_location(__FILE__, __LINE__), fp8::detail::cuda_hint(status));
    }
    return data;
  }
  void release(void* data) noexcept { (void)cudaFree(data); }
};

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
    run_validated(problem, stream, workspaces_.for_stream(stream));
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
  // heuristic refuse leaves nothing half done; each then runs through its cached plan. (cuBLASLt
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
    if (cache_enabled_) {
      for (const gemm_problem& p : resolved) (void)cached_plan(p);  // may evict, but proves each builds
    }
    const workspace scratch = workspaces_.for_stream(stream);
    for (const gemm_problem& p : resolved) run_validated(p, stream, scratch);
  }

  // The plan cache (on by default, at most plan_capacity() plans, least recently used out). Off,
  // every call builds descriptors and queries the heuristic again, as frameworks without a cache
  // do; benchmarks compare the two.
  void set_algorithm_cache(bool enabled) {
    cache_enabled_ = enabled;
    if (!enabled) plans_.clear();
  }
  bool algorithm_cache() const noexcept { return cache_enabled_; }
  std::size_t cached_plans() const noexcept { return plans_.size(); }
  void set_plan_capacity(std::size_t capacity) { plans_.set_capacity(capacity); }
  std::size_t plan_capacity() const noexcept { return plans_.capacity(); }

  // Frees the workspace of a stream that will not be used with this handle again (after its work
  // is done, e.g. before cudaStreamDestroy).
  void release_workspace(cudaStream_t stream) noexcept { workspaces_.release(stream); }
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
    run(cached_plan(problem), problem, stream, scratch);
  }

  // The cached plan of `problem` with its pointers set, built (and cached) when absent. The
  // reference is valid until the next insertion may evict it.
  detail::plan& cached_plan(const gemm_problem& problem) {
    const detail::plan_key key = detail::make_key(problem, workspace_bytes_);
    if (detail::plan* found = plans_.find(key)) {
      detail::set_pointers(found->desc.get, problem, device_);
      return *found;
    }
    detail::plan& inserted = plans_.insert(key);
    try {
      detail::build_plan(inserted, handle_, workspace_bytes_, problem, device_);
    } catch (...) {
      plans_.erase(key);  // a failed build leaves no half-made entry behind
      throw;
    }
    return inserted;
  }

  // Runs the plan's chosen algorithm, falling back to the next candidates if it fails; the one
  // that works becomes the plan's choice. C is passed only when it is read (beta != 0).
  void run(detail::plan& plan, const gemm_problem& p, cudaStream_t stream, workspace scratch) {
    const float alpha = p.options.alpha;
    const float beta = p.options.beta;
    const void* c = reads_c(p) ? p.c.data : nullptr;
    const auto attempt = [&](std::size_t i) {
      return cublasLtMatmul(handle_, plan.desc.get, &alpha, p.a.data, plan.a.get, p.b.data, plan.b.get, &beta,
                            c, plan.c.get, p.d.data, plan.d.get, &plan.algorithms[i], scratch.data,
                            scratch.bytes, stream);
    };
    const auto result = first_that_works(plan.algorithms.size(), plan.chosen, CUBLAS_STATUS_SUCCESS, attempt);
    if (result.succeeded(plan.algorithms.size())) {
      plan.chosen = result.index;
      return;
    }
    const cublasStatus_t first =
        result.statuses.empty() ? CUBLAS_STATUS_NOT_SUPPORTED : result.statuses.front();
    throw cublas_error(
        first, "cublasLtMatmul", describe(p),
        "running the product (" + std::to_string(result.statuses.size()) +
            " candidate algorithms tried, all failed): " + detail::likely_cause(first, device_),
        fp8::detail::source_location(__FILE__, __LINE__));
  }

  device_info device_{};
  cublasLtHandle_t handle_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  workspace_pool<detail::cuda_workspace_allocator> workspaces_;
  bool cache_enabled_ = true;
  lru_cache<detail::plan_key, detail::plan, detail::plan_key_hash> plans_;
};

}  // namespace fp8::cublaslt

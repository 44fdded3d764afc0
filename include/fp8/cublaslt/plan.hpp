// The plan of one cuBLASLt product: its descriptors, the heuristic's candidate algorithms and the
// key that says when a cached plan fits another call; how a plan is built, and how one candidate
// runs. The handle (handle.hpp) caches plans; tune.hpp times their candidates.
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

// How many algorithms the heuristic is asked for: the first is used, the others are fallbacks.
inline constexpr int heuristic_candidates = 8;

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

// Whether cuBLASLt refused an algorithm before it ran anything (no kernel for this GPU or these
// arguments), so that the next candidate may be tried on the same D. Any other failure (an
// execution error, an allocation) may come after a kernel wrote part of D, which with beta = 1 is
// also C: a next candidate would add the product twice.
inline bool refused_before_running(cublasStatus_t status) noexcept {
  return status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE ||
         status == CUBLAS_STATUS_ARCH_MISMATCH;
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

// An owned cuBLASLt object (a matmul descriptor, a matrix layout, a preference): destroyed with its
// owner, movable (a tuned plan is built aside and moved into the cache), never copied; the
// destructor never throws.
template <class Handle, cublasStatus_t (*Destroy)(Handle)>
struct owned {
  Handle get = nullptr;
  owned() = default;
  owned(const owned&) = delete;
  owned& operator=(const owned&) = delete;
  owned(owned&& other) noexcept : get(std::exchange(other.get, nullptr)) {}
  owned& operator=(owned&& other) noexcept {
    if (this != &other) {
      reset();
      get = std::exchange(other.get, nullptr);
    }
    return *this;
  }
  ~owned() { reset(); }
  void reset() noexcept {
    if (get) (void)Destroy(get);
    get = nullptr;
  }
};
using matmul_desc = owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using matrix_layout = owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using matmul_preference = owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

// Everything cuBLASLt needs to run a problem except the data: built once per distinct problem.
// `algorithms` are the heuristic's candidates, best first (fastest first once `tuned`: tune.hpp);
// `chosen` is the one in use.
struct plan {
  matmul_desc desc;
  matrix_layout a, b, c, d;
  std::vector<cublasLtMatmulAlgo_t> algorithms{};
  std::size_t chosen = 0;
  bool tuned = false;  // timed, fastest first; or tuning given up (handle::tune_first_call)
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

// Builds the descriptors of `p` and asks cuBLASLt's heuristic for up to `candidates` algorithms.
inline void build_plan(plan& out, cublasLtHandle_t handle, std::size_t workspace_bytes, const gemm_problem& p,
                       const device_info& device, int candidates = heuristic_candidates) {
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

  std::vector<cublasLtMatmulHeuristicResult_t> results(std::size_t(candidates < 1 ? 1 : candidates));
  int returned = 0;
  FP8_CUBLAS_CHECK(
      cublasLtMatmulAlgoGetHeuristic(handle, desc, out.a.get, out.b.get, out.c.get, out.d.get, preference.get,
                                     int(results.size()), results.data(), &returned),
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

// One product through the plan's candidate `algorithm` (an index into plan.algorithms), with the
// problem's data pointers (the descriptor's pointer attributes are set by set_pointers). C is passed
// only when it is read (beta != 0); `d` is where the output goes (the problem's own D, or scratch
// of the same layout while tuning).
inline cublasStatus_t matmul(cublasLtHandle_t handle, const plan& plan, std::size_t algorithm,
                             const gemm_problem& p, void* d, cudaStream_t stream, workspace scratch) {
  const float alpha = p.options.alpha;
  const float beta = p.options.beta;
  const void* c = reads_c(p) ? p.c.data : nullptr;
  return cublasLtMatmul(handle, plan.desc.get, &alpha, p.a.data, plan.a.get, p.b.data, plan.b.get, &beta, c,
                        plan.c.get, d, plan.d.get, &plan.algorithms[algorithm], scratch.data, scratch.bytes,
                        stream);
}

}  // namespace detail

}  // namespace fp8::cublaslt

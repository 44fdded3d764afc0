// The checks the cuBLASLt wrapper runs before every call, as pure functions of a problem and a
// device description, so that each rejected case is tested on machines without a GPU.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "../quantize/checks.hpp"
#include "problem.hpp"

namespace fp8::cublaslt {

// The GPU a problem is meant for (what cudaGetDeviceCount / cudaGetDeviceProperties report).
struct device_info {
  int device_count = 0;
  int ordinal = 0;
  int major = 0;  // compute capability, e.g. 9.0 for H100 / H200
  int minor = 0;
  std::string name{};
  // cuBLASLt's version as major * 10000 + minor * 100 + patch: the library loaded at run time
  // (cublasLtGetVersion()) and the headers the wrapper was compiled against (CUBLAS_VERSION).
  // 0 = unknown, which the checks treat as too old for anything that needs a version.
  std::size_t cublaslt_version = 0;
  std::size_t cublaslt_header_version = 0;
};

// How a rejected problem maps onto cuBLAS's status codes (error.hpp turns it into cublasStatus_t).
enum class rejection_kind {
  no_device,      // -> fp8::cuda_error (cudaErrorNoDevice)
  invalid_value,  // -> CUBLAS_STATUS_INVALID_VALUE: the arguments are inconsistent
  not_supported,  // -> CUBLAS_STATUS_NOT_SUPPORTED: consistent, but cuBLASLt has no such kernel
  arch_mismatch,  // -> CUBLAS_STATUS_ARCH_MISMATCH: the GPU is too old for it
};

// Why a problem cannot run: `cause` is a sentence a user can act on.
struct rejection {
  rejection_kind kind;
  std::string cause;
};

// What cuBLASLt requires of FP8 products: K a multiple of 16, and every matrix pointer and
// leading dimension (in bytes) a multiple of 16. M and N (tokens) are free with tensorwise and
// row-wise scales: a decode step of one token is a valid product. The 128-element and 128x128
// block scale modes need M and N multiples of 4.
inline constexpr std::int64_t fp8_k_multiple = 16;
inline constexpr std::uintptr_t fp8_pointer_alignment = 16;
inline constexpr std::int64_t fp8_ld_bytes_multiple = 16;
// The GELU aux matrix's leading dimension must be a multiple of 8 elements (cuBLASLt's rule).
inline constexpr std::int64_t aux_ld_multiple = 8;
// cuBLAS 12.9 (CUDA 12.9) brought the row-wise (OUTER_VEC_32F) and 128-block (VEC128_32F,
// BLK128x128_32F) scale modes: both the headers and the loaded library must be at least this.
inline constexpr std::size_t scale_modes_min_version = 120900;

// "12.9.0" for 120900.
inline std::string version_text(std::size_t version) {
  if (version == 0) return "unknown";
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}
// The D scale and amax floats need only their own alignment (an amax 4 bytes past a 16-byte boundary
// ran on an H100; test_cublaslt_gemm runs every FP8-output product again with the D scale there). An
// operand's tensorwise inverse scale needs 16 bytes: cuBLASLt 13.1 on an H100 took a product whose A or B
// scale sat 4 bytes past such a boundary through the heuristic and then refused it in every candidate
// algorithm (CUBLAS_STATUS_NOT_SUPPORTED), measured with split accumulation.
inline constexpr std::uintptr_t scalar_alignment = alignof(float);
inline constexpr std::uintptr_t tensorwise_scale_alignment = 16;

namespace detail {

inline std::string hex_address(const void* pointer) {
  std::ostringstream out;
  out << "0x" << std::hex << reinterpret_cast<std::uintptr_t>(pointer);
  return out.str();
}
using fp8::detail::is_aligned;  // the quantize layer's test, one copy for host, device and wrapper
inline std::string compute_capability(const device_info& device) {
  return "sm_" + std::to_string(device.major) + std::to_string(device.minor) +
         (device.name.empty() ? "" : " (" + device.name + ")");
}
// Hopper (9.x) is the only family whose cuBLASLt has the row-wise and 128-block scale modes.
inline bool is_hopper(const device_info& device) { return device.major == 9; }
// Ada (8.9), Hopper (9.x) and Blackwell GeForce (12.x) take FP8 operands only as "TN".
inline bool needs_tn_layout(const device_info& device) {
  return (device.major == 8 && device.minor == 9) || device.major == 9 || device.major == 12;
}

inline std::optional<rejection> reject(rejection_kind kind, std::string cause) {
  return rejection{kind, std::move(cause)};
}

inline std::optional<rejection> check_scale_pointer(const char* operand, const input_matrix& matrix) {
  if (!is_fp8(matrix.type)) {
    if (matrix.scale_inv != nullptr || matrix.scaling != scale_mode::tensorwise) {
      return reject(rejection_kind::invalid_value,
                    std::string("operand ") + operand + " is " + name(matrix.type) +
                        ": only FP8 operands take scales (scale_inv must be null and scaling tensorwise)");
    }
    return std::nullopt;
  }
  if (matrix.scaling != scale_mode::tensorwise && matrix.scale_inv == nullptr) {
    return reject(rejection_kind::invalid_value, std::string("operand ") + operand + " uses " +
                                                     name(matrix.scaling) +
                                                     " but its scale_inv pointer is null");
  }
  const std::uintptr_t alignment =
      matrix.scaling == scale_mode::tensorwise ? tensorwise_scale_alignment : fp8_pointer_alignment;
  if (!is_aligned(matrix.scale_inv, alignment)) {
    return reject(rejection_kind::invalid_value,
                  std::string("misaligned pointer: the scale_inv of operand ") + operand + " is at " +
                      hex_address(matrix.scale_inv) + ", " + name(matrix.scaling) + " scales need " +
                      std::to_string(alignment) + "-byte alignment");
  }
  return std::nullopt;
}

inline bool block_scaled(scale_mode mode) {
  return mode == scale_mode::block_1x128 || mode == scale_mode::block_128x128;
}

}  // namespace detail

// Why the row-wise and block scale modes cannot be used with these cuBLASLt versions (headers the
// wrapper was compiled with, library loaded at run time), or nothing when both are new enough.
inline std::optional<rejection> find_version_rejection(const gemm_problem& problem,
                                                       std::size_t header_version,
                                                       std::size_t loaded_version) {
  if (problem.a.scaling == scale_mode::tensorwise && problem.b.scaling == scale_mode::tensorwise)
    return std::nullopt;
  const std::string modes = std::string(name(problem.a.scaling)) + " x " + name(problem.b.scaling);
  if (header_version < scale_modes_min_version) {
    return detail::reject(rejection_kind::not_supported,
                          "the scale modes " + modes + " need cuBLAS " +
                              version_text(scale_modes_min_version) +
                              " or newer; this program was compiled against cuBLAS headers " +
                              version_text(header_version) + " (CUBLAS_VERSION): rebuild with CUDA 12.9+");
  }
  if (loaded_version < scale_modes_min_version) {
    return detail::reject(
        rejection_kind::not_supported,
        "the scale modes " + modes + " need cuBLASLt " + version_text(scale_modes_min_version) +
            " or newer at run time; the loaded libcublasLt is " + version_text(loaded_version) +
            " (cublasLtGetVersion()): put a CUDA 12.9+ libcublasLt on the library path");
  }
  return std::nullopt;
}

// Whether fast accumulation is on for this problem once `by_purpose` is resolved.
inline bool uses_fast_accumulation(const gemm_problem& problem) noexcept {
  const bool block_scaled =
      detail::block_scaled(problem.a.scaling) || detail::block_scaled(problem.b.scaling);
  switch (problem.options.fast_accum) {
    case fast_accumulation::on: return true;
    case fast_accumulation::off: return false;
    case fast_accumulation::by_purpose:
      return problem.options.purpose == gemm_purpose::forward && !block_scaled;
  }
  return false;
}

// The bias element type cuBLASLt pairs with this product when the caller names none (cublasLt.h,
// CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE and BIAS_POINTER):
//  - a bias that is read (bias, gelu_bias, gelu_aux_bias): the output type, except FP8 products
//    into FP32, which take bf16;
//  - a bias gradient that is written (dgelu_bias_gradient, bias_gradient_b): C's type, which is the
//    output type for non-FP8 outputs (FP32 beside FP8 inputs and an FP32 output, not bf16);
//  - beside an FP8 output, bf16 (C and bias share the type), or fp16 when the epilogue writes or
//    reads a GELU aux matrix, whose only 16-bit type beside an FP8 output is fp16.
constexpr data_type default_bias_type(const gemm_problem& problem) noexcept {
  const epilogue kind = problem.options.epilogue_kind;
  if (is_fp8(problem.d.type)) return uses_aux(kind) ? data_type::fp16 : data_type::bf16;
  if (is_fp8(problem.a.type) && problem.d.type == data_type::fp32 && !writes_bias_gradient(kind)) {
    return data_type::bf16;
  }
  return problem.d.type;
}
constexpr data_type bias_type_of(const gemm_problem& problem) noexcept {
  return problem.options.bias_type ? *problem.options.bias_type : default_bias_type(problem);
}
// The type of the GELU aux matrix: as named, else the output type (cuBLASLt's default), or fp16
// beside an FP8 output (which takes an fp16 or, beside E4M3, an E4M3 aux; never bf16).
constexpr data_type aux_type_of(const gemm_problem& problem) noexcept {
  if (problem.options.aux_type) return *problem.options.aux_type;
  return is_fp8(problem.d.type) ? data_type::fp16 : problem.d.type;
}
// C's type: as named, else the output type, or the bias type beside an FP8 output (cuBLASLt pairs
// an FP8 D with a bf16 or fp16 C). It is part of the kernel's signature even when C is not read.
constexpr data_type c_type_of(const gemm_problem& problem) noexcept {
  if (problem.c.type) return *problem.c.type;
  return is_fp8(problem.d.type) ? bias_type_of(problem) : problem.d.type;
}
// Whether C is passed to cuBLASLt: only when it is read (beta != 0). With beta = 0 the wrapper
// passes a null C, so no pointer is ever described by two layouts.
constexpr bool reads_c(const gemm_problem& problem) noexcept { return problem.options.beta != 0.0f; }

// C of D = alpha·AB + beta·C: present exactly when beta != 0, with a layout of its own.
inline std::optional<rejection> find_c_rejection(const gemm_problem& problem) {
  using detail::reject;
  const accumulator_matrix& c = problem.c;
  const output_matrix& d = problem.d;
  if (!reads_c(problem)) {
    if (c.data != nullptr) {
      return reject(rejection_kind::invalid_value,
                    "a C pointer was given but beta is 0: C is read only when beta != 0 (set options.beta, "
                    "e.g. 1 to accumulate into C, or leave c.data null)");
    }
    return std::nullopt;
  }
  if (c.data == nullptr) {
    return reject(rejection_kind::invalid_value,
                  "beta != 0 but C is null: D = alpha·AB + beta·C needs c.data (it may be D's pointer "
                  "when C has D's type and leading dimension)");
  }
  if (c.ld < problem.m) {
    return reject(rejection_kind::invalid_value,
                  "ldc = " + std::to_string(c.ld) + " is smaller than m = " + std::to_string(problem.m));
  }
  const data_type c_type = c_type_of(problem);
  if (c.data == d.data && (c_type != d.type || c.ld != d.ld)) {
    return reject(rejection_kind::invalid_value,
                  std::string("C and D share one pointer with different layouts (C ") + name(c_type) +
                      ", ld " + std::to_string(c.ld) + "; D " + name(d.type) + ", ld " +
                      std::to_string(d.ld) +
                      "): cuBLASLt refuses that; accumulate in place only with C of D's type and ld, or give "
                      "C its own buffer");
  }
  if (is_fp8(d.type) ? !(c_type == data_type::bf16 || c_type == data_type::fp16) : c_type != d.type) {
    return reject(rejection_kind::not_supported,
                  std::string("a ") + name(c_type) + " C does not go with a " + name(d.type) +
                      " output: C has D's type, or bf16 / fp16 beside an FP8 D");
  }
  return std::nullopt;
}

// A strided batch: positive count, strides that keep the matrices apart, FP8 strides in 16 bytes.
inline std::optional<rejection> find_batch_rejection(const gemm_problem& problem) {
  using detail::reject;
  const batch_layout& batch = problem.batch;
  if (batch.count < 1) {
    return reject(rejection_kind::invalid_value,
                  "batch count must be >= 1; got " + std::to_string(batch.count));
  }
  // cuBLASLt's batch count is an int32_t layout attribute.
  if (batch.count > std::numeric_limits<std::int32_t>::max()) {
    return reject(rejection_kind::invalid_value,
                  "batch count must be at most 2147483647 (cuBLASLt's int32 batch count); got " +
                      std::to_string(batch.count));
  }
  if (batch.count == 1) return std::nullopt;
  const std::int64_t c_extent = reads_c(problem) ? problem.c.ld * problem.n : 0;
  const std::tuple<const char*, std::int64_t, std::int64_t, std::size_t> strides[] = {
      {"stride_a", batch.stride_a, problem.a.ld * stored_cols_a(problem), element_bytes(problem.a.type)},
      {"stride_b", batch.stride_b, problem.b.ld * stored_cols_b(problem), element_bytes(problem.b.type)},
      {"stride_c", reads_c(problem) ? batch.stride_c : 0, c_extent, element_bytes(c_type_of(problem))},
      {"stride_d", batch.stride_d, problem.d.ld * problem.n, element_bytes(problem.d.type)}};
  for (const auto& [which, stride, extent, bytes] : strides) {
    if (stride < extent) {
      return reject(rejection_kind::invalid_value, std::string(which) + " = " + std::to_string(stride) +
                                                       " elements is smaller than one matrix (" +
                                                       std::to_string(extent) +
                                                       "): the batch's matrices would overlap");
    }
    if (is_fp8(problem.a.type) && (stride * std::int64_t(bytes)) % fp8_ld_bytes_multiple) {
      return reject(rejection_kind::invalid_value,
                    std::string(which) + " spans " + std::to_string(stride * std::int64_t(bytes)) +
                        " bytes: the matrices of an FP8 batch must start 16-byte aligned");
    }
  }
  if (uses_aux(problem.options.epilogue_kind) || needs_bias_pointer(problem.options.epilogue_kind)) {
    return reject(rejection_kind::not_supported,
                  std::string("the ") + name(problem.options.epilogue_kind) +
                      " epilogue is not batched by this wrapper: use batch count 1");
  }
  if (problem.d.amax != nullptr) {
    return reject(rejection_kind::not_supported,
                  "an amax output with a batch would hold the amax of all matrices: use batch count 1");
  }
  return std::nullopt;
}

// Bias, bias-gradient and aux pointers, types and leading dimensions of the epilogue.
inline std::optional<rejection> find_epilogue_rejection(const gemm_problem& problem) {
  using detail::reject;
  const gemm_options& options = problem.options;
  const epilogue kind = options.epilogue_kind;
  const output_matrix& d = problem.d;
  // cuBLASLt's two rules for BGRADB (its log, 13.1 on sm_90), checked here so that the refusal names
  // them instead of an empty heuristic: FP8's TN layout can satisfy neither.
  if (kind == epilogue::bias_gradient_b) {
    if (is_fp8(problem.a.type) || is_fp8(problem.b.type)) {
      return reject(
          rejection_kind::not_supported,
          "epilogue bias_gradient_b takes f16, bf16 or f32 operands, not FP8 (cuBLASLt has no FP8 "
          "kernel with it): sum the gradient's columns separately, as fp8::cuda::linear_layer does");
    }
    if (problem.op_b != operation::transpose) {
      return reject(rejection_kind::not_supported,
                    "epilogue bias_gradient_b needs op_b = transpose (cuBLASLt sums op(B) only when B is "
                    "transposed): store B the other way round");
    }
  }
  if (needs_bias_pointer(kind)) {
    if (options.bias == nullptr) {
      return reject(rejection_kind::invalid_value,
                    std::string("epilogue ") + name(kind) +
                        (writes_bias_gradient(kind) ? " writes a bias gradient of " : " reads a bias of ") +
                        std::to_string(bias_length(kind, problem.m, problem.n)) +
                        " elements: it needs a bias pointer");
    }
    const data_type bias = bias_type_of(problem);
    const char* what = writes_bias_gradient(kind) ? " bias gradient" : " bias";
    if (is_fp8(d.type)) {
      if (!(bias == data_type::bf16 || bias == data_type::fp16)) {
        return reject(
            rejection_kind::not_supported,
            std::string("a ") + name(bias) + what + " does not go with an FP8 output (use bf16 or fp16)");
      }
      if (c_type_of(problem) != bias) {
        return reject(
            rejection_kind::not_supported,
            std::string("a ") + name(bias) + what + " beside a " + name(c_type_of(problem)) +
                " C: beside an FP8 output cuBLASLt takes C and the bias in one type (bf16 or fp16)");
      }
    } else if (bias != default_bias_type(problem)) {
      return reject(
          rejection_kind::not_supported,
          std::string("a ") + name(bias) + what + " does not go with a " + name(d.type) + " output (use " +
              name(default_bias_type(problem)) +
              (writes_bias_gradient(kind) ? ": a bias gradient has C's type, cuBLASLt's rule)" : ")"));
    }
    if (!detail::is_aligned(options.bias, fp8_pointer_alignment)) {
      return reject(rejection_kind::invalid_value, "misaligned pointers: the bias is at " +
                                                       detail::hex_address(options.bias) +
                                                       ", it needs 16-byte alignment");
    }
  } else if (options.bias != nullptr) {
    return reject(rejection_kind::invalid_value,
                  std::string("a bias pointer was given but epilogue ") + name(kind) +
                      " adds no bias (use epilogue::bias or epilogue::gelu_bias)");
  }
  if (uses_aux(kind)) {
    if (options.aux == nullptr) {
      return reject(rejection_kind::invalid_value,
                    std::string("epilogue ") + name(kind) +
                        " needs the aux matrix (the GELU input, m x n): options.aux is null");
    }
    if (options.aux_ld < problem.m || options.aux_ld % aux_ld_multiple) {
      return reject(rejection_kind::invalid_value, "aux_ld = " + std::to_string(options.aux_ld) +
                                                       ": the GELU aux matrix needs a leading "
                                                       "dimension >= m = " +
                                                       std::to_string(problem.m) + " and a multiple of 8");
    }
    if (!detail::is_aligned(options.aux, fp8_pointer_alignment)) {
      return reject(rejection_kind::invalid_value, "misaligned pointers: the aux matrix is at " +
                                                       detail::hex_address(options.aux) +
                                                       ", it needs 16-byte alignment");
    }
    // cuBLASLt writes (reads) the GELU input in the output's type; beside an FP8 output in fp16, or
    // in E4M3 beside an E4M3 output (cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE).
    const data_type aux = aux_type_of(problem);
    const bool aux_ok =
        is_fp8(d.type) ? aux == data_type::fp16 || (aux == data_type::e4m3 && d.type == aux) : aux == d.type;
    if (!aux_ok) {
      return reject(rejection_kind::not_supported,
                    std::string("a ") + name(aux) + " aux matrix does not go with a " + name(d.type) +
                        " output: the GELU aux has the output's type (fp16, or e4m3 beside an e4m3 output, "
                        "beside an FP8 output)");
    }
  } else if (options.aux != nullptr) {
    return reject(rejection_kind::invalid_value, std::string("an aux pointer was given but epilogue ") +
                                                     name(kind) + " uses none (gelu_aux*, dgelu* do)");
  }
  return std::nullopt;
}

// Every reason cuBLASLt would refuse `problem` on `device` (or run it wrongly), checked up front.
// Leading dimensions of 0 are taken as packed. Returns nothing when the problem can go ahead.
inline std::optional<rejection> find_rejection(const gemm_problem& unresolved, const device_info& device) {
  using detail::reject;
  const gemm_problem problem = with_packed_leading_dimensions(unresolved);
  const auto& a = problem.a;
  const auto& b = problem.b;
  const auto& d = problem.d;
  const auto& options = problem.options;
  const bool fp8_inputs = is_fp8(a.type) || is_fp8(b.type);

  if (device.device_count <= 0) {
    return reject(rejection_kind::no_device,
                  "no CUDA device: cuBLASLt needs an NVIDIA GPU (FP8 products need compute capability 8.9+)");
  }

  // Shapes and pointers.
  if (problem.m <= 0 || problem.n <= 0 || problem.k <= 0) {
    return reject(rejection_kind::invalid_value, "m, n and k must be positive");
  }
  if (a.data == nullptr || b.data == nullptr || d.data == nullptr) {
    return reject(rejection_kind::invalid_value, "a data pointer of A, B or D is null");
  }
  if (a.ld < stored_rows_a(problem) || b.ld < stored_rows_b(problem) || d.ld < problem.m) {
    return reject(rejection_kind::invalid_value,
                  "a leading dimension is smaller than the stored rows of its matrix (column-major: "
                  "lda >= " +
                      std::to_string(stored_rows_a(problem)) + ", ldb >= " +
                      std::to_string(stored_rows_b(problem)) + ", ldd >= " + std::to_string(problem.m) + ")");
  }

  // Types.
  if (fp8_inputs) {
    if (!is_fp8(a.type) || !is_fp8(b.type)) {
      return reject(rejection_kind::not_supported, std::string("mixed operand types ") + name(a.type) +
                                                       " x " + name(b.type) +
                                                       ": an FP8 product needs both operands in FP8");
    }
    if (a.type == data_type::e5m2 && b.type == data_type::e5m2) {
      return reject(rejection_kind::not_supported,
                    "E5M2xE5M2 is not supported by cuBLASLt: keep one operand in E4M3 (the HYBRID "
                    "recipe quantizes gradients to E5M2 and weights/activations to E4M3)");
    }
    if (d.type == data_type::e5m2 && a.type == data_type::e4m3 && b.type == data_type::e4m3) {
      return reject(rejection_kind::not_supported,
                    "E4M3xE4M3 products cannot write an E5M2 output: use E4M3, bf16, fp16 or fp32");
    }
  } else {
    if (a.type != b.type) {
      return reject(rejection_kind::not_supported, std::string("operand types ") + name(a.type) + " x " +
                                                       name(b.type) +
                                                       " differ: non-FP8 products need equal types");
    }
    const bool output_ok = d.type == a.type || d.type == data_type::fp32;
    if (!output_ok) {
      return reject(rejection_kind::not_supported, std::string(name(a.type)) + " products write " +
                                                       name(a.type) + " or fp32, not " + name(d.type));
    }
  }

  // The GPU.
  if (fp8_inputs && (device.major < 8 || (device.major == 8 && device.minor < 9))) {
    return reject(rejection_kind::arch_mismatch,
                  "a GPU older than sm_89: FP8 tensor cores need Ada (sm_89) or newer, this device is " +
                      detail::compute_capability(device));
  }

  if (fp8_inputs) {
    // Layout.
    if (detail::needs_tn_layout(device) &&
        (problem.op_a != operation::transpose || problem.op_b != operation::none)) {
      return reject(rejection_kind::not_supported,
                    "FP8 operands must be in the TN layout (op_a = transpose, op_b = none) on " +
                        detail::compute_capability(device) +
                        "; for a row-major Y = X·Wᵀ call fp8::cublaslt::linear, and keep transposed "
                        "FP8 copies (fused cast + transpose) for the backward pass");
    }
    // K, leading dimensions (in bytes) and pointers, as cuBLASLt requires them of FP8 products.
    if (problem.k % fp8_k_multiple) {
      return reject(rejection_kind::invalid_value,
                    "k = " + std::to_string(problem.k) +
                        " is not a multiple of 16: FP8 products need the reduced dimension K divisible by 16 "
                        "(pad the input features; M and N, e.g. the token count, may be anything)");
    }
    const std::int64_t c_bytes = std::int64_t(element_bytes(c_type_of(problem)));
    const std::pair<const char*, std::int64_t> lds[] = {
        {"lda", a.ld * std::int64_t(element_bytes(a.type))},
        {"ldb", b.ld * std::int64_t(element_bytes(b.type))},
        {"ldd", d.ld * std::int64_t(element_bytes(d.type))},
        {"ldc", reads_c(problem) ? problem.c.ld * c_bytes : 0}};
    for (const auto& [which, bytes] : lds) {
      if (bytes % fp8_ld_bytes_multiple) {
        return reject(rejection_kind::invalid_value,
                      std::string("leading dimension not 16-byte aligned: ") + which + " spans " +
                          std::to_string(bytes) +
                          " bytes; FP8 products need lda, ldb, ldc and ldd to be "
                          "multiples of 16 bytes (16 FP8, 8 bf16/fp16 or 4 fp32 elements)");
      }
    }
    const std::pair<const char*, const void*> pointers[] = {
        {"A", a.data}, {"B", b.data}, {"D", d.data}, {"C", reads_c(problem) ? problem.c.data : nullptr}};
    for (const auto& [which, pointer] : pointers) {
      if (!detail::is_aligned(pointer, fp8_pointer_alignment)) {
        return reject(rejection_kind::invalid_value, std::string("misaligned pointers: ") + which +
                                                         " is at " + detail::hex_address(pointer) +
                                                         ", FP8 products need 16-byte aligned data");
      }
    }
  }

  // C: read only when beta != 0, never passed otherwise.
  if (auto why = find_c_rejection(problem)) return why;
  // Strided batches.
  if (auto why = find_batch_rejection(problem)) return why;

  // Input scales.
  if (auto problem_a = detail::check_scale_pointer("A", a)) return problem_a;
  if (auto problem_b = detail::check_scale_pointer("B", b)) return problem_b;
  if (fp8_inputs) {
    const scale_mode sa = a.scaling;
    const scale_mode sb = b.scaling;
    const bool both_tensorwise = sa == scale_mode::tensorwise && sb == scale_mode::tensorwise;
    if (!both_tensorwise) {
      if (auto why =
              find_version_rejection(problem, device.cublaslt_header_version, device.cublaslt_version)) {
        return why;
      }
      if (!detail::is_hopper(device)) {
        return reject(rejection_kind::not_supported,
                      std::string("the scale modes ") + name(sa) + " x " + name(sb) +
                          " exist only on Hopper (sm_90) in cuBLASLt; this device is " +
                          detail::compute_capability(device) + ": use tensorwise scales");
      }
      const bool valid_pair = (sa == scale_mode::row_wise && sb == scale_mode::row_wise) ||
                              (sa == scale_mode::block_1x128 && sb == scale_mode::block_1x128) ||
                              (sa == scale_mode::block_1x128 && sb == scale_mode::block_128x128) ||
                              (sa == scale_mode::block_128x128 && sb == scale_mode::block_1x128);
      if (!valid_pair) {
        std::string cause = std::string("an unsupported scale-mode pair ") + name(sa) + " x " + name(sb) +
                            ": cuBLASLt pairs row_wise with row_wise, and block_1x128 with block_1x128 "
                            "or block_128x128";
        if (sa == scale_mode::block_128x128 && sb == scale_mode::block_128x128) {
          cause +=
              " (2D x 2D block scaling is rejected: quantize one operand, usually the "
              "activations, in 1x128 blocks)";
        }
        return reject(rejection_kind::not_supported, cause);
      }
      if (is_fp8(d.type)) {
        return reject(rejection_kind::not_supported,
                      std::string("row-wise and block scale modes write bf16, fp16 or fp32 outputs, not ") +
                          name(d.type));
      }
      if (options.epilogue_kind != epilogue::none && options.epilogue_kind != epilogue::bias) {
        return reject(rejection_kind::not_supported,
                      std::string("the ") + name(options.epilogue_kind) +
                          " epilogue (GELU, its gradients and bias gradients) is available with tensorwise "
                          "scales only; row-wise and block scale modes take the bias epilogue or none");
      }
      if (problem.batch.count != 1) {
        return reject(rejection_kind::not_supported,
                      "row-wise and block scales are not batched by this wrapper: batch count must be 1 "
                      "(one scale tensor describes one matrix)");
      }
      const bool block = sa != scale_mode::row_wise;
      if (block && (problem.m % block_scale_row_padding || problem.n % block_scale_row_padding)) {
        return reject(rejection_kind::not_supported,
                      "m = " + std::to_string(problem.m) + ", n = " + std::to_string(problem.n) +
                          ": the scale modes " + name(sa) + " x " + name(sb) +
                          " need m and n multiples of 4 (cuBLASLt's rule for 128-element and 128x128 block "
                          "scales); pad the token count to a multiple of 4, or use row_wise or tensorwise "
                          "scales for this product");
      }
      if (block && options.fast_accum == fast_accumulation::on) {
        return reject(rejection_kind::invalid_value,
                      "fast accumulation must be off with block scaling (leave fast_accum as by_purpose "
                      "or set it to off)");
      }
    }
  } else if (options.fast_accum == fast_accumulation::on) {
    return reject(rejection_kind::invalid_value, "fast accumulation applies to FP8 products only");
  }

  // Output scale and amax.
  if ((d.scale != nullptr || d.amax != nullptr) && !is_fp8(d.type)) {
    return reject(rejection_kind::invalid_value,
                  std::string("a D scale and an amax output need an FP8 output; D is ") + name(d.type) +
                      " (cuBLASLt computes amax only when it casts D to FP8)");
  }
  if (!detail::is_aligned(d.scale, scalar_alignment) || !detail::is_aligned(d.amax, scalar_alignment)) {
    return reject(rejection_kind::invalid_value,
                  "misaligned pointers: the D scale or amax is not float-aligned");
  }
  if (is_fp8(d.type) && !fp8_inputs) {
    return reject(rejection_kind::not_supported, "FP8 outputs need FP8 operands");
  }

  // Epilogue.
  if (auto why = find_epilogue_rejection(problem)) return why;
  return std::nullopt;
}

// A grouped product (problems of different shapes, e.g. one per expert of a mixture-of-experts
// layer) is checked whole before any of it runs: the first problem that cannot run, with its index.
struct group_rejection {
  std::size_t index;
  rejection why;
};
template <class Problems>
std::optional<group_rejection> find_group_rejection(const Problems& problems, const device_info& device) {
  std::size_t index = 0;
  for (const gemm_problem& problem : problems) {
    if (auto why = find_rejection(problem, device)) return group_rejection{index, std::move(*why)};
    // cuBLASLt overwrites an amax: two members writing one slot would keep only the last one's.
    std::size_t earlier = 0;
    for (const gemm_problem& other : problems) {
      if (earlier == index) break;
      if (problem.d.amax != nullptr && other.d.amax == problem.d.amax) {
        return group_rejection{index,
                               {rejection_kind::invalid_value,
                                "members " + std::to_string(earlier) + " and " + std::to_string(index) +
                                    " share one amax slot: cuBLASLt overwrites an amax (it does not "
                                    "take the maximum), so give each member its own slot"}};
      }
      ++earlier;
    }
    ++index;
  }
  return std::nullopt;
}

}  // namespace fp8::cublaslt

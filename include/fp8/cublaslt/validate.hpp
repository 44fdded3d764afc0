// The checks the cuBLASLt wrapper runs before every call, as pure functions of a problem and a
// device description, so that each rejected case is tested on machines without a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "problem.hpp"

namespace fp8::cublaslt {

// The GPU a problem is meant for (what cudaGetDeviceCount / cudaGetDeviceProperties report).
struct device_info {
  int device_count = 0;
  int ordinal = 0;
  int major = 0;  // compute capability, e.g. 9.0 for H100 / H200
  int minor = 0;
  std::string name{};
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

// Shapes and pointers of FP8 products must be multiples of 16 elements / bytes.
inline constexpr std::int64_t fp8_dimension_multiple = 16;
inline constexpr std::uintptr_t fp8_pointer_alignment = 16;
// One scale or amax float needs only its own alignment.
inline constexpr std::uintptr_t scalar_alignment = alignof(float);

namespace detail {

inline std::string hex_address(const void* pointer) {
  std::ostringstream out;
  out << "0x" << std::hex << reinterpret_cast<std::uintptr_t>(pointer);
  return out.str();
}
inline bool is_aligned(const void* pointer, std::uintptr_t alignment) {
  return reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0;
}
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
    return reject(rejection_kind::invalid_value,
                  std::string("operand ") + operand + " uses " + name(matrix.scaling) +
                      " but its scale_inv pointer is null");
  }
  const std::uintptr_t alignment =
      matrix.scaling == scale_mode::tensorwise ? scalar_alignment : fp8_pointer_alignment;
  if (!is_aligned(matrix.scale_inv, alignment)) {
    return reject(rejection_kind::invalid_value,
                  std::string("misaligned pointer: the scale_inv of operand ") + operand + " is at " +
                      hex_address(matrix.scale_inv) + ", " + name(matrix.scaling) + " scales need " +
                      std::to_string(alignment) + "-byte alignment");
  }
  return std::nullopt;
}

}  // namespace detail

// Whether fast accumulation is on for this problem once `by_purpose` is resolved.
constexpr bool uses_fast_accumulation(const gemm_problem& problem) noexcept {
  const bool block_scaled = problem.a.scaling == scale_mode::block_1x128 ||
                            problem.a.scaling == scale_mode::block_128x128 ||
                            problem.b.scaling == scale_mode::block_1x128 ||
                            problem.b.scaling == scale_mode::block_128x128;
  switch (problem.options.fast_accum) {
    case fast_accumulation::on: return true;
    case fast_accumulation::off: return false;
    case fast_accumulation::by_purpose:
      return problem.options.purpose == gemm_purpose::forward && !block_scaled;
  }
  return false;
}

// The bias element type cuBLASLt pairs with this product when the caller names none:
// the output type, except FP8 products into FP32 or FP8, which take a bf16 bias.
constexpr data_type default_bias_type(const gemm_problem& problem) noexcept {
  if (is_fp8(problem.a.type) && (problem.d.type == data_type::fp32 || is_fp8(problem.d.type))) {
    return data_type::bf16;
  }
  return problem.d.type;
}
constexpr data_type bias_type_of(const gemm_problem& problem) noexcept {
  return problem.options.bias_type ? *problem.options.bias_type : default_bias_type(problem);
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
                  "lda >= " + std::to_string(stored_rows_a(problem)) + ", ldb >= " +
                      std::to_string(stored_rows_b(problem)) + ", ldd >= " + std::to_string(problem.m) + ")");
  }

  // Types.
  if (fp8_inputs) {
    if (!is_fp8(a.type) || !is_fp8(b.type)) {
      return reject(rejection_kind::not_supported,
                    std::string("mixed operand types ") + name(a.type) + " x " + name(b.type) +
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
      return reject(rejection_kind::not_supported,
                    std::string("operand types ") + name(a.type) + " x " + name(b.type) +
                        " differ: non-FP8 products need equal types");
    }
    const bool output_ok = d.type == a.type || d.type == data_type::fp32;
    if (!output_ok) {
      return reject(rejection_kind::not_supported,
                    std::string(name(a.type)) + " products write " + name(a.type) + " or fp32, not " +
                        name(d.type));
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
    // Multiples of 16.
    const std::int64_t multiple = fp8_dimension_multiple;
    if (problem.m % multiple || problem.n % multiple || problem.k % multiple) {
      return reject(rejection_kind::invalid_value,
                    "dims not multiples of 16: FP8 products need m, n and k divisible by 16 (pad the "
                    "tensors, e.g. the token count, to a multiple of 16)");
    }
    if (a.ld % multiple || b.ld % multiple || d.ld % multiple) {
      return reject(rejection_kind::invalid_value,
                    "leading dimensions not multiples of 16: FP8 products need lda, ldb and ldd "
                    "divisible by 16");
    }
    const std::pair<const char*, const void*> pointers[] = {{"A", a.data}, {"B", b.data}, {"D", d.data}};
    for (const auto& [which, pointer] : pointers) {
      if (!detail::is_aligned(pointer, fp8_pointer_alignment)) {
        return reject(rejection_kind::invalid_value,
                      std::string("misaligned pointers: ") + which + " is at " +
                          detail::hex_address(pointer) + ", FP8 products need 16-byte aligned data");
      }
    }
  }

  // Input scales.
  if (auto problem_a = detail::check_scale_pointer("A", a)) return problem_a;
  if (auto problem_b = detail::check_scale_pointer("B", b)) return problem_b;
  if (fp8_inputs) {
    const scale_mode sa = a.scaling;
    const scale_mode sb = b.scaling;
    const bool both_tensorwise = sa == scale_mode::tensorwise && sb == scale_mode::tensorwise;
    if (!both_tensorwise) {
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
          cause += " (2D x 2D block scaling is rejected: quantize one operand, usually the "
                   "activations, in 1x128 blocks)";
        }
        return reject(rejection_kind::not_supported, cause);
      }
      if (is_fp8(d.type)) {
        return reject(rejection_kind::not_supported,
                      std::string("row-wise and block scale modes write bf16, fp16 or fp32 outputs, not ") +
                          name(d.type));
      }
      if (options.epilogue_kind == epilogue::gelu || options.epilogue_kind == epilogue::gelu_bias) {
        return reject(rejection_kind::not_supported,
                      "GELU epilogues are available with tensorwise scales only; row-wise and block "
                      "scale modes take the bias epilogue or none");
      }
      const bool block = sa != scale_mode::row_wise;
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
    return reject(rejection_kind::invalid_value, "misaligned pointers: the D scale or amax is not float-aligned");
  }
  if (is_fp8(d.type) && !fp8_inputs) {
    return reject(rejection_kind::not_supported, "FP8 outputs need FP8 operands");
  }

  // Epilogue.
  if (uses_bias(options.epilogue_kind)) {
    if (options.bias == nullptr) {
      return reject(rejection_kind::invalid_value,
                    std::string("epilogue ") + name(options.epilogue_kind) + " needs a bias pointer");
    }
    const data_type bias = bias_type_of(problem);
    bool bias_ok = bias == default_bias_type(problem);
    if (is_fp8(d.type)) bias_ok = bias == data_type::bf16 || bias == data_type::fp16;
    if (!bias_ok) {
      return reject(rejection_kind::not_supported,
                    std::string("a ") + name(bias) + " bias does not go with a " + name(d.type) +
                        " output (use " + name(default_bias_type(problem)) + ")");
    }
    if (!detail::is_aligned(options.bias, fp8_pointer_alignment)) {
      return reject(rejection_kind::invalid_value,
                    "misaligned pointers: the bias is at " + detail::hex_address(options.bias) +
                        ", it needs 16-byte alignment");
    }
  } else if (options.bias != nullptr) {
    return reject(rejection_kind::invalid_value,
                  std::string("a bias pointer was given but epilogue ") + name(options.epilogue_kind) +
                      " adds no bias (use epilogue::bias or epilogue::gelu_bias)");
  }
  return std::nullopt;
}

}  // namespace fp8::cublaslt

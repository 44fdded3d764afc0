// fp8::cublas_error: a cuBLASLt call failed, or would have; its message names the call, the status,
// the product (shapes, types, scale modes) and the likely cause. Needs the CUDA toolkit headers.
#pragma once

#include <cublasLt.h>

#include <string>

#include "../cuda/error.hpp"
#include "../error.hpp"
#include "problem.hpp"
#include "validate.hpp"

namespace fp8 {

// what() reads, for example:
//   "fp8: cublasLtMatmul failed: CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not
//    supported) for D[m=4096, n=16] (...) = ...; likely cause: ...; set CUBLASLT_LOG_LEVEL=5 to see
//    why cuBLASLt rejected it (at fp8/cublaslt/handle.hpp:210)"
class cublas_error : public error {
 public:
  cublas_error(cublasStatus_t status, const std::string& call, const std::string& problem,
               const std::string& cause, const std::string& where = {})
      : error(format(status, call, problem, cause, where)), status_(status), call_(call) {}

  cublasStatus_t status() const noexcept { return status_; }
  const std::string& call() const noexcept { return call_; }

  static std::string format(cublasStatus_t status, const std::string& call, const std::string& problem,
                            const std::string& cause, const std::string& where) {
    std::string message =
        "fp8: " + call + " failed: " + status_name(status) + " (" + cublasLtGetStatusString(status) + ")";
    if (!problem.empty()) message += " for " + problem;
    if (!cause.empty()) message += "; likely cause: " + cause;
    message += "; set CUBLASLT_LOG_LEVEL=5 to see why cuBLASLt rejected it";
    if (!where.empty()) message += " (at " + where + ")";
    return message;
  }

  // The enumerator's name, e.g. "CUBLAS_STATUS_NOT_SUPPORTED".
  static std::string status_name(cublasStatus_t status) { return cublasLtGetStatusName(status); }

 private:
  cublasStatus_t status_;
  std::string call_;
};

namespace cublaslt {

constexpr cublasStatus_t status_of(rejection_kind kind) noexcept {
  switch (kind) {
    case rejection_kind::invalid_value: return CUBLAS_STATUS_INVALID_VALUE;
    case rejection_kind::not_supported: return CUBLAS_STATUS_NOT_SUPPORTED;
    case rejection_kind::arch_mismatch: return CUBLAS_STATUS_ARCH_MISMATCH;
    case rejection_kind::no_device: return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

// The name of the wrapper's checks in messages: nothing reached cuBLASLt yet.
inline constexpr const char* validation_call = "fp8::cublaslt::gemm (checked before cublasLtMatmul)";

// Throws the exception a rejected problem deserves: fp8::cuda_error (cudaErrorNoDevice) when there
// is no GPU, fp8::cublas_error with the status cuBLASLt would have returned otherwise.
[[noreturn]] inline void throw_rejection(const rejection& why, const gemm_problem& problem) {
  if (why.kind == rejection_kind::no_device) {
    throw cuda_error(cudaErrorNoDevice, validation_call, {}, why.cause);
  }
  throw cublas_error(status_of(why.kind), validation_call, describe(with_packed_leading_dimensions(problem)),
                     why.cause);
}

// Checks `problem` for `device` and throws as above when it cannot run.
inline void validate(const gemm_problem& problem, const device_info& device) {
  if (const auto why = find_rejection(problem, device)) throw_rejection(*why, problem);
}

// Checks every problem of a group; the message names the index of the first that cannot run.
template <class Problems>
void validate_group(const Problems& problems, const device_info& device) {
  if (auto found = find_group_rejection(problems, device)) {
    found->why.cause = "group member " + std::to_string(found->index) + ": " + found->why.cause;
    std::size_t index = 0;
    for (const gemm_problem& problem : problems) {
      if (index++ == found->index) throw_rejection(found->why, problem);
    }
  }
}

// The cause given when cuBLASLt refuses to set an attribute: which attribute, which value, and
// the library version (an attribute or value newer than the loaded cuBLASLt is the usual reason).
inline std::string attribute_refused_cause(const char* attribute, const std::string& value,
                                           std::size_t loaded_version) {
  return "cuBLASLt " + version_text(loaded_version) + " refused " + attribute + " = " + value +
         " (an attribute or value this cuBLASLt does not know, or one that contradicts another attribute)";
}

}  // namespace cublaslt
}  // namespace fp8

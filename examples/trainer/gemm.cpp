// gemm(): the precision policy applied to one product. FP8 modes are delegated to fp8_gemm.cpp.
#include "gemm.hpp"

#include <stdexcept>
#include <string>

#include "fp8_gemm.hpp"
#include "tensor.hpp"

namespace trainer {

void float_gemm(const gemm_matrix& a, const gemm_matrix& b, float* c, bool accumulate) {
  const int m = a.read_rows();
  const int n = b.read_rows();
  auto a_stored = as_matrix(a.data, a.rows, a.cols);
  auto b_stored = as_matrix(b.data, b.rows, b.cols);
  auto result = as_matrix(c, m, n);
  // Four layouts of the same product; Eigen picks a blocked kernel for each without copies.
  if (accumulate) {
    if (!a.transposed && !b.transposed) result.noalias() += a_stored * b_stored.transpose();
    if (!a.transposed && b.transposed) result.noalias() += a_stored * b_stored;
    if (a.transposed && !b.transposed) result.noalias() += a_stored.transpose() * b_stored.transpose();
    if (a.transposed && b.transposed) result.noalias() += a_stored.transpose() * b_stored;
  } else {
    if (!a.transposed && !b.transposed) result.noalias() = a_stored * b_stored.transpose();
    if (!a.transposed && b.transposed) result.noalias() = a_stored * b_stored;
    if (a.transposed && !b.transposed) result.noalias() = a_stored.transpose() * b_stored.transpose();
    if (a.transposed && b.transposed) result.noalias() = a_stored.transpose() * b_stored;
  }
}

void gemm(const gemm_call& call) {
  if (call.a.read_cols() != call.b.read_cols() || call.c == nullptr) {
    throw std::logic_error("gemm: A reads [" + std::to_string(call.a.read_rows()) + ", " +
                           std::to_string(call.a.read_cols()) + "] but B reads [" +
                           std::to_string(call.b.read_rows()) + ", " + std::to_string(call.b.read_cols()) +
                           "]: the contraction lengths differ");
  }
  switch (call.mode) {
    case gemm_mode::fp32:
    case gemm_mode::bf16: float_gemm(call.a, call.b, call.c, call.accumulate); break;
    case gemm_mode::fp8:
    case gemm_mode::fake_fp8: fp8_gemm(call); break;
  }
  if (call.out == storage::bf16) {
    round_to_bf16(call.c, std::size_t(call.a.read_rows()) * std::size_t(call.b.read_rows()));
  }
}

}  // namespace trainer

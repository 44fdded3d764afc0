// The one matrix-product function of the trainer: every GEMM (linear layers, attention) goes through
// gemm(), which applies the precision policy's mode (fp32, bf16, fp8 or fake fp8).
#pragma once

#include "precision.hpp"

namespace trainer {

struct operand_scaling;  // scaling_state.hpp: how an FP8 operand is scaled, and where amax goes

// A row-major matrix as a GEMM reads it. The stored matrix is [rows, cols]; with `transposed` the
// GEMM reads its transpose, [cols, rows] (as cuBLAS's op T). The contraction runs along the columns
// of what the GEMM reads.
struct gemm_matrix {
  const float* data = nullptr;
  int rows = 0;
  int cols = 0;
  bool transposed = false;

  int read_rows() const { return transposed ? cols : rows; }
  int read_cols() const { return transposed ? rows : cols; }
};

// C[M, N] = A[M, K] . B[N, K]^T  (or C += ... with `accumulate`), "TN" as on FP8 tensor cores.
struct gemm_call {
  gemm_mode mode = gemm_mode::fp32;
  gemm_matrix a;       // reads [M, K]
  gemm_matrix b;       // reads [N, K]
  float* c = nullptr;  // [M, N]
  bool accumulate = false;
  storage out = storage::fp32;  // the result is rounded to BF16 when out == storage::bf16
  // Read only in the fp8 and fake_fp8 modes.
  operand_scaling* a_scaling = nullptr;
  operand_scaling* b_scaling = nullptr;
};

// Runs the product. Throws std::logic_error on inconsistent shapes (a bug in the caller).
// In the bf16 mode the operands must already hold BF16 values (the storage policy ensures it), so
// products are exact in float and the only rounding is FP32 accumulation, as on tensor cores.
void gemm(const gemm_call& call);

// The float product itself, C (+)= A . B^T, for operands already in their final number format.
void float_gemm(const gemm_matrix& a, const gemm_matrix& b, float* c, bool accumulate);

}  // namespace trainer

// Row-major batched products mapped onto column-major cuBLAS.
//
// A row-major [R, C] matrix is the column-major [C, R] matrix with the same bytes. So the row-major
// C[M, N] = A_read[M, K] . B_read[N, K]^T is, column-major, C^T[N, M] = B_read . A_read^T: cuBLAS's
// first operand is B and its second is A.
//  - B_read [N, K] from B stored [N, K] (col-major [K, N], ld K): op T; from B stored [K, N] (read
//    transposed; col-major [N, K], ld N): op N. Either way ld = B's stored column count.
//  - A_read^T [K, M] from A stored [M, K] (col-major [K, M], ld K): op N; from A stored [K, M] (read
//    transposed; col-major [M, K], ld M): op T. Either way ld = A's stored column count.
//  - C^T col-major [N, M] with ld N is C row-major [M, N].
#include "batched_gemm.hpp"

#include <cuda_bf16.h>

#include <fp8/cuda/error.hpp>
#include <fp8/error.hpp>

namespace trainer::cuda {

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw fp8::error(std::string("fp8 trainer: ") + call + " failed: " + cublasGetStatusName(status) + " (" +
                   cublasGetStatusString(status) + ") at " + file + ":" + std::to_string(line));
}

cublas_handle::cublas_handle() { TRAINER_CUBLAS_CHECK(cublasCreate(&handle_)); }
cublas_handle::~cublas_handle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

void batched_gemm(cublasHandle_t handle, gemm_mode mode, const batched_operand& a, const batched_operand& b,
                  float* c, long long stride_c, int batch, cudaStream_t stream) {
  const std::string function = "trainer::cuda::batched_gemm";
  if (mode != gemm_mode::fp32 && mode != gemm_mode::bf16) {
    throw fp8::invalid_argument(function + ": attention's products run in fp32 or bf16, not " +
                                to_string(mode));
  }
  if (a.read_cols() != b.read_cols()) {
    throw fp8::invalid_argument(function + ": A reads [" + std::to_string(a.read_rows()) + ", " +
                                std::to_string(a.read_cols()) + "] but B reads [" +
                                std::to_string(b.read_rows()) + ", " + std::to_string(b.read_cols()) +
                                "]: the contraction lengths differ");
  }
  const int m = a.read_rows(), n = b.read_rows(), k = a.read_cols();
  if (m <= 0 || n <= 0 || k <= 0 || batch < 0 || a.data == nullptr || b.data == nullptr || c == nullptr) {
    throw fp8::invalid_argument(
        function + ": needs positive M, N, K, batch >= 0 and non-null operands (got M " + std::to_string(m) +
        ", N " + std::to_string(n) + ", K " + std::to_string(k) + ", batch " + std::to_string(batch) + ")");
  }
  if (batch == 0) return;
  const cudaDataType operand_type = mode == gemm_mode::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      mode == gemm_mode::bf16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
  const float alpha = 1.0f, beta = 0.0f;
  TRAINER_CUBLAS_CHECK(cublasSetStream(handle, stream));
  TRAINER_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, b.transposed ? CUBLAS_OP_N : CUBLAS_OP_T, a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
      &alpha, b.data, operand_type, b.cols, b.stride, a.data, operand_type, a.cols, a.stride, &beta, c,
      CUDA_R_32F, n, stride_c, batch, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace trainer::cuda

// Batched matrix products through cuBLAS for attention's scores and values (not linear layers: they
// never run in FP8). The operand convention is the CPU trainer's (../gemm.hpp): row-major matrices,
// C[M, N] = A[M, K] . B[N, K]^T with each operand optionally read transposed, here with a batch of
// such products at fixed strides.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "../precision.hpp"

namespace trainer::cuda {

// fp8::error for a failed cuBLAS call, naming the call and the status.
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);
#define TRAINER_CUBLAS_CHECK(call) ::trainer::cuda::check_cublas((call), #call, __FILE__, __LINE__)

// An owned cuBLAS handle.
class cublas_handle {
 public:
  cublas_handle();
  ~cublas_handle();
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
  cublasHandle_t get() const noexcept { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// One operand of every product of the batch: a row-major [rows, cols] matrix (read as its transpose
// [cols, rows] when `transposed`), matrix b of the batch at data + b * stride elements. The elements
// are float in gemm_mode::fp32 and __nv_bfloat16 in gemm_mode::bf16.
struct batched_operand {
  const void* data = nullptr;
  int rows = 0;
  int cols = 0;
  bool transposed = false;
  long long stride = 0;

  int read_rows() const { return transposed ? cols : rows; }
  int read_cols() const { return transposed ? rows : cols; }
};

// c[b]: [M, N] (float, row-major, stride_c elements apart) = a[b] . b[b]^T for b < batch.
//  fp32: float operands, FP32 products and sums (CUBLAS_COMPUTE_32F_PEDANTIC: no TF32).
//  bf16: BF16 operands, FP32 accumulation, float result (as the CPU trainer, whose bf16 operands
//        hold BF16 values in floats).
// Other modes throw fp8::invalid_argument: attention's products are never FP8.
void batched_gemm(cublasHandle_t handle, gemm_mode mode, const batched_operand& a, const batched_operand& b,
                  float* c, long long stride_c, int batch, cudaStream_t stream);

}  // namespace trainer::cuda

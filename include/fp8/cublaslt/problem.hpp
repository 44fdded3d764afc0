// The description of one cuBLASLt matrix product (types, shapes, scales, epilogue) as plain data,
// with the row-major `Y = X·Wᵀ` mapping onto cuBLASLt's column-major "TN" form. Needs no CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

namespace fp8::cublaslt {

// Element types of the matrices (cudaDataType_t CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_16BF,
// CUDA_R_16F, CUDA_R_32F).
enum class data_type { e4m3, e5m2, bf16, fp16, fp32 };

// cuBLAS's op() on an operand, in its column-major world.
enum class operation { none, transpose };

// How an FP8 operand's inverse scales are laid out (cublasLtMatmulMatrixScale_t). For an operand
// whose op() is rows x K (rows = M for A, N for B), with K the contiguous dimension:
//  - tensorwise:    one float (CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F); a null pointer means 1;
//  - row_wise:      `rows` floats, one per row (OUTER_VEC_32F);
//  - block_1x128:   one float per row and 128-wide K block, stored K-block by K-block with the rows
//                   contiguous and padded to a multiple of 4 (16 bytes):
//                   index = kb * round_up(rows, 4) + r (VEC128_32F, "outer-dimension major");
//  - block_128x128: one float per 128 x 128 block, stored row-block by row-block with the K blocks
//                   contiguous and padded to a multiple of 4 (16 bytes):
//                   index = rb * round_up(ceil(K / 128), 4) + kb (BLK128x128_32F).
// scale_tensor_elements() gives the size to allocate. These are the layouts of fp8::scale_layout
// (fp8/scaling/granularity.hpp) for tile_1x128 and block_128x128, which the quantize kernels write.
enum class scale_mode { tensorwise, row_wise, block_1x128, block_128x128 };

// What happens to alpha·op(A)·op(B) before the output is written.
enum class epilogue { none, bias, gelu, gelu_bias };

// Which pass a product belongs to: it chooses the default of fast accumulation.
enum class gemm_purpose { forward, gradient };

// Fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM) skips the periodic promotion of the FP8
// tensor-core accumulator to FP32: faster, less accurate. by_purpose = on for forward products,
// off for gradients (dgrad, wgrad) and always off for block scaling, which requires it.
enum class fast_accumulation { by_purpose, on, off };

// An input matrix as stored: column-major with leading dimension `ld` (0 = tightly packed).
struct input_matrix {
  const void* data = nullptr;
  data_type type = data_type::e4m3;
  std::int64_t ld = 0;
  scale_mode scaling = scale_mode::tensorwise;
  const float* scale_inv = nullptr;  // device memory: the *inverse* scales, laid out as `scaling` says
};

// The output matrix. For an FP8 output, `scale` (device, one float; null = 1) multiplies the result
// before the cast and `amax` (device, one float) receives max |result| before that scaling.
struct output_matrix {
  void* data = nullptr;
  data_type type = data_type::bf16;
  std::int64_t ld = 0;
  const float* scale = nullptr;
  float* amax = nullptr;
};

// Everything beside the matrices.
struct gemm_options {
  epilogue epilogue_kind = epilogue::none;
  const void* bias = nullptr;               // device vector of M (cuBLAS rows of D) elements
  std::optional<data_type> bias_type{};     // empty: the type cuBLASLt pairs with the output type
  float alpha = 1.0f;
  gemm_purpose purpose = gemm_purpose::forward;
  fast_accumulation fast_accum = fast_accumulation::by_purpose;
};

// D[m, n] = alpha · op(A)[m, k] · op(B)[k, n] (+ epilogue), all column-major, as cuBLASLt sees it.
// FP8 products on Ada and Hopper must be "TN": op_a = transpose, op_b = none (the defaults).
struct gemm_problem {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  operation op_a = operation::transpose;
  operation op_b = operation::none;
  input_matrix a{};
  input_matrix b{};
  output_matrix d{};
  gemm_options options{};
};

// The row-major product of a linear layer: Y[m, n] = X[m, k] · W[n, k]ᵀ (+ bias[n]), where m counts
// tokens, k input features and n output features; `ld` is a row stride here (0 = packed). The bias
// is per output feature. Row-wise scales are per row of X (m floats) and of W (n floats); 1x128
// scales are per row of X / W and 128 columns; 128x128 scales tile W (or X).
struct linear_problem {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  input_matrix x{};
  input_matrix w{};
  output_matrix y{};
  gemm_options options{};
};

// --- Names, for messages ---

constexpr const char* name(data_type type) noexcept {
  switch (type) {
    case data_type::e4m3: return "e4m3";
    case data_type::e5m2: return "e5m2";
    case data_type::bf16: return "bf16";
    case data_type::fp16: return "fp16";
    case data_type::fp32: return "fp32";
  }
  return "?";
}
constexpr const char* name(scale_mode mode) noexcept {
  switch (mode) {
    case scale_mode::tensorwise: return "tensorwise";
    case scale_mode::row_wise: return "row_wise (OUTER_VEC_32F)";
    case scale_mode::block_1x128: return "block_1x128 (VEC128_32F)";
    case scale_mode::block_128x128: return "block_128x128 (BLK128x128_32F)";
  }
  return "?";
}
constexpr const char* name(epilogue kind) noexcept {
  switch (kind) {
    case epilogue::none: return "none";
    case epilogue::bias: return "bias";
    case epilogue::gelu: return "gelu";
    case epilogue::gelu_bias: return "gelu_bias";
  }
  return "?";
}

constexpr bool is_fp8(data_type type) noexcept {
  return type == data_type::e4m3 || type == data_type::e5m2;
}
constexpr std::size_t element_bytes(data_type type) noexcept {
  switch (type) {
    case data_type::e4m3:
    case data_type::e5m2: return 1;
    case data_type::bf16:
    case data_type::fp16: return 2;
    case data_type::fp32: return 4;
  }
  return 0;
}
constexpr bool uses_bias(epilogue kind) noexcept {
  return kind == epilogue::bias || kind == epilogue::gelu_bias;
}

// --- Shapes ---

// The block edge of the block scale modes, and the padding of the contiguous dimension of a block
// scale tensor (4 floats = 16 bytes, the alignment cuBLASLt loads them with).
inline constexpr std::int64_t scale_block = 128;
inline constexpr std::int64_t block_scale_row_padding = 4;

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept { return (a + b - 1) / b; }
constexpr std::int64_t round_up(std::int64_t a, std::int64_t b) noexcept { return ceil_div(a, b) * b; }

// How many floats the inverse-scale tensor of an operand with `rows` x `k` (op() shape) holds.
// Example: 1x128 scales of a 4096 x 1024 operand: 8 K blocks x 4096 rows = 32768 floats.
constexpr std::int64_t scale_tensor_elements(scale_mode mode, std::int64_t rows, std::int64_t k) noexcept {
  switch (mode) {
    case scale_mode::tensorwise: return 1;
    case scale_mode::row_wise: return rows;
    case scale_mode::block_1x128: return ceil_div(k, scale_block) * round_up(rows, block_scale_row_padding);
    case scale_mode::block_128x128:
      return ceil_div(rows, scale_block) * round_up(ceil_div(k, scale_block), block_scale_row_padding);
  }
  return 0;
}

// Stored (column-major) rows and columns of each matrix of a problem.
constexpr std::int64_t stored_rows_a(const gemm_problem& p) noexcept {
  return p.op_a == operation::none ? p.m : p.k;
}
constexpr std::int64_t stored_rows_b(const gemm_problem& p) noexcept {
  return p.op_b == operation::none ? p.k : p.n;
}
constexpr std::int64_t stored_cols_a(const gemm_problem& p) noexcept {
  return p.op_a == operation::none ? p.k : p.m;
}
constexpr std::int64_t stored_cols_b(const gemm_problem& p) noexcept {
  return p.op_b == operation::none ? p.n : p.k;
}

// The problem with every `ld` of 0 replaced by the packed leading dimension.
constexpr gemm_problem with_packed_leading_dimensions(gemm_problem p) noexcept {
  if (p.a.ld == 0) p.a.ld = stored_rows_a(p);
  if (p.b.ld == 0) p.b.ld = stored_rows_b(p);
  if (p.d.ld == 0) p.d.ld = p.m;
  return p;
}

// Row-major Y[m, n] = X[m, k] · W[n, k]ᵀ is column-major Yᵀ[n, m] = W · Xᵀ: the row-major W[n, k]
// is the column-major k x n matrix that op = transpose turns into n x k, so W is cuBLAS's A (op T),
// X is B (op N), and cuBLAS's (m, n) = (features out, tokens). Example: m = 8 tokens, k = 4096,
// n = 11008 gives the cuBLAS problem m = 11008, n = 8, k = 4096, lda = ldb = 4096, ldd = 11008.
constexpr gemm_problem to_gemm(const linear_problem& p) noexcept {
  gemm_problem g{};
  g.m = p.n;
  g.n = p.m;
  g.k = p.k;
  g.op_a = operation::transpose;
  g.op_b = operation::none;
  g.a = p.w;
  g.b = p.x;
  g.d = p.y;
  g.options = p.options;
  if (g.a.ld == 0) g.a.ld = p.k;
  if (g.b.ld == 0) g.b.ld = p.k;
  if (g.d.ld == 0) g.d.ld = p.n;
  return g;
}

// One line that names the product, its shapes, types, layouts and options, as error messages show it:
// "D[m=4096, n=4096] (bf16, ld 4096) = op_T(A)[4096 x 4096] (e4m3, ld 4096, tensorwise) ·
//  op_N(B)[4096 x 4096] (e5m2, ld 4096, tensorwise), k=4096, epilogue none, purpose forward"
inline std::string describe(const gemm_problem& problem) {
  std::ostringstream out;
  const auto op_name = [](operation op) { return op == operation::none ? "N" : "T"; };
  out << "D[m=" << problem.m << ", n=" << problem.n << "] (" << name(problem.d.type) << ", ld "
      << problem.d.ld << ") = op_" << op_name(problem.op_a) << "(A)[" << problem.m << " x " << problem.k
      << "] (" << name(problem.a.type) << ", ld " << problem.a.ld << ", " << name(problem.a.scaling)
      << ") · op_" << op_name(problem.op_b) << "(B)[" << problem.k << " x " << problem.n << "] ("
      << name(problem.b.type) << ", ld " << problem.b.ld << ", " << name(problem.b.scaling) << "), k="
      << problem.k << ", epilogue " << name(problem.options.epilogue_kind) << ", purpose "
      << (problem.options.purpose == gemm_purpose::forward ? "forward" : "gradient");
  return out.str();
}

}  // namespace fp8::cublaslt

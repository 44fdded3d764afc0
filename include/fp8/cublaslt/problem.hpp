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
// The block modes need M and N multiples of 4 (so the 1x128 row padding is cuBLASLt's own layout).
// scale_tensor_elements() gives the size to allocate. These are the layouts of fp8::scale_layout
// (fp8/scaling/granularity.hpp) for tile_1x128 and block_128x128, which the quantize kernels write.
enum class scale_mode { tensorwise, row_wise, block_1x128, block_128x128 };

// What happens to alpha·op(A)·op(B) (+ beta·C) before the output is written (cublasLtEpilogue_t).
// Forward:
//  - bias (BIAS), gelu (GELU), gelu_bias (GELU_BIAS): D = act(AB + bias), bias has m elements;
//  - gelu_aux (GELU_AUX), gelu_aux_bias (GELU_AUX_BIAS): as gelu / gelu_bias, and the GELU input
//    (AB [+ bias]) is also written to the aux matrix (m x n, ld aux_ld), for the backward pass.
// Backward:
//  - dgelu (DGELU): D = AB · GELU'(aux), aux = the GELU input saved by gelu_aux in the forward pass;
//  - dgelu_bias_gradient (DGELU_BGRAD): as dgelu, and the bias gradient (the sum of D over n, m
//    elements) is written to `bias`;
//  - bias_gradient_b (BGRADB): D = AB and the bias gradient of B (the sum of op(B) over k, one per
//    column of D: n elements) is written to `bias`; the weight-gradient product's bias gradient.
enum class epilogue {
  none,
  bias,
  gelu,
  gelu_bias,
  gelu_aux,
  gelu_aux_bias,
  dgelu,
  dgelu_bias_gradient,
  bias_gradient_b
};

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
// The AMAX_D rule: cuBLASLt *overwrites* *amax (it does not take the maximum with what is there),
// while the cast kernels max-accumulate into their slots. So a GEMM's amax must point at a slot of
// its own that nothing else writes in the same step, e.g. the output tensor's slot of
// fp8::cuda::delayed_scaling_device_state (amax(i)), which update() zeroes after every step, so that
// the overwrite equals a maximum with 0. Two products of one group must not share an amax slot
// (the group checks refuse it); to combine them, give each a slot and take the maximum afterwards.
struct output_matrix {
  void* data = nullptr;
  data_type type = data_type::bf16;
  std::int64_t ld = 0;
  const float* scale = nullptr;
  float* amax = nullptr;
};

// The C matrix of D = alpha·AB + beta·C, read only when beta != 0 (it is never passed otherwise).
// Its shape is D's (m x n). `type` empty: the output type, or bf16 beside an FP8 output (the type
// cuBLASLt pairs with it). `data` may equal D's pointer (accumulate in place) only when C's type
// and leading dimension are D's: cuBLASLt refuses one pointer under two different layouts.
struct accumulator_matrix {
  const void* data = nullptr;
  std::optional<data_type> type{};
  std::int64_t ld = 0;  // 0 = packed (m)
};

// Everything beside the matrices.
struct gemm_options {
  epilogue epilogue_kind = epilogue::none;
  // bias, gelu_bias, gelu_aux_bias: the bias (input, m elements); dgelu_bias_gradient (m) and
  // bias_gradient_b (n): where the bias gradient is written. Device memory, 16-byte aligned.
  const void* bias = nullptr;
  std::optional<data_type> bias_type{};  // empty: the type cuBLASLt pairs with the output (default_bias_type)
  // gelu_aux, gelu_aux_bias (output) and dgelu, dgelu_bias_gradient (input): the GELU input, an
  // m x n column-major matrix with leading dimension aux_ld (0 = m; a multiple of 8, >= m).
  void* aux = nullptr;
  std::int64_t aux_ld = 0;
  std::optional<data_type> aux_type{};  // empty: the output type (fp16 beside an FP8 output)
  float alpha = 1.0f;
  float beta = 0.0f;  // != 0: D = alpha·AB + beta·C, C from gemm_problem::c
  gemm_purpose purpose = gemm_purpose::forward;
  fast_accumulation fast_accum = fast_accumulation::by_purpose;
};

// A strided batch: `count` products of the same shape whose matrices lie `stride_*` elements
// apart (0 = packed: ld x stored columns). Scales are shared by the whole batch (tensorwise only).
struct batch_layout {
  std::int64_t count = 1;
  std::int64_t stride_a = 0;
  std::int64_t stride_b = 0;
  std::int64_t stride_c = 0;
  std::int64_t stride_d = 0;
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
  accumulator_matrix c{};
  batch_layout batch{};
};

// A strided batch of linear products (strides in elements, 0 = packed); see batch_layout.
struct linear_batch {
  std::int64_t count = 1;
  std::int64_t stride_x = 0;
  std::int64_t stride_w = 0;
  std::int64_t stride_c = 0;
  std::int64_t stride_y = 0;
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
  accumulator_matrix c{};  // read when options.beta != 0: Y = alpha·X·Wᵀ + beta·C, C row-major m x n
  linear_batch batch{};
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
    case epilogue::gelu_aux: return "gelu_aux";
    case epilogue::gelu_aux_bias: return "gelu_aux_bias";
    case epilogue::dgelu: return "dgelu";
    case epilogue::dgelu_bias_gradient: return "dgelu_bias_gradient";
    case epilogue::bias_gradient_b: return "bias_gradient_b";
  }
  return "?";
}

constexpr bool is_fp8(data_type type) noexcept { return type == data_type::e4m3 || type == data_type::e5m2; }
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
// Epilogues that read a bias vector.
constexpr bool uses_bias(epilogue kind) noexcept {
  return kind == epilogue::bias || kind == epilogue::gelu_bias || kind == epilogue::gelu_aux_bias;
}
// Epilogues that write a bias gradient through the bias pointer.
constexpr bool writes_bias_gradient(epilogue kind) noexcept {
  return kind == epilogue::dgelu_bias_gradient || kind == epilogue::bias_gradient_b;
}
// Epilogues that need the bias pointer at all (to read or to write).
constexpr bool needs_bias_pointer(epilogue kind) noexcept {
  return uses_bias(kind) || writes_bias_gradient(kind);
}
// Epilogues that write (gelu_aux*) or read (dgelu*) the aux matrix.
constexpr bool uses_aux(epilogue kind) noexcept {
  return kind == epilogue::gelu_aux || kind == epilogue::gelu_aux_bias || kind == epilogue::dgelu ||
         kind == epilogue::dgelu_bias_gradient;
}
// Epilogues that write the aux matrix (the GELU input, saved for the backward pass).
constexpr bool writes_aux(epilogue kind) noexcept {
  return kind == epilogue::gelu_aux || kind == epilogue::gelu_aux_bias;
}
// The length of the bias (or bias gradient) vector: n for bias_gradient_b, m otherwise.
constexpr std::int64_t bias_length(epilogue kind, std::int64_t m, std::int64_t n) noexcept {
  return kind == epilogue::bias_gradient_b ? n : m;
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

// The problem with every `ld` (and batch stride) of 0 replaced by its packed value.
constexpr gemm_problem with_packed_leading_dimensions(gemm_problem p) noexcept {
  if (p.a.ld == 0) p.a.ld = stored_rows_a(p);
  if (p.b.ld == 0) p.b.ld = stored_rows_b(p);
  if (p.d.ld == 0) p.d.ld = p.m;
  if (p.c.ld == 0) p.c.ld = p.m;
  if (p.options.aux_ld == 0) p.options.aux_ld = p.m;
  if (p.batch.stride_a == 0) p.batch.stride_a = p.a.ld * stored_cols_a(p);
  if (p.batch.stride_b == 0) p.batch.stride_b = p.b.ld * stored_cols_b(p);
  if (p.batch.stride_c == 0) p.batch.stride_c = p.c.ld * p.n;
  if (p.batch.stride_d == 0) p.batch.stride_d = p.d.ld * p.n;
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
  g.c = p.c;
  g.options = p.options;
  if (g.a.ld == 0) g.a.ld = p.k;
  if (g.b.ld == 0) g.b.ld = p.k;
  if (g.d.ld == 0) g.d.ld = p.n;
  if (g.c.ld == 0) g.c.ld = p.n;
  if (g.options.aux_ld == 0) g.options.aux_ld = p.n;
  g.batch = {p.batch.count, p.batch.stride_w, p.batch.stride_x, p.batch.stride_c, p.batch.stride_y};
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
      << name(problem.b.type) << ", ld " << problem.b.ld << ", " << name(problem.b.scaling)
      << "), k=" << problem.k << ", epilogue " << name(problem.options.epilogue_kind) << ", purpose "
      << (problem.options.purpose == gemm_purpose::forward ? "forward" : "gradient");
  if (problem.options.beta != 0.0f) {
    out << ", beta " << problem.options.beta << " (C "
        << (problem.c.data == problem.d.data ? "= D" : "separate") << ", ld " << problem.c.ld << ")";
  }
  if (problem.batch.count != 1) out << ", batch " << problem.batch.count;
  return out.str();
}

}  // namespace fp8::cublaslt

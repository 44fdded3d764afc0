// The host half of the FP8 linear layer: for a configuration and a token count, which casts run
// (and which of them make the transposed copy in the same pass), and the three cuBLASLt products with
// their operands, types, scale modes, transposes and leading dimensions, pointers left out. Shapes
// that cuBLASLt would refuse are refused here first, in the layer's terms. Needs no CUDA.
//
// The three products, row-major, each written as the wrapper's TN "linear" Y[m,n] = X[m,k]·W[n,k]ᵀ
// when the class runs in FP8 (FP8 tensor cores take K-contiguous operands only):
//   fprop  Y[M,N]  = X[M,K]   · W[N,K]ᵀ     x = X,   w = W        (cuBLAS A = W op T, B = X op N)
//   dgrad  dX[M,K] = dY[M,N]  · Wᵀ[K,N]ᵀ    x = dY,  w = Wᵀ       (the FP8 copy of W transposed)
//   wgrad  dW[N,K] = dYᵀ[N,M] · Xᵀ[K,M]ᵀ    x = dYᵀ, w = Xᵀ       (beta = 1 into the FP32 dW)
// In BF16 no copy is transposed: dgrad and wgrad read W, dY and X as stored, through op N / op T.
// A fake_fp8 class makes the FP8 copies of its fp8 form, decodes each to a BF16 copy of the same
// shape (x_fake, w_t_fake, ...), and runs the same TN product on those in BF16.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "../../cublaslt/problem.hpp"
#include "../../cublaslt/validate.hpp"
#include "../../error.hpp"
#include "../../scaling/granularity.hpp"
#include "config.hpp"

namespace fp8::cuda {

// Every matrix or vector a product reads or writes: the caller's (x, w, dy, y, dx, dw, bias) and the
// layer's FP8 copies, their BF16 decodes (fake_fp8 classes) and bias-gradient scratch.
enum class linear_buffer : std::uint8_t {
  none,
  x,
  w,
  dy,
  y,
  dx,
  dw,
  bias,
  x_fp8,
  x_t_fp8,
  w_fp8,
  w_t_fp8,
  dy_fp8,
  dy_t_fp8,
  bias_gradient,
  x_fake,  // the BF16 decode of x_fp8 (read by a fake_fp8 class), and so on for each FP8 copy
  x_t_fake,
  w_fake,
  w_t_fake,
  dy_fake,
  dy_t_fake
};
inline constexpr std::size_t linear_buffer_count = std::size_t(linear_buffer::dy_t_fake) + 1;

constexpr const char* buffer_name(linear_buffer buffer) noexcept {
  switch (buffer) {
    case linear_buffer::none: return "none";
    case linear_buffer::x: return "x";
    case linear_buffer::w: return "w";
    case linear_buffer::dy: return "dy";
    case linear_buffer::y: return "y";
    case linear_buffer::dx: return "dx";
    case linear_buffer::dw: return "dw";
    case linear_buffer::bias: return "bias";
    case linear_buffer::x_fp8: return "x_fp8";
    case linear_buffer::x_t_fp8: return "x_t_fp8";
    case linear_buffer::w_fp8: return "w_fp8";
    case linear_buffer::w_t_fp8: return "w_t_fp8";
    case linear_buffer::dy_fp8: return "dy_fp8";
    case linear_buffer::dy_t_fp8: return "dy_t_fp8";
    case linear_buffer::bias_gradient: return "bias_gradient";
    case linear_buffer::x_fake: return "x_fake";
    case linear_buffer::x_t_fake: return "x_t_fake";
    case linear_buffer::w_fake: return "w_fake";
    case linear_buffer::w_t_fake: return "w_t_fake";
    case linear_buffer::dy_fake: return "dy_fake";
    case linear_buffer::dy_t_fake: break;
  }
  return "dy_t_fake";
}

// What a call's plan covers: a whole pass (a forward whose backward follows), or a forward alone
// (evaluation, inference: linear_layer::forward_args::backward_follows = false), which makes no copy
// for the backward products and is held to no shape rule of theirs that depends on the token count.
enum class linear_pass : std::uint8_t { training, forward_only };

// The three high-precision tensors the layer casts.
enum class linear_tensor : std::uint8_t { x = 0, w = 1, dy = 2 };

constexpr const char* tensor_name(linear_tensor tensor) noexcept {
  switch (tensor) {
    case linear_tensor::x: return "X";
    case linear_tensor::w: return "W";
    case linear_tensor::dy: return "dY";
  }
  return "?";
}

// How one tensor (rows x cols, row-major BF16) becomes FP8: the copy as stored (for the product that
// reads it K-contiguous as it is) and/or its transpose (for the one that reduces over its rows).
// `fused`: both copies come from one pass (quantize_transpose), which needs one recipe for both
// operands; otherwise each copy has its own cast and scale. A copy whose product is fake_fp8 is then
// decoded to BF16 (`dequantize_row`, `dequantize_transposed`) with its own inverse scales.
struct cast_plan {
  linear_tensor tensor = linear_tensor::x;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool row_major = false;
  bool transposed = false;
  bool fused = false;
  gemm_operand row_operand = gemm_operand::fprop_input;         // the operand the stored copy feeds
  gemm_operand transposed_operand = gemm_operand::wgrad_input;  // the operand the transpose feeds
  linear_buffer row_buffer = linear_buffer::x_fp8;
  linear_buffer transposed_buffer = linear_buffer::x_t_fp8;
  bool dequantize_row = false;
  bool dequantize_transposed = false;
  linear_buffer row_fake_buffer = linear_buffer::x_fake;
  linear_buffer transposed_fake_buffer = linear_buffer::x_t_fake;

  constexpr bool any() const noexcept { return row_major || transposed; }
};

// One product: the wrapper's problem with null pointers, and where each pointer comes from.
struct gemm_plan {
  gemm_kind kind = gemm_kind::fprop;
  gemm_precision precision = gemm_precision::fp8;
  cublaslt::gemm_problem problem{};
  linear_buffer a = linear_buffer::none;     // cuBLAS's A (and its scale_inv when FP8)
  linear_buffer b = linear_buffer::none;     // cuBLAS's B
  linear_buffer d = linear_buffer::none;     // the output
  linear_buffer c = linear_buffer::none;     // read when beta != 0 (wgrad: dW itself)
  linear_buffer bias = linear_buffer::none;  // fprop: the bias; wgrad with BGRADB: the bias gradient
};

// Where dbias comes from: none (no bias), the wgrad product's BGRADB epilogue (written to the
// layer's scratch, then added to the caller's FP32 dbias), or a column sum of the BF16 dY.
enum class bias_gradient_method : std::uint8_t { none, epilogue, column_sum };

struct linear_plan {
  linear_pass pass = linear_pass::training;
  std::int64_t m = 0;                // tokens
  std::int64_t n = 0;                // out_features
  std::int64_t k = 0;                // in_features
  std::array<cast_plan, 3> casts{};  // indexed by linear_tensor
  // Per tensor, its operands whose class runs in BF16, planned as the cast an FP8 class would make
  // of them (`row_major`: the row operand's class runs in BF16, `transposed`: the transposed one's;
  // fused when both do with one recipe), with no buffer a product reads (linear_buffer::none). The
  // layer records their amaxes (linear_config::record_bf16_amax) and, on statistics calls only,
  // makes these casts into scratch copies to count what FP8 would do to the operands.
  std::array<cast_plan, 3> bf16_casts{};
  // Indexed by gemm_kind. A forward_only plan plans fprop alone: dgrad and wgrad have their kind and
  // precision, and neither a problem nor buffers.
  std::array<gemm_plan, 3> gemms{};
  bias_gradient_method bias_gradient = bias_gradient_method::none;
  cublaslt::data_type bias_gradient_type = cublaslt::data_type::fp32;  // the epilogue's output type

  const cast_plan& cast(linear_tensor tensor) const noexcept { return casts[std::size_t(tensor)]; }
  const cast_plan& bf16_cast(linear_tensor tensor) const noexcept { return bf16_casts[std::size_t(tensor)]; }
  const gemm_plan& gemm(gemm_kind kind) const noexcept { return gemms[std::size_t(kind)]; }
};

// The cuBLASLt scale mode of a granularity (mx_1x32 has none on Hopper: cuBLASLt's MX mode,
// VEC32_UE8M0, is Blackwell's).
inline cublaslt::scale_mode scale_mode_of(granularity g, const char* operand) {
  switch (g) {
    case granularity::per_tensor: return cublaslt::scale_mode::tensorwise;
    case granularity::per_row: return cublaslt::scale_mode::row_wise;
    case granularity::tile_1x128: return cublaslt::scale_mode::block_1x128;
    case granularity::block_128x128: return cublaslt::scale_mode::block_128x128;
    case granularity::mx_1x32: break;
  }
  throw invalid_argument(
      std::string("fp8::cuda::linear_layer: operand ") + operand +
      " asks for mx_1x32 scales, which no Hopper FP8 product reads and this layer does not cover "
      "(use per_tensor, per_row, tile_1x128 or block_128x128)");
}

constexpr cublaslt::data_type fp8_type_of(fp8_format format) noexcept {
  return format == fp8_format::e5m2 ? cublaslt::data_type::e5m2 : cublaslt::data_type::e4m3;
}

constexpr bool same_recipe(const operand_recipe& a, const operand_recipe& b) noexcept {
  return a.mode == b.mode && a.quant.format == b.quant.format && a.quant.granularity == b.quant.granularity &&
         a.quant.margin == b.quant.margin && a.quant.power_of_two_scales == b.quant.power_of_two_scales;
}

// Floats of an FP8 copy's inverse scales (rows x cols, row-major), as the quantize kernels write them.
inline std::size_t scale_floats(const operand_recipe& recipe, std::int64_t rows, std::int64_t cols) noexcept {
  return scale_count(recipe.quant.granularity, std::size_t(rows), std::size_t(cols));
}

namespace detail {

inline void require_multiple(std::int64_t value, std::int64_t multiple, const std::string& what,
                             const std::string& why) {
  if (value % multiple == 0) return;
  throw invalid_argument("fp8::cuda::linear_layer: " + what + " = " + std::to_string(value) +
                         " is not a multiple of " + std::to_string(multiple) + ": " + why);
}

// The shape rules of each FP8 class, in the layer's terms (cuBLASLt: the reduced dimension and every
// leading dimension a multiple of 16 bytes). BF16 classes have none beyond positive sizes.
// A forward_only call is held to fprop's rules and to those of the backward products that do not
// depend on the token count (W's transposed copy is made for them in any call).
inline void check_fp8_shapes(const linear_config& config, std::int64_t m, linear_pass pass) {
  const bool backward = pass == linear_pass::training;
  const std::int64_t k = config.in_features;
  const std::int64_t n = config.out_features;
  const linear_precision& p = config.precision;
  // fake_fp8 classes run BF16 products on BF16 decodes, which take any size.
  const std::string run_bf16 = " (pad it, or run that class in BF16 or fake_fp8)";
  if (p.fprop == gemm_precision::fp8) {
    require_multiple(k, cublaslt::fp8_k_multiple, "in_features (K)",
                     "the FP8 fprop product reduces over K, which cuBLASLt needs divisible by 16" + run_bf16);
    require_multiple(
        n, 8, "out_features (N)",
        "the BF16 rows of Y (ld N) must span a multiple of 16 bytes in an FP8 product" + run_bf16);
  }
  if (p.dgrad == gemm_precision::fp8) {
    require_multiple(n, cublaslt::fp8_k_multiple, "out_features (N)",
                     "the FP8 dgrad product reduces over N and reads the FP8 Wᵀ [K, N], whose rows must span "
                     "a multiple of 16 bytes" +
                         run_bf16);
    require_multiple(
        k, 8, "in_features (K)",
        "the BF16 rows of dX (ld K) must span a multiple of 16 bytes in an FP8 product" + run_bf16);
  }
  // Block scales (1x128, 128x128): cuBLASLt needs both output dimensions of the product multiples
  // of 4 (fprop: tokens and N, dgrad: tokens and K, wgrad: N and K; N and K already are for fprop
  // and dgrad, K for wgrad).
  const auto block = [&](gemm_operand a, gemm_operand b) {
    const auto blocked = [](granularity g) {
      return g == granularity::tile_1x128 || g == granularity::block_128x128;
    };
    return blocked(config.recipe[a].quant.granularity) || blocked(config.recipe[b].quant.granularity);
  };
  const std::string block_rule =
      " product has block scales (1x128 or 128x128), with which cuBLASLt needs the output's rows and "
      "columns multiples of 4";
  const std::string pad_tokens =
      " (pad the batch with zero rows, or run that class in BF16 or fake_fp8, or use per-tensor or per-row "
      "scales)";
  if (p.fprop == gemm_precision::fp8 && block(gemm_operand::fprop_input, gemm_operand::fprop_weight)) {
    require_multiple(m, cublaslt::block_scale_row_padding, "tokens (M)",
                     "the FP8 fprop" + block_rule + pad_tokens);
  }
  if (backward && p.dgrad == gemm_precision::fp8 &&
      block(gemm_operand::dgrad_grad_output, gemm_operand::dgrad_weight)) {
    require_multiple(m, cublaslt::block_scale_row_padding, "tokens (M)",
                     "the FP8 dgrad" + block_rule + pad_tokens);
  }
  if (p.wgrad == gemm_precision::fp8 && block(gemm_operand::wgrad_grad_output, gemm_operand::wgrad_input)) {
    require_multiple(n, cublaslt::block_scale_row_padding, "out_features (N)",
                     "the FP8 wgrad" + block_rule + run_bf16);
  }
  if (p.wgrad == gemm_precision::fp8) {
    if (backward) {
      require_multiple(m, cublaslt::fp8_k_multiple, "tokens (M)",
                       "the FP8 wgrad product reduces over the tokens and reads the FP8 copies Xᵀ [K, M] and "
                       "dYᵀ [N, M], whose rows must span a multiple of 16 bytes (pad the batch with zero "
                       "rows, run wgrad in BF16 or fake_fp8, or, for a forward that no backward follows, "
                       "pass backward_follows = false)");
    }
    require_multiple(
        k, 4, "in_features (K)",
        "the FP32 rows of dW (ld K) must span a multiple of 16 bytes in an FP8 product" + run_bf16);
  }
}

inline cublaslt::input_matrix fp8_input(const operand_recipe& recipe, gemm_operand operand) {
  cublaslt::input_matrix in{};
  in.type = fp8_type_of(recipe.quant.format);
  in.scaling = scale_mode_of(recipe.quant.granularity, operand_name(operand));
  return in;
}

inline cublaslt::input_matrix bf16_input() {
  cublaslt::input_matrix in{};
  in.type = cublaslt::data_type::bf16;
  return in;
}

inline cublaslt::fast_accumulation fast_accumulation_of(const linear_precision& precision, gemm_kind kind,
                                                        const cublaslt::gemm_problem& problem) {
  if (precision.of(kind) != gemm_precision::fp8) return cublaslt::fast_accumulation::off;
  const bool block =
      cublaslt::detail::block_scaled(problem.a.scaling) || cublaslt::detail::block_scaled(problem.b.scaling);
  return precision.fast_accumulation(kind) && !block ? cublaslt::fast_accumulation::on
                                                     : cublaslt::fast_accumulation::off;
}

// An FP8 product as the wrapper's row-major linear problem Y[m,n] = X[m,k]·W[n,k]ᵀ (all packed).
inline cublaslt::gemm_problem fp8_linear(std::int64_t m, std::int64_t n, std::int64_t k,
                                         cublaslt::input_matrix x, cublaslt::input_matrix w,
                                         cublaslt::data_type out, cublaslt::gemm_purpose purpose) {
  cublaslt::linear_problem p{};
  p.m = m;
  p.n = n;
  p.k = k;
  p.x = x;
  p.w = w;
  p.y.type = out;
  p.options.purpose = purpose;
  return cublaslt::to_gemm(p);
}

// A stand-in address with every alignment, for checking a planned problem with the wrapper's rules.
inline const void* placeholder() noexcept { return reinterpret_cast<const void*>(std::uintptr_t(1) << 12); }

// The wrapper's own checks on a planned product, as on an H100 with a cuBLASLt that has every scale
// mode: the scale-mode pairs, E5M2 x E5M2, epilogue limits. The real device is checked at run time.
inline void check_with_wrapper(const gemm_plan& planned) {
  cublaslt::gemm_problem p = planned.problem;
  p.a.data = p.b.data = placeholder();
  p.d.data = const_cast<void*>(placeholder());
  if (cublaslt::is_fp8(p.a.type)) p.a.scale_inv = p.b.scale_inv = static_cast<const float*>(placeholder());
  if (planned.c != linear_buffer::none) p.c.data = placeholder();
  if (planned.bias != linear_buffer::none) p.options.bias = placeholder();
  cublaslt::device_info hopper{
      1, 0, 9, 0, "sm_90", cublaslt::scale_modes_min_version, cublaslt::scale_modes_min_version};
  if (auto why = cublaslt::find_rejection(p, hopper)) {
    static const char* const names[] = {"fprop", "dgrad", "wgrad"};
    throw invalid_argument(std::string("fp8::cuda::linear_layer: the ") + names[std::size_t(planned.kind)] +
                           " product in " + precision_name(planned.precision) + " cannot run: " + why->cause);
  }
}

// One tensor the layer casts: its shape, its two operands (the one that reads it as stored and the
// one that reads its transpose) and the buffers of their FP8 copies and of the copies' BF16 decodes.
struct tensor_layout {
  linear_tensor tensor;
  std::int64_t rows, cols;
  gemm_operand row_operand, transposed_operand;
  linear_buffer row_buffer, transposed_buffer, row_fake_buffer, transposed_fake_buffer;
};

inline std::array<tensor_layout, 3> tensor_layouts(std::int64_t m, std::int64_t n, std::int64_t k) {
  using b = linear_buffer;
  return {{{linear_tensor::x, m, k, gemm_operand::fprop_input, gemm_operand::wgrad_input, b::x_fp8,
            b::x_t_fp8, b::x_fake, b::x_t_fake},
           {linear_tensor::w, n, k, gemm_operand::fprop_weight, gemm_operand::dgrad_weight, b::w_fp8,
            b::w_t_fp8, b::w_fake, b::w_t_fake},
           {linear_tensor::dy, m, n, gemm_operand::dgrad_grad_output, gemm_operand::wgrad_grad_output,
            b::dy_fp8, b::dy_t_fp8, b::dy_fake, b::dy_t_fake}}};
}

// The cast of a tensor that makes its stored copy (`row`) and/or its transpose, with no buffers:
// fused when it makes both with one recipe.
inline cast_plan plan_cast(const tensor_layout& t, bool row, bool transposed, const gemm_recipe& recipe) {
  cast_plan c{};
  c.tensor = t.tensor;
  c.rows = t.rows;
  c.cols = t.cols;
  c.row_major = row;
  c.transposed = transposed;
  c.fused = row && transposed && same_recipe(recipe[t.row_operand], recipe[t.transposed_operand]);
  c.row_operand = t.row_operand;
  c.transposed_operand = t.transposed_operand;
  c.row_buffer = c.transposed_buffer = c.row_fake_buffer = c.transposed_fake_buffer = linear_buffer::none;
  return c;
}

// One product as the wrapper's linear Y[rows, cols] = X[rows, depth]·W[cols, depth]ᵀ: its x operand
// (cuBLAS's B) and w operand (cuBLAS's A), each as an FP8 copy, its BF16 decode and as the caller
// stores it, which is the linear form's [rows, depth] / [cols, depth] unless `depth_major`
// ([depth, rows] / [depth, cols]: a BF16 product reads it through op N / op T, without a copy).
struct product_layout {
  gemm_kind kind;
  std::int64_t rows, cols, depth;
  gemm_operand x, w;
  linear_buffer x_fp8, w_fp8, x_fake, w_fake, x_stored, w_stored;
  bool x_depth_major, w_depth_major;
  linear_buffer out;
  cublaslt::data_type out_type;
  cublaslt::gemm_purpose purpose;
};

inline std::array<product_layout, 3> product_layouts(std::int64_t m, std::int64_t n, std::int64_t k) {
  using b = linear_buffer;
  using cublaslt::data_type;
  using cublaslt::gemm_purpose;
  return {
      {// fprop: Y[M,N] = X[M,K]·W[N,K]ᵀ, both stored K-contiguous.
       {gemm_kind::fprop, m, n, k, gemm_operand::fprop_input, gemm_operand::fprop_weight, b::x_fp8, b::w_fp8,
        b::x_fake, b::w_fake, b::x, b::w, false, false, b::y, data_type::bf16, gemm_purpose::forward},
       // dgrad: dX[M,K] = dY[M,N]·Wᵀ[K,N]ᵀ; W is stored [N,K].
       {gemm_kind::dgrad, m, k, n, gemm_operand::dgrad_grad_output, gemm_operand::dgrad_weight, b::dy_fp8,
        b::w_t_fp8, b::dy_fake, b::w_t_fake, b::dy, b::w, false, true, b::dx, data_type::bf16,
        gemm_purpose::gradient},
       // wgrad: dW[N,K] = dYᵀ[N,M]·Xᵀ[K,M]ᵀ; dY and X are stored [M,N] and [M,K].
       {gemm_kind::wgrad, n, k, m, gemm_operand::wgrad_grad_output, gemm_operand::wgrad_input, b::dy_t_fp8,
        b::x_t_fp8, b::dy_t_fake, b::x_t_fake, b::dy, b::x, true, true, b::dw, data_type::fp32,
        gemm_purpose::gradient}}};
}

// A BF16 product on operands as stored, column-major: D (cols x rows, ld cols) = op(A)·op(B) with A
// the w operand ([cols, depth] row-major is depth x cols: op T; [depth, cols] is cols x depth: op N)
// and B the x operand ([rows, depth] is depth x rows: op N; [depth, rows]: op T).
inline cublaslt::gemm_problem stored_product(const product_layout& l) {
  cublaslt::gemm_problem g{};
  g.m = l.cols;
  g.n = l.rows;
  g.k = l.depth;
  g.op_a = l.w_depth_major ? cublaslt::operation::none : cublaslt::operation::transpose;
  g.op_b = l.x_depth_major ? cublaslt::operation::transpose : cublaslt::operation::none;
  g.a = bf16_input();
  g.a.ld = l.w_depth_major ? l.cols : l.depth;
  g.b = bf16_input();
  g.b.ld = l.x_depth_major ? l.rows : l.depth;
  g.d.type = l.out_type;
  g.d.ld = l.cols;
  g.options.purpose = l.purpose;
  return g;
}

// A class's product: the linear form on the FP8 copies (fp8) or on their BF16 decodes (fake_fp8); in
// BF16 on the operands as stored, which are the linear form's own when neither is depth-major.
inline gemm_plan plan_product(const product_layout& l, gemm_precision precision, const gemm_recipe& recipe) {
  gemm_plan g{};
  g.kind = l.kind;
  g.precision = precision;
  g.d = l.out;
  if (precision == gemm_precision::bf16 && (l.x_depth_major || l.w_depth_major)) {
    g.problem = stored_product(l);
    g.a = l.w_stored;
    g.b = l.x_stored;
    return g;
  }
  const bool fp8 = precision == gemm_precision::fp8;
  const bool fake = precision == gemm_precision::fake_fp8;
  g.problem = fp8_linear(l.rows, l.cols, l.depth, fp8 ? fp8_input(recipe[l.x], l.x) : bf16_input(),
                         fp8 ? fp8_input(recipe[l.w], l.w) : bf16_input(), l.out_type, l.purpose);
  g.a = fp8 ? l.w_fp8 : fake ? l.w_fake : l.w_stored;
  g.b = fp8 ? l.x_fp8 : fake ? l.x_fake : l.x_stored;
  return g;
}

}  // namespace detail

// Throws fp8::invalid_argument naming the problem: sizes, token count, recipe, FP8 shapes (those of
// the products a `pass` runs).
inline void validate_linear_config(const linear_config& config, std::int64_t tokens,
                                   linear_pass pass = linear_pass::training) {
  const char* where = "fp8::cuda::linear_layer: ";
  if (config.in_features <= 0 || config.out_features <= 0) {
    throw invalid_argument(std::string(where) + "in_features and out_features must be positive (got " +
                           std::to_string(config.in_features) + " and " +
                           std::to_string(config.out_features) + ")");
  }
  if (config.max_tokens <= 0) throw invalid_argument(std::string(where) + "max_tokens must be positive");
  if (tokens <= 0 || tokens > config.max_tokens) {
    throw invalid_argument(std::string(where) + "tokens (M) = " + std::to_string(tokens) + " is outside 1.." +
                           std::to_string(config.max_tokens) + " (max_tokens, which sized the FP8 copies)");
  }
  detail::check_fp8_shapes(config, tokens, pass);
}

// The casts and products of one forward + backward pass over `tokens` rows, or of the forward alone
// (forward_only): X's copy for wgrad is then not made, nor its BF16 wgrad operand planned (no amax
// recorded for an operand no product reads), and neither backward product is planned. W's casts are
// the whole pass's in both, since W's copies are kept for later calls.
inline linear_plan make_linear_plan(const linear_config& config, std::int64_t tokens,
                                    linear_pass pass = linear_pass::training) {
  validate_linear_config(config, tokens, pass);
  const gemm_recipe& r = config.recipe;
  const linear_precision& precision = config.precision;
  const bool backward = pass == linear_pass::training;

  linear_plan plan{};
  plan.pass = pass;
  plan.m = tokens;
  plan.n = config.out_features;
  plan.k = config.in_features;

  // Per tensor, the copies its FP8 and fake_fp8 classes read (decoded for the fake ones), and the
  // same cast of the operands of its BF16 classes, which no product reads.
  for (const detail::tensor_layout& t : detail::tensor_layouts(plan.m, plan.n, plan.k)) {
    const gemm_precision row = precision.of(gemm_of(t.row_operand));
    const gemm_precision transposed = precision.of(gemm_of(t.transposed_operand));
    // X's transpose feeds wgrad only (dY's casts are made by a backward, which a forward_only plan has not).
    const bool wanted_transposed = backward || t.tensor != linear_tensor::x;
    cast_plan c = detail::plan_cast(t, casts_to_fp8(row), wanted_transposed && casts_to_fp8(transposed), r);
    // The layer's casts have no mx_1x32 (no Hopper product reads it): refused here for a fake_fp8
    // class too (whose BF16 product has no scale mode to refuse it), not at the first cast.
    if (c.row_major) (void)scale_mode_of(r[t.row_operand].quant.granularity, operand_name(t.row_operand));
    if (c.transposed) {
      (void)scale_mode_of(r[t.transposed_operand].quant.granularity, operand_name(t.transposed_operand));
    }
    c.row_buffer = t.row_buffer;
    c.transposed_buffer = t.transposed_buffer;
    c.dequantize_row = row == gemm_precision::fake_fp8;
    c.dequantize_transposed = c.transposed && transposed == gemm_precision::fake_fp8;
    c.row_fake_buffer = t.row_fake_buffer;
    c.transposed_fake_buffer = t.transposed_fake_buffer;
    plan.casts[std::size_t(t.tensor)] = c;
    plan.bf16_casts[std::size_t(t.tensor)] =
        detail::plan_cast(t, !casts_to_fp8(row), wanted_transposed && !casts_to_fp8(transposed), r);
  }

  for (const detail::product_layout& l : detail::product_layouts(plan.m, plan.n, plan.k)) {
    gemm_plan& g = plan.gemms[std::size_t(l.kind)];
    if (backward || l.kind == gemm_kind::fprop) {
      g = detail::plan_product(l, precision.of(l.kind), r);
    } else {
      g.kind = l.kind;
      g.precision = precision.of(l.kind);
    }
  }

  // fprop: + bias in the epilogue.
  gemm_plan& fprop = plan.gemms[std::size_t(gemm_kind::fprop)];
  if (config.bias) {
    fprop.problem.options.epilogue_kind = cublaslt::epilogue::bias;
    fprop.problem.options.bias_type = cublaslt::data_type::bf16;
    fprop.bias = linear_buffer::bias;
  }

  // Each planned product: its fast accumulation, then the wrapper's checks.
  const auto finish = [&](gemm_plan& g) {
    g.problem.options.fast_accum = detail::fast_accumulation_of(precision, g.kind, g.problem);
    detail::check_with_wrapper(g);
  };
  if (!backward) {
    finish(fprop);
    return plan;
  }

  // wgrad: dW += dYᵀ·X, FP32, beta = 1 into dW itself (accumulation across micro-batches).
  gemm_plan& wgrad = plan.gemms[std::size_t(gemm_kind::wgrad)];
  wgrad.c = linear_buffer::dw;
  wgrad.problem.options.beta = 1.0f;
  wgrad.problem.c.type = cublaslt::data_type::fp32;
  wgrad.problem.c.ld = plan.k;

  // dbias: BGRADB sums op(B) = dY (M x N as the product reads it) over the tokens, one per feature,
  // where the wrapper's epilogue rules (cuBLASLt's: f16, bf16 or f32 operands, B transposed) take it
  // on this wgrad: a BF16 wgrad in NT form. An FP8 wgrad, and a fake_fp8 one (TN, on the decoded
  // transposed copies), sum dY's columns, which is also what an FP8 layer's dbias is.
  if (config.bias) {
    cublaslt::gemm_problem with_epilogue = wgrad.problem;
    with_epilogue.options.epilogue_kind = cublaslt::epilogue::bias_gradient_b;
    with_epilogue.options.bias = detail::placeholder();
    if (config.fuse_bias_gradient && !cublaslt::find_epilogue_rejection(with_epilogue).has_value()) {
      plan.bias_gradient = bias_gradient_method::epilogue;
      wgrad.problem.options.epilogue_kind = cublaslt::epilogue::bias_gradient_b;
      wgrad.bias = linear_buffer::bias_gradient;
      plan.bias_gradient_type = cublaslt::bias_type_of(wgrad.problem);
    } else {
      plan.bias_gradient = bias_gradient_method::column_sum;
    }
  }

  for (gemm_plan& g : plan.gemms) finish(g);
  return plan;
}

// dY's casts in one backward: `cast` makes the copies that products read, `bf16` is the cast of the
// operands of BF16 classes (their amaxes and statistics), as in linear_plan. With dX, the plan's own.
// Without dX (the first layer of a model) dgrad does not run, and its operand dgrad_grad_output is
// left out in every precision, as on the CPU, where an operand's amax is recorded by the GEMM that
// reads it: no copy of dY as stored, no amax recorded for it, no statistics. Only wgrad's transposed
// copy is made, by a cast of its own (never fused: with wgrad_grad_output's recipe and scale).
struct dy_casts {
  cast_plan cast;
  cast_plan bf16;
};

inline dy_casts backward_dy_casts(const linear_plan& plan, bool dgrad) noexcept {
  dy_casts out{plan.cast(linear_tensor::dy), plan.bf16_cast(linear_tensor::dy)};
  if (dgrad) return out;
  for (cast_plan* c : {&out.cast, &out.bf16}) {
    c->row_major = false;
    c->fused = false;
    c->dequantize_row = false;
  }
  return out;
}

// Whether an amax of X (tensor x: forward_args::x_amax) or of dY (dy: backward_args::dy_amax, in a
// backward with dX) given by the kernel that wrote the tensor saves the layer a read of it, in calls
// that record amaxes: where a current per-tensor cast takes it for its scale, or where no operand of
// the tensor is cast and an amax-only pass records the amaxes of its BF16 classes. Where it is false
// (delayed and block-scaled casts find the amax in their one read), a producer need not record it.
// W is never given one (false): it is cast once per weights_changed(), not per call.
inline bool given_amax_saves_read(const linear_config& config, linear_tensor tensor) {
  if (tensor == linear_tensor::w) return false;
  const linear_plan plan = make_linear_plan(config, config.max_tokens);
  const cast_plan& c = plan.cast(tensor);
  const auto per_tensor_current = [&](gemm_operand operand) {
    const operand_recipe& r = config.recipe[operand];
    return r.mode == scaling_mode::current && r.quant.granularity == granularity::per_tensor;
  };
  if (c.row_major && per_tensor_current(c.row_operand)) return true;
  if (c.transposed && per_tensor_current(c.fused ? c.row_operand : c.transposed_operand)) return true;
  return !c.any() && config.record_bf16_amax && plan.bf16_cast(tensor).any();
}

// Why the kernel that writes X (or dY) cannot write its FP8 codes for the layer itself
// (linear_layer::fp8_input), or null when it can. It can where the layer would make both copies of
// the tensor in one delayed cast: the scale is then known before the tensor exists (the state's), the
// transposed copy is the codes' transpose, and no product reads the tensor in BF16.
inline const char* fp8_input_refusal(const linear_config& config, linear_tensor tensor) {
  if (tensor == linear_tensor::w) return "W is cast by the layer itself, once per weights_changed()";
  const linear_plan plan = make_linear_plan(config, config.max_tokens);
  const cast_plan& c = plan.cast(tensor);
  if (!c.fused) {
    return "the layer makes no fused cast of it: both of its products must read FP8 copies made with "
           "one recipe";
  }
  if (c.dequantize_row || c.dequantize_transposed) return "a fake_fp8 product reads a BF16 decode of it";
  if (config.recipe[c.row_operand].mode != scaling_mode::delayed) {
    return "its recipe is not delayed scaling: the scale must be known before the tensor is written "
           "(under current scaling, pass its amax instead: x_amax, dy_amax)";
  }
  if (tensor == linear_tensor::dy && plan.bias_gradient == bias_gradient_method::column_sum) {
    return "the bias gradient is a column sum of the BF16 dY";
  }
  return nullptr;
}

// A pointer of the caller's that a product reads or writes directly: FP8 products need every matrix
// 16-byte aligned, and an epilogue's bias (or bias gradient) vector is 16-byte aligned in any
// precision. Throws fp8::invalid_argument naming the buffer and the product; null is not checked here.
inline void check_caller_pointer(const linear_plan& plan, linear_buffer buffer, const void* pointer) {
  static const char* const names[] = {"fprop", "dgrad", "wgrad"};
  if (pointer == nullptr) return;
  for (const gemm_plan& g : plan.gemms) {
    const bool matrix = g.a == buffer || g.b == buffer || g.c == buffer || g.d == buffer;
    const bool needs = (matrix && g.precision == gemm_precision::fp8) || g.bias == buffer;
    if (needs && !cublaslt::detail::is_aligned(pointer, cublaslt::fp8_pointer_alignment)) {
      throw invalid_argument(std::string("fp8::cuda::linear_layer: ") + buffer_name(buffer) + " is at " +
                             cublaslt::detail::hex_address(pointer) + ", but the " +
                             names[std::size_t(g.kind)] + " product (" + precision_name(g.precision) +
                             ") needs it 16-byte aligned (cudaMalloc gives 256 bytes; check the offset)");
    }
  }
}

}  // namespace fp8::cuda

// FP8 operand quantization through the library, and the emulated tensor-core product.
#include "fp8_gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>

#include "parallel.hpp"
#include "tensor.hpp"
#include "tensor_stats.hpp"

namespace trainer {

namespace {

// The operand as the GEMM reads it, contiguous: the stored data, or a transposed copy in `scratch`.
const float* readable(const gemm_matrix& op, std::vector<float>& scratch) {
  if (!op.transposed) return op.data;
  scratch.resize(std::size_t(op.rows) * std::size_t(op.cols));
  as_matrix(scratch.data(), op.cols, op.rows) = as_matrix(op.data, op.rows, op.cols).transpose();
  return scratch.data();
}

// What the cast did to the operand: saturated elements (|x| * scale above the format's maximum,
// clamped by the saturating cast) and flushed ones (nonzero x, zero code).
tensor_stats operand_stats(const float* data, const quantized_operand& q) {
  const fp8::scale_layout layout =
      fp8::make_scale_layout(q.quant.granularity, std::size_t(q.rows), std::size_t(q.cols));
  const float fp8_max = fp8::max_finite(q.quant.format);
  const std::uint8_t magnitude_mask = fp8::format_traits<fp8::e4m3_format>::magnitude_mask;  // same for E5M2
  tensor_stats stats;
  stats.amax = q.amax;
  stats.scale_min = stats.scale_max = 1.0f / q.scale_inv[0];
  for (std::size_t i = 0; i < layout.grid_rows; ++i) {
    for (std::size_t j = 0; j < layout.grid_cols; ++j) {
      const float scale = 1.0f / q.scale_inv[layout.index(i, j)];
      stats.scale_min = std::min(stats.scale_min, scale);
      stats.scale_max = std::max(stats.scale_max, scale);
    }
  }
  std::size_t saturated = 0, flushed = 0, nonzero = 0;
  for (std::size_t r = 0; r < std::size_t(q.rows); ++r) {
    for (std::size_t c = 0; c < std::size_t(q.cols); ++c) {
      const std::size_t at = r * std::size_t(q.cols) + c;
      const float scale = 1.0f / q.scale_inv[layout.index_of_element(r, c)];
      if (std::abs(data[at]) * scale > fp8_max) ++saturated;
      if (data[at] != 0.0f) {
        ++nonzero;
        if ((q.codes[at] & magnitude_mask) == 0) ++flushed;
      }
    }
  }
  stats.saturated = double(saturated) / double(std::max<std::size_t>(q.codes.size(), 1));
  stats.flushed = double(flushed) / double(std::max<std::size_t>(nonzero, 1));
  return stats;
}

// Unscaled FP8 values as floats (exact: every FP8 value is a float).
std::vector<float> fp8_values(const quantized_operand& q) {
  std::vector<float> values(q.codes.size());
  fp8::dequantize(q.codes.data(), q.codes.size(), q.quant.format, 1.0f, values.data());
  return values;
}

// Cast to FP8 and back: the FP8 value times its scale_inv, rounded to BF16 (as a float).
std::vector<float> fake_quantized_values(const quantized_operand& q) {
  std::vector<fp8::bfloat16> bf16(q.codes.size());
  const auto rows = std::size_t(q.rows), cols = std::size_t(q.cols);
  if (q.quant.granularity == fp8::granularity::mx_1x32) {
    fp8::dequantize(q.codes.data(), rows, cols, q.quant, q.scale_e8m0.data(), bf16.data());
  } else {
    fp8::dequantize(q.codes.data(), rows, cols, q.quant, q.scale_inv.data(), bf16.data());
  }
  std::vector<float> values(bf16.size());
  for (std::size_t i = 0; i < bf16.size(); ++i) values[i] = static_cast<float>(bf16[i]);
  return values;
}

// The scale_inv of every row of `q` for the K block that starts at column k0.
std::vector<float> row_scales(const quantized_operand& q, const fp8::scale_layout& layout, std::size_t k0) {
  std::vector<float> scales(std::size_t(q.rows));
  for (std::size_t r = 0; r < scales.size(); ++r) scales[r] = q.scale_inv[layout.index_of_element(r, k0)];
  return scales;
}

}  // namespace

quantized_operand quantize_operand(const gemm_matrix& op, const operand_scaling& s) {
  scaling_state& state = *s.state;
  const fp8::operand_recipe& recipe = state.operand_recipe(s.operand);
  const std::size_t index = state.tensor_index(s.layer, s.operand);
  std::vector<float> scratch;
  const float* data = readable(op, scratch);

  quantized_operand q;
  q.rows = op.read_rows();
  q.cols = op.read_cols();
  q.quant = recipe.quant;
  const auto rows = std::size_t(q.rows), cols = std::size_t(q.cols);
  q.codes.resize(rows * cols);
  if (recipe.mode == fp8::scaling_mode::delayed) {
    // The scale computed after the previous step from the amax history; this step's amax is recorded.
    q.amax = fp8::quantize(data, rows * cols, q.quant.format, state.delayed().scale(index), q.codes.data());
    q.scale_inv = {state.delayed().scale_inv(index)};
  } else if (q.quant.granularity == fp8::granularity::mx_1x32) {
    q.scale_e8m0.resize(fp8::scale_count(q.quant.granularity, rows, cols));
    q.amax = fp8::quantize(data, rows, cols, q.quant, q.codes.data(), q.scale_e8m0.data());
    q.scale_inv.resize(q.scale_e8m0.size());
    for (std::size_t i = 0; i < q.scale_inv.size(); ++i) q.scale_inv[i] = fp8::mx_scale_inv(q.scale_e8m0[i]);
  } else {
    q.scale_inv.resize(fp8::scale_count(q.quant.granularity, rows, cols));
    q.amax = fp8::quantize(data, rows, cols, q.quant, q.codes.data(), q.scale_inv.data());
  }
  // Current-scaling operands record too: the history stays warm for a switch back to delayed scaling.
  if (s.record_amax) state.delayed().record(index, q.amax);
  if (s.stats != nullptr) {
    s.stats->add(state.layer_name(s.layer), fp8::operand_name(s.operand), fp8::format_name(q.quant.format),
                 to_string(s.mode), fp8::granularity_name(q.quant.granularity), operand_stats(data, q));
  }
  return q;
}

void observe_operand(const gemm_matrix& op, const operand_scaling& s) {
  if (s.state == nullptr) return;
  if (s.stats != nullptr) {
    quantize_operand(op, s);  // records the amax and logs what the cast would do
    return;
  }
  if (!s.record_amax) return;
  // The amax of a matrix and of its transpose are the same: no copy needed.
  const float amax = fp8::compute_amax(op.data, std::size_t(op.rows) * std::size_t(op.cols));
  s.state->delayed().record(s.state->tensor_index(s.layer, s.operand), amax);
}

void fp8_gemm(const gemm_call& call) {
  if (call.a_scaling == nullptr || call.b_scaling == nullptr || call.a_scaling->state == nullptr) {
    throw std::logic_error("fp8_gemm: an FP8 GEMM needs the scaling of both operands");
  }
  const quantized_operand qa = quantize_operand(call.a, *call.a_scaling);
  const quantized_operand qb = quantize_operand(call.b, *call.b_scaling);
  const int m = qa.rows, n = qb.rows, k = qa.cols;

  if (call.mode == gemm_mode::fake_fp8) {
    const std::vector<float> a = fake_quantized_values(qa), b = fake_quantized_values(qb);
    float_gemm({a.data(), m, k}, {b.data(), n, k}, call.c, call.accumulate);
    return;
  }

  const std::vector<float> a = fp8_values(qa), b = fp8_values(qb);
  const auto layout_a = fp8::make_scale_layout(qa.quant.granularity, std::size_t(m), std::size_t(k));
  const auto layout_b = fp8::make_scale_layout(qb.quant.granularity, std::size_t(n), std::size_t(k));
  // The K extent over which both operands keep one scale: all of K (per tensor, per row), 128
  // (tiles, blocks) or 32 (MX). Block edges are 32 or 128, so the smaller divides the larger.
  const std::size_t k_block = std::min({layout_a.block_cols, layout_b.block_cols, std::size_t(k)});
  const auto a_matrix = as_matrix(a.data(), m, k);
  const auto b_matrix = as_matrix(b.data(), n, k);
  const bool single_block = k_block == std::size_t(k);
  // With one K block and nothing to accumulate into, the products go straight into C.
  row_matrix partial(single_block && !call.accumulate ? 0 : m, single_block && !call.accumulate ? 0 : n);
  float* products = partial.size() == 0 ? call.c : partial.data();
  auto product_matrix = as_matrix(products, m, n);
  for (std::size_t k0 = 0; k0 < std::size_t(k); k0 += k_block) {
    const auto width = Eigen::Index(std::min(k_block, std::size_t(k) - k0));
    // FP32 accumulation of exact FP8 products, one K block at a time (as block-scaled tensor-core
    // kernels promote each block's partial sums to FP32 and scale them).
    product_matrix.noalias() = a_matrix.middleCols(Eigen::Index(k0), width) *
                               b_matrix.middleCols(Eigen::Index(k0), width).transpose();
    const std::vector<float> sa = row_scales(qa, layout_a, k0), sb = row_scales(qb, layout_b, k0);
    const bool add = call.accumulate || k0 > 0;
    FP8_TRAINER_PARALLEL_FOR
    for (int i = 0; i < m; ++i) {
      float* c_row = call.c + std::size_t(i) * std::size_t(n);
      const float* p_row = products + std::size_t(i) * std::size_t(n);
      const float scale_a = sa[std::size_t(i)];
      for (int j = 0; j < n; ++j) {
        const float scaled = p_row[j] * (scale_a * sb[std::size_t(j)]);
        c_row[j] = add ? c_row[j] + scaled : scaled;
      }
    }
  }
}

}  // namespace trainer

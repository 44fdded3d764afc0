// The precision policy: which number format every GEMM and every stored activation uses, for the
// three training precisions (fp32, bf16, fp8) and the FP8 debugging switches (see docs/design.md).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include <fp8/scaling/amax_history.hpp>
#include <fp8/scaling/gemm_operand.hpp>
#include <fp8/scaling/granularity.hpp>
#include <fp8/scaling/recipe.hpp>

namespace trainer {

// The training precision chosen with --precision.
//  fp32: everything float.
//  bf16: BF16 weights and activations, FP32 master weights and optimizer ("O2").
//  fp8:  bf16 plus every linear-layer GEMM in FP8 through the library's scaling recipes.
enum class precision { fp32, bf16, fp8 };

// How one GEMM runs.
//  fp32:     float operands, float result.
//  bf16:     BF16 operands, FP32 accumulation, result rounded to BF16 (or kept FP32 for wgrad).
//  fp8:      operands quantized to FP8 with the recipe's scales, products of the FP8 values
//            accumulated in FP32, inverse scales applied: what an FP8 tensor core computes.
//  fake_fp8: operands quantized to FP8 and dequantized back to BF16, then a bf16 GEMM.
enum class gemm_mode { fp32, bf16, fp8, fake_fp8 };

// The three GEMMs of a linear layer Y = X W^T, fp8::gemm_kind: fprop (Y), dgrad (dX = dY W), wgrad
// (dW = dY^T X). Arrays per GEMM are indexed by its value.
inline constexpr int gemm_kind_count = 3;

// Where a result is kept: float, or rounded to the nearest BF16 value (stored in a float).
enum class storage { fp32, bf16 };

// --- The FP8 recipe switches (made into the library's scaling recipes in scaling_state.cpp). ---
struct fp8_recipe {
  fp8::scaling_mode recipe = fp8::scaling_mode::delayed;  // delayed: from the amax history; current: own amax
  int amax_history_length = 1024;                         // Transformer Engine's DelayedScaling default
  fp8::amax_algorithm algorithm = fp8::amax_algorithm::max;
  int margin = 0;
  fp8::format_mix formats = fp8::format_mix::hybrid;  // hybrid: E4M3 forward tensors, E5M2 gradients
  // The granularity of activations and gradients; weights follow the library's presets:
  //   per_tensor, per_row: the same for weights (a row of the operand as the GEMM reads it);
  //   tile_1x128: 128x128 blocks for weights (DeepSeek-V3, fp8::current_scaling::blockwise);
  //   mx_1x32: OCP MX, 1x32 blocks with E8M0 scales everywhere (fp8::current_scaling::mx).
  // block_128x128 alone is not a recipe of its own.
  fp8::granularity scale_granularity = fp8::granularity::per_tensor;
};

struct precision_policy {
  precision base = precision::fp32;
  // For the linear layers of an fp8 run: fp8, fake_fp8 or bf16 per GEMM class (index: fp8::gemm_kind).
  std::array<gemm_mode, gemm_kind_count> linear_modes{gemm_mode::fp8, gemm_mode::fp8, gemm_mode::fp8};
  // The GPU's FP8 products of each class: Hopper's fast accumulation or not (run_options'). The CPU's
  // emulation accumulates exactly in FP32 either way.
  std::array<bool, gemm_kind_count> fast_accumulation{true, false, false};
  // Per linear-layer unit (a transformer block, the head, an MLP layer): true keeps it in BF16.
  std::vector<bool> bf16_units;
  fp8_recipe recipe;

  // Activations, activation gradients and compute weights are rounded to BF16 in bf16 and fp8 runs.
  storage activation_storage() const { return base == precision::fp32 ? storage::fp32 : storage::bf16; }
  // The mode of a linear layer's GEMM of class `which` in unit `unit`.
  gemm_mode linear_mode(int unit, fp8::gemm_kind which) const;
  // The mode of every other GEMM (attention scores and values): fp32 or bf16, never FP8.
  gemm_mode other_mode() const { return base == precision::fp32 ? gemm_mode::fp32 : gemm_mode::bf16; }
  // True when some linear GEMM quantizes to FP8 (really or fake).
  bool uses_fp8() const;
};

// The same policy with every GEMM in BF16: the reference of a shadow step.
precision_policy bf16_policy_like(const precision_policy& policy);

// The nearest BF16 value (ties to even) as a float: the value fp8::bfloat16(value) holds. Inf stays
// Inf; NaN becomes BF16's canonical NaN. The library's fp8::round_to_bfloat16 does the work.
float round_to_bf16(float value);
// Rounds a buffer in place (vectorised: fp8/quantize/bfloat16_bulk.hpp).
void round_to_bf16(float* data, std::size_t count);
// Applies a storage precision to a freshly computed buffer.
inline void store(storage where, float* data, std::size_t count) {
  if (where == storage::bf16) round_to_bf16(data, count);
}

const char* to_string(precision value);
const char* to_string(gemm_mode value);
const char* to_string(fp8::gemm_kind value);
const char* to_string(fp8::scaling_mode value);
// The command line's names of the library's recipe settings (--amax-algo, --format, --granularity).
const char* to_string(fp8::amax_algorithm value);
const char* to_string(fp8::format_mix value);
const char* to_string(fp8::granularity value);  // tensor, row, block, mx (block_128x128: "block_128x128")

}  // namespace trainer

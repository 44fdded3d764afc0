// The precision policy: which number format every GEMM and every stored activation uses, for the
// three training precisions (fp32, bf16, fp8) and the FP8 debugging switches (see docs/design.md).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

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

// The three GEMMs of a linear layer Y = X W^T: fprop (Y), dgrad (dX = dY W), wgrad (dW = dY^T X).
enum class gemm_class { fprop = 0, dgrad = 1, wgrad = 2 };
inline constexpr int gemm_class_count = 3;

// Where a result is kept: float, or rounded to the nearest BF16 value (stored in a float).
enum class storage { fp32, bf16 };

// --- The FP8 recipe switches (mapped onto the library's scaling recipes in scaling_state.cpp). ---
enum class scaling_recipe { delayed, current };
enum class amax_algorithm { max, most_recent };
enum class format_mix { hybrid, e4m3 };  // hybrid: E4M3 forward tensors, E5M2 gradients
// tensor: one scale per tensor; row: one per row of the operand as the GEMM reads it (K contiguous);
// block: 1x128 tiles for activations and gradients, 128x128 blocks for weights (DeepSeek-V3);
// mx: OCP MX, 1x32 blocks with power-of-two E8M0 scales.
enum class granularity { tensor, row, block, mx };

struct fp8_recipe {
  scaling_recipe recipe = scaling_recipe::delayed;
  int amax_history_length = 1024;  // Transformer Engine's DelayedScaling default
  amax_algorithm algorithm = amax_algorithm::max;
  int margin = 0;
  format_mix formats = format_mix::hybrid;
  granularity scale_granularity = granularity::tensor;
};

struct precision_policy {
  precision base = precision::fp32;
  // For the linear layers of an fp8 run: fp8, fake_fp8 or bf16 per GEMM class (index: gemm_class).
  std::array<gemm_mode, gemm_class_count> linear_modes{gemm_mode::fp8, gemm_mode::fp8, gemm_mode::fp8};
  // Per linear-layer unit (a transformer block, the head, an MLP layer): true keeps it in BF16.
  std::vector<bool> bf16_units;
  fp8_recipe recipe;

  // Activations, activation gradients and compute weights are rounded to BF16 in bf16 and fp8 runs.
  storage activation_storage() const { return base == precision::fp32 ? storage::fp32 : storage::bf16; }
  // The mode of a linear layer's GEMM of class `which` in unit `unit`.
  gemm_mode linear_mode(int unit, gemm_class which) const;
  // The mode of every other GEMM (attention scores and values): fp32 or bf16, never FP8.
  gemm_mode other_mode() const { return base == precision::fp32 ? gemm_mode::fp32 : gemm_mode::bf16; }
  // True when some linear GEMM quantizes to FP8 (really or fake).
  bool uses_fp8() const;
};

// The same policy with every GEMM in BF16: the reference of a shadow step.
precision_policy bf16_policy_like(const precision_policy& policy);

// The nearest BF16 value (ties to even) as a float: the value fp8::bfloat16(value) holds, computed
// with a few integer operations so that whole buffers vectorise. Inf stays Inf; NaN becomes BF16's
// canonical NaN.
float round_to_bf16(float value);
// Rounds a buffer in place.
void round_to_bf16(float* data, std::size_t count);
// Applies a storage precision to a freshly computed buffer.
inline void store(storage where, float* data, std::size_t count) {
  if (where == storage::bf16) round_to_bf16(data, count);
}

const char* to_string(precision value);
const char* to_string(gemm_mode value);
const char* to_string(gemm_class value);
const char* to_string(scaling_recipe value);
const char* to_string(amax_algorithm value);
const char* to_string(format_mix value);
const char* to_string(granularity value);

}  // namespace trainer

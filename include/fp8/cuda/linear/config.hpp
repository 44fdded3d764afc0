// The configuration of an FP8 linear layer on CUDA: sizes, bias, the per-operand scaling recipe and
// the precision of each of its three GEMMs. Plain host data (no CUDA needed), so it is tested on the CPU.
#pragma once

#include <cstdint>

#include "../../scaling/gemm_operand.hpp"
#include "../../scaling/recipe.hpp"

namespace fp8::cuda {

// What one GEMM class runs in:
//  fp8:      FP8 operands, cast by the layer with their operand's recipe, in an FP8 product;
//  bf16:     the BF16 operands as given, in a BF16 product;
//  fake_fp8: "fake quantization", a debugging mode: the operands are cast exactly as for fp8 (same
//            recipe, scales, copies and amaxes), dequantized back to BF16 (each FP8 value times its
//            inverse scale, rounded once to BF16), and multiplied in a BF16 product. If a run is fine
//            with fake_fp8 but not with fp8, the FP8 product is at fault, not the rounding of the data.
enum class gemm_precision : std::uint8_t { fp8 = 0, bf16 = 1, fake_fp8 = 2 };

constexpr const char* precision_name(gemm_precision precision) noexcept {
  switch (precision) {
    case gemm_precision::fp8: return "fp8";
    case gemm_precision::bf16: return "bf16";
    case gemm_precision::fake_fp8: break;
  }
  return "fake_fp8";
}

// True when the class reads FP8 copies of its operands (fp8, and fake_fp8 through their BF16 decode).
constexpr bool casts_to_fp8(gemm_precision precision) noexcept { return precision != gemm_precision::bf16; }

// One field per GEMM class, and fast accumulation per class (Transformer Engine's defaults: on for
// fprop, off for the gradients, whose long sums over tokens lose most without the FP32 promotion).
// Fast accumulation only applies to FP8 products with tensorwise or row-wise scales; block scaling
// always runs without it (cuBLASLt requires that), and BF16 and fake_fp8 products have none.
struct linear_precision {
  gemm_precision fprop = gemm_precision::fp8;
  gemm_precision dgrad = gemm_precision::fp8;
  gemm_precision wgrad = gemm_precision::fp8;
  bool fast_accumulation_fprop = true;
  bool fast_accumulation_dgrad = false;
  bool fast_accumulation_wgrad = false;

  // Every class in FP8 (the default), or every class in BF16: the baseline a user switches to with
  // `config.precision = fp8::cuda::linear_precision::bf16();`.
  static constexpr linear_precision fp8() noexcept { return {}; }
  static constexpr linear_precision bf16() noexcept {
    return {gemm_precision::bf16, gemm_precision::bf16, gemm_precision::bf16, true, false, false};
  }
  // The forward product in FP8, the gradients' in BF16: for inference (a forward casts X and W each
  // into one row-major copy and transposes nothing; docs/linear_layer.md, "Inference"), or a
  // training recipe that keeps the backward in BF16.
  static constexpr linear_precision fp8_forward() noexcept {
    return {gemm_precision::fp8, gemm_precision::bf16, gemm_precision::bf16, true, false, false};
  }
  // Every class fake-quantized: the first step of bisecting an FP8 divergence (if the loss then
  // matches BF16, put one class at a time back to fp8).
  static constexpr linear_precision fake_fp8() noexcept {
    return {gemm_precision::fake_fp8, gemm_precision::fake_fp8, gemm_precision::fake_fp8, true, false, false};
  }

  constexpr gemm_precision of(gemm_kind kind) const noexcept {
    switch (kind) {
      case gemm_kind::fprop: return fprop;
      case gemm_kind::dgrad: return dgrad;
      case gemm_kind::wgrad: break;
    }
    return wgrad;
  }
  constexpr bool fast_accumulation(gemm_kind kind) const noexcept {
    switch (kind) {
      case gemm_kind::fprop: return fast_accumulation_fprop;
      case gemm_kind::dgrad: return fast_accumulation_dgrad;
      case gemm_kind::wgrad: break;
    }
    return fast_accumulation_wgrad;
  }
};

// Y[M, N] = X[M, K] · W[N, K]ᵀ (+ bias[N]) with K = in_features, N = out_features and M (tokens) up
// to max_tokens per call. The layer allocates its FP8 copies for max_tokens once.
struct linear_config {
  std::int64_t in_features = 0;   // K
  std::int64_t out_features = 0;  // N
  std::int64_t max_tokens = 0;    // largest M of a forward / backward call
  bool bias = false;
  gemm_recipe recipe{};  // per operand: delayed / current scaling, format, granularity
  linear_precision precision{};
  // The bias gradient from the wgrad GEMM's BGRADB epilogue where cuBLASLt has it (a BF16 wgrad in
  // NT form; no FP8 product takes it); false, or an FP8 or fake FP8 wgrad: a column sum of the BF16 dY.
  bool fuse_bias_gradient = true;
  // In a call that records amaxes, the operands of BF16 classes record theirs too, so that their
  // histories stay warm for a later switch of the class to FP8 (and a checkpoint carries them). Where
  // the tensor is cast for its other operand, the cast's amax goes into both slots (at most a
  // one-thread kernel more); otherwise one amax-only read of the tensor (X and dY per call, W once
  // per weights_changed()). false: BF16 classes leave their slots alone, and a pure BF16 layer
  // launches nothing beyond its products.
  bool record_bf16_amax = true;
};

}  // namespace fp8::cuda

// The FP8 GEMM on the CPU, computed as an FP8 tensor core computes it: both operands quantized with
// the recipe's scales (fp8::quantize), the FP8 values multiplied exactly and accumulated in FP32,
// then the inverse scales applied per tensor, row, tile or block. Plus fake quantization.
#pragma once

#include <cstdint>
#include <vector>

#include <fp8/quantize.hpp>
#include <fp8/scaling.hpp>

#include "gemm.hpp"
#include "scaling_state.hpp"

namespace trainer {

// An operand after the cast, as the GEMM reads it: [rows, K], K contiguous.
struct quantized_operand {
  int rows = 0;
  int cols = 0;
  fp8::quantization quant;          // format, granularity, margin, power-of-two scales
  std::vector<std::uint8_t> codes;  // [rows, cols] FP8 codes
  // 1 / scale per block, in fp8::make_scale_layout(quant.granularity, rows, cols) order (for MX the
  // E8M0 codes decoded to floats; they are powers of two, so exact).
  std::vector<float> scale_inv;
  std::vector<std::uint8_t> scale_e8m0;  // MX only: the E8M0 codes themselves
  float amax = 0.0f;                     // of the unscaled operand
};

// Casts `op` (transposing first where the GEMM reads the transpose, as the GPU's fused cast +
// transpose does) with the recipe of its (layer, operand): delayed scaling uses the state's current
// scale; current scaling takes each block's own amax. Records the amax when s.record_amax and logs
// statistics when s.stats is set.
quantized_operand quantize_operand(const gemm_matrix& op, const operand_scaling& s);

// For an operand of a linear GEMM that runs in BF16 in a bf16 or fp8 run: records its amax (so that
// switching the GEMM to FP8 later starts from a warm history) and, on statistics steps, logs what FP8
// would do to it.
void observe_operand(const gemm_matrix& op, const operand_scaling& s);

// gemm() in the fp8 and fake_fp8 modes (call.a_scaling and call.b_scaling must be set).
//  fp8:      C (+)= sum over K blocks of (A_fp8 . B_fp8^T) * scale_inv_a * scale_inv_b, where each
//            product of two FP8 values is exact in float (4 x 4 significant bits) and the sums are
//            FP32, so only the accumulation order can differ from a tensor core.
//  fake_fp8: A and B cast to FP8 and back to BF16 (fp8::dequantize into fp8::bfloat16), then the
//            BF16 GEMM.
void fp8_gemm(const gemm_call& call);

}  // namespace trainer

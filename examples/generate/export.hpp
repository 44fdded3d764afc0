// Writes a quantized model as safetensors that other tools can load:
//   wte, lm_head                      BF16 (never quantized)
//   blocks.L.attn_norm, .mlp_norm, final_norm   F32
//   blocks.L.{wqkv,wo,w_gate_up,w_down}         F8_E4M3 [out, in] with
//     <name>.weight_scale_inv         F32 [1] (per tensor) or [out] (per channel): W ~ fp8 * scale_inv
//     <name>.input_scale_inv          F32 [1] (static activations only)
//   blocks.L.k_cache_scale_inv, .v_cache_scale_inv   F32 [heads] (FP8 KV cache only)
// In BF16 weight mode the linear weights are BF16. Metadata: format "fp8-generate-quantized", the
// model shape (model.*) and the quantization switches (quant.*).
#pragma once

#include <string>

#include "checkpoint_model.hpp"
#include "engine.hpp"

namespace generate {

inline constexpr const char* quantized_format = "fp8-generate-quantized";

// Writes atomically (PATH.tmp, then renamed): a failure leaves no file at `path` and no temporary.
// Throws std::runtime_error naming the path on I/O errors.
void write_quantized_model(const std::string& path, const engine& model, const checkpoint_model& source);

}  // namespace generate

// Host-side planning of the GPU transformer's linear layers: their sizes, the precision of each GEMM
// class from the trainer's precision policy, and the recipe the device scaling state is built from.
// Plain host code (no CUDA), tested on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <fp8/cuda/linear/config.hpp>
#include <fp8/scaling/recipe.hpp>

#include "../model.hpp"
#include "../parameters.hpp"
#include "../precision.hpp"

namespace trainer::cuda {

// In and out features (K, N) of linear layer `linear` of the transformer `shape`, in the host
// model's scaling-state order: per block wqkv (C -> 3C), wo (C -> C), w_gate_up (C -> 2F), w_down
// (F -> C), then lm_head (C -> V). Throws fp8::invalid_argument past the last layer.
struct linear_features {
  std::int64_t in = 0;   // K
  std::int64_t out = 0;  // N
};
linear_features transformer_linear_features(const model_options& shape, std::size_t linear);
// The same for the MLP (../mlp.hpp): fc1 (W*E -> M), fc2 .. fcL (M -> M), then head (M -> V).
linear_features mlp_linear_features(const model_options& shape, std::size_t linear);
// The features of the first `count` linear layers of the model `shape.kind` names, in that order.
std::vector<linear_features> linear_features_of(const model_options& shape, std::size_t count);

// The GEMM classes of the linear layers of precision unit `unit` (a block or the head): all BF16 in
// a bf16 run, and in an fp8 run FP8, fake_fp8 or BF16 as policy.linear_mode says (--bf16-layers,
// --first-last-bf16, the LM head unless --fp8-head, --fprop/--dgrad/--wgrad fake|bf16, --fake-quant).
// An fp32 run has no layer form: fp8::invalid_argument.
fp8::cuda::linear_precision linear_precision_of(const precision_policy& policy, int unit);

// [offset, offset + count) of the packed parameter buffers (a parameter_set's element order).
struct parameter_range {
  std::size_t offset = 0;
  std::size_t count = 0;
};
// The elements of every tensor in `specs` (packed in that order) but `linear_weights` (the tensors
// the linear layers read as W, each named once), adjacent ones merged into one range: what a device
// model's kernels add gradients into and read as floats, while each linear weight's gradient is
// its layer's wgrad product and its weight the layer's BF16 copy. Throws std::logic_error for a
// tensor that does not exist or is named twice.
std::vector<parameter_range> ranges_except(const std::vector<tensor_spec>& specs,
                                           const std::vector<std::size_t>& linear_weights);

// `recipe`'s operands with `delayed` as its delayed-scaling configuration (the host scaling state's),
// so that the device state converts to and from the checkpoint's host state even when every operand
// uses current scaling (their amax histories stay warm with that configuration on both devices).
fp8::gemm_recipe device_recipe(const fp8::gemm_recipe& recipe, const fp8::delayed_scaling& delayed);

}  // namespace trainer::cuda

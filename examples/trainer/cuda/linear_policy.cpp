// The GPU transformer's linear-layer planning (host code).
#include "linear_policy.hpp"

#include <stdexcept>
#include <string>

#include <fp8/error.hpp>

namespace trainer::cuda {

namespace {

fp8::cuda::gemm_precision precision_of(gemm_mode mode, fp8::gemm_kind which) {
  switch (mode) {
    case gemm_mode::fp8: return fp8::cuda::gemm_precision::fp8;
    case gemm_mode::bf16: return fp8::cuda::gemm_precision::bf16;
    case gemm_mode::fake_fp8: return fp8::cuda::gemm_precision::fake_fp8;
    case gemm_mode::fp32: break;
  }
  throw fp8::invalid_argument(std::string("trainer::cuda::linear_precision_of: ") + to_string(which) +
                              " runs in " + to_string(mode) + ", which the GPU linear layer does not have");
}

}  // namespace

linear_features transformer_linear_features(const model_options& shape, std::size_t linear) {
  const std::int64_t C = shape.channels, F = shape.hidden, V = shape.vocab;
  const std::size_t blocks = std::size_t(shape.layers);
  if (linear > 4 * blocks) {
    throw fp8::invalid_argument("trainer::cuda::transformer_linear_features: linear layer " +
                                std::to_string(linear) + " of a transformer with " +
                                std::to_string(4 * blocks + 1) + " linear layers");
  }
  if (linear == 4 * blocks) return {C, V};
  switch (linear % 4) {
    case 0: return {C, 3 * C};
    case 1: return {C, C};
    case 2: return {C, 2 * F};
    default: break;
  }
  return {F, C};
}

linear_features mlp_linear_features(const model_options& shape, std::size_t linear) {
  const std::size_t layers = std::size_t(shape.layers);
  if (linear > layers) {
    throw fp8::invalid_argument("trainer::cuda::mlp_linear_features: linear layer " + std::to_string(linear) +
                                " of an MLP with " + std::to_string(layers + 1) + " linear layers");
  }
  const std::int64_t in = linear == 0 ? std::int64_t(shape.window) * shape.channels : shape.hidden;
  return {in, linear == layers ? std::int64_t(shape.vocab) : std::int64_t(shape.hidden)};
}

std::vector<linear_features> linear_features_of(const model_options& shape, std::size_t count) {
  const bool mlp = shape.kind == "mlp";
  std::vector<linear_features> features;
  for (std::size_t i = 0; i < count; ++i) {
    features.push_back(mlp ? mlp_linear_features(shape, i) : transformer_linear_features(shape, i));
  }
  return features;
}

fp8::cuda::linear_precision linear_precision_of(const precision_policy& policy, int unit) {
  fp8::cuda::linear_precision p = fp8::cuda::linear_precision::bf16();
  if (policy.base == precision::bf16) return p;
  if (policy.base != precision::fp8) {
    throw fp8::invalid_argument("trainer::cuda::linear_precision_of: the GPU linear layer has no FP32 path");
  }
  p.fprop = precision_of(policy.linear_mode(unit, fp8::gemm_kind::fprop), fp8::gemm_kind::fprop);
  p.dgrad = precision_of(policy.linear_mode(unit, fp8::gemm_kind::dgrad), fp8::gemm_kind::dgrad);
  p.wgrad = precision_of(policy.linear_mode(unit, fp8::gemm_kind::wgrad), fp8::gemm_kind::wgrad);
  p.fast_accumulation_fprop = policy.fast_accumulation[std::size_t(fp8::gemm_kind::fprop)];
  p.fast_accumulation_dgrad = policy.fast_accumulation[std::size_t(fp8::gemm_kind::dgrad)];
  p.fast_accumulation_wgrad = policy.fast_accumulation[std::size_t(fp8::gemm_kind::wgrad)];
  return p;
}

std::vector<parameter_range> ranges_except(const std::vector<tensor_spec>& specs,
                                           const std::vector<std::size_t>& linear_weights) {
  std::vector<bool> excluded(specs.size(), false);
  for (const std::size_t tensor : linear_weights) {
    if (tensor >= specs.size() || excluded[tensor]) {
      throw std::logic_error("trainer::cuda::ranges_except: tensor " + std::to_string(tensor) +
                             (tensor >= specs.size()
                                  ? " does not exist (" + std::to_string(specs.size()) + " tensors)"
                                  : " is the weight of two linear layers"));
    }
    excluded[tensor] = true;
  }
  std::vector<parameter_range> ranges;
  std::size_t offset = 0;
  for (std::size_t t = 0; t < specs.size(); offset += specs[t].size(), ++t) {
    const std::size_t count = specs[t].size();
    if (excluded[t] || count == 0) continue;
    if (!ranges.empty() && ranges.back().offset + ranges.back().count == offset) {
      ranges.back().count += count;
    } else {
      ranges.push_back({offset, count});
    }
  }
  return ranges;
}

fp8::gemm_recipe device_recipe(const fp8::gemm_recipe& recipe, const fp8::delayed_scaling& delayed) {
  fp8::gemm_recipe out(delayed);
  for (std::size_t op = 0; op < fp8::gemm_operand_count; ++op) {
    out.use(fp8::gemm_operand(op), recipe[fp8::gemm_operand(op)]);
  }
  return out;
}

}  // namespace trainer::cuda

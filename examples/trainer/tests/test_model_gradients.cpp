// Whole-model gradient checks: the transformer's and the MLP's backward passes against central finite
// differences of the loss with respect to sampled parameters of every tensor (FP32).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "gradient_check.hpp"
#include "model.hpp"
#include "parallel.hpp"

using namespace trainer;
using namespace trainer::testing;

namespace {

// Checks `samples` entries of every parameter tensor of `m` (FP32 policy, random weights of scale
// `weight_scale` so that every path carries a visible gradient).
void check_model(model& m, int batch, int context, float weight_scale, int samples) {
  const precision_policy policy{};
  pass_context pass;
  pass.policy = &policy;
  rng generator(21);
  parameter_set& params = m.parameters();
  for (float& w : params.master) w = float(generator.normal()) * weight_scale;
  params.refresh_compute(storage::fp32);
  std::vector<std::int32_t> inputs(std::size_t(batch * context)), targets(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = std::int32_t(generator.below(256));
    targets[i] = std::int32_t(generator.below(256));
  }
  params.zero_grad();
  m.forward(pass, inputs.data(), targets.data());
  m.backward(pass);
  const std::vector<float> analytic = params.grad;

  // The loss as a function of the compute weights (what the forward pass reads).
  const auto loss = [&] { return m.forward(pass, inputs.data(), targets.data()); };
  for (std::size_t t = 0; t < params.tensor_count(); ++t) {
    const tensor_spec& spec = params.specs()[t];
    std::vector<std::size_t> indices;
    for (int s = 0; s < samples; ++s)
      indices.push_back(params.offset(t) + std::size_t(generator.below(spec.size())));
    // The embedding's gradient is nonzero only in rows of bytes that occur: sample one of those too.
    if (spec.name == "wte")
      indices.push_back(params.offset(t) + std::size_t(inputs[0]) * std::size_t(spec.shape[1]));
    check_gradient(params.compute, analytic, loss, spec.name.c_str(), tolerance{}, indices);
  }
}

}  // namespace

TEST_CASE("transformer gradients match finite differences") {
  set_thread_count(1);  // tiny tensors: thread start-up would dominate on a busy machine
  model_options options;
  options.context = 6;
  options.channels = 8;
  options.layers = 2;
  options.heads = 2;
  options.hidden = 12;
  const int batch = 2;
  auto m = make_model(options, batch);
  check_model(*m, batch, options.context, 0.3f, 6);
}

TEST_CASE("mlp gradients match finite differences") {
  set_thread_count(1);  // tiny tensors: thread start-up would dominate on a busy machine
  model_options options;
  options.kind = "mlp";
  options.context = 6;
  options.channels = 4;
  options.window = 3;
  options.layers = 2;
  options.hidden = 10;
  const int batch = 2;
  auto m = make_model(options, batch);
  check_model(*m, batch, options.context, 0.3f, 6);
}

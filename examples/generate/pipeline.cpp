// Calibration, evaluation and generation loops.
#include "pipeline.hpp"

#include <algorithm>
#include <chrono>

#include "cross_entropy.hpp"
#include "data.hpp"

namespace generate {

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

calibration_scales calibrate(const checkpoint_model& model, const quant_config& config,
                             const std::vector<std::uint8_t>& train_text, int batches, int batch,
                             std::uint64_t seed) {
  quant_config reference;  // BF16 everywhere: the statistics of the model as it was trained
  engine observed(model, reference);
  calibration_observers observers;
  observed.observe(&observers);
  const int T = model.shape.context;
  trainer::batch_loader loader(train_text, batch, T, seed);
  std::vector<std::int32_t> inputs(std::size_t(batch) * std::size_t(T)), targets(inputs.size());
  std::vector<float> logits(std::size_t(T) * std::size_t(model.shape.vocab));
  for (int b = 0; b < batches; ++b) {
    loader.next(inputs.data(), targets.data());
    for (int s = 0; s < batch; ++s) {
      observed.reset();
      observed.forward(inputs.data() + std::size_t(s) * std::size_t(T), T, logits.data());
    }
  }
  return scales_from(observers, config);
}

eval_result evaluate(engine& model, const std::vector<std::uint8_t>& validation_text, int batch,
                     int max_batches) {
  const auto start = std::chrono::steady_clock::now();
  const int T = model.shape().context, V = model.shape().vocab;
  trainer::eval_windows windows(validation_text, batch, T, max_batches);
  std::vector<std::int32_t> inputs(std::size_t(batch) * std::size_t(T)), targets(inputs.size());
  std::vector<float> logits(std::size_t(T) * std::size_t(V)), probs(logits.size()),
      losses(static_cast<std::size_t>(T));
  double total = 0.0;
  eval_result result;
  for (int b = 0; b < windows.batches(); ++b) {
    windows.fill(b, inputs.data(), targets.data());
    for (int s = 0; s < batch; ++s) {
      const std::size_t at = std::size_t(s) * std::size_t(T);
      model.reset();
      model.forward(inputs.data() + at, T, logits.data());
      total += trainer::cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data() + at,
                                              T, V) *
               T;
      result.tokens += T;
    }
  }
  result.loss = total / double(result.tokens);
  result.seconds = seconds_since(start);
  return result;
}

generation_result generate_text(engine& model, sampler& pick, const std::vector<std::int32_t>& prompt,
                                int count, std::ostream* out) {
  const int T = model.shape().context, V = model.shape().vocab;
  generation_result result;
  std::vector<std::int32_t> text = prompt;
  std::vector<float> logits(std::size_t(T) * std::size_t(V));
  auto start = std::chrono::steady_clock::now();
  model.reset();
  model.forward(prompt.data(), int(prompt.size()), logits.data());
  const float* last = logits.data() + (prompt.size() - 1) * std::size_t(V);
  result.prompt_seconds = seconds_since(start);
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    const std::int32_t token = pick.next(last, V);
    result.tokens.push_back(token);
    text.push_back(token);
    if (out != nullptr) {
      out->put(char(token));
      out->flush();
    }
    if (i + 1 == count) break;
    if (model.length() == T) {
      // Full: keep the last half of the text and recompute its cache (positions restart at 0).
      const std::size_t keep = std::size_t(T / 2);
      model.reset();
      model.forward(text.data() + (text.size() - keep), int(keep), logits.data());
      last = logits.data() + (keep - 1) * std::size_t(V);
    } else {
      model.forward(&text.back(), 1, logits.data());
      last = logits.data();
    }
  }
  result.seconds = seconds_since(start);
  return result;
}

std::vector<float> recompute_last_logits(engine& model, const std::vector<std::int32_t>& tokens) {
  const int V = model.shape().vocab;
  std::vector<float> logits(tokens.size() * std::size_t(V));
  model.reset();
  model.forward(tokens.data(), int(tokens.size()), logits.data());
  return std::vector<float>(logits.end() - V, logits.end());
}

}  // namespace generate

// Greedy, temperature, top-k and top-p sampling.
#include "sampler.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace generate {

sampler::sampler(const sampling_options& options) : options_(options), generator_(options.seed) {
  if (!(options.temperature >= 0.0) || !std::isfinite(options.temperature))
    throw std::invalid_argument("--temperature must be >= 0");
  if (options.top_k < 0) throw std::invalid_argument("--top-k must be >= 0");
  if (!(options.top_p > 0.0 && options.top_p <= 1.0))
    throw std::invalid_argument("--top-p must be in (0, 1]");
}

int sampler::next(const float* logits, int vocab) {
  if (options_.temperature == 0.0) return int(std::max_element(logits, logits + vocab) - logits);
  const float z_max = *std::max_element(logits, logits + vocab);
  candidates_.clear();
  double total = 0.0;
  for (int j = 0; j < vocab; ++j) {
    const double p = std::exp((double(logits[j]) - double(z_max)) / options_.temperature);
    candidates_.push_back({p, j});
    total += p;
  }
  std::sort(candidates_.begin(), candidates_.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::size_t keep = candidates_.size();
  if (options_.top_k > 0) keep = std::min(keep, std::size_t(options_.top_k));
  if (options_.top_p < 1.0) {
    double mass = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
      mass += candidates_[i].first / total;
      if (mass >= options_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0.0;
  for (std::size_t i = 0; i < keep; ++i) kept += candidates_[i].first;
  const double u = generator_.uniform() * kept;
  double cumulative = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    cumulative += candidates_[i].first;
    if (u < cumulative) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace generate

// Picking the next byte from logits: greedy (temperature 0) or sampling with temperature, top-k and
// top-p (nucleus), reproducible for a seed (the trainer's xoshiro256** generator).
#pragma once

#include <cstdint>
#include <vector>

#include "rng.hpp"

namespace generate {

struct sampling_options {
  double temperature = 0.8;  // 0: greedy
  int top_k = 0;             // 0: all tokens
  double top_p = 1.0;        // 1: all tokens
  std::uint64_t seed = 1;
};

class sampler {
 public:
  explicit sampler(const sampling_options& options);
  // logits [vocab] -> a token. Greedy picks the first largest logit; otherwise the candidates are
  // sorted by probability (ties by index), cut to top_k and to the smallest prefix holding top_p of
  // the probability, renormalised, and one is drawn with one uniform number.
  int next(const float* logits, int vocab);

 private:
  sampling_options options_;
  trainer::rng generator_;
  std::vector<std::pair<double, int>> candidates_;
};

}  // namespace generate

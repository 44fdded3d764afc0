// The tiny FP8 run whose checkpoint the checkpoint fuzzer loads into, and whose saved checkpoint
// make_seeds writes as that fuzzer's seed: one definition, so the seed always fits the run.
#pragma once

#include "trainer.hpp"

namespace fp8_fuzz {

inline trainer::run_options tiny_run() {
  trainer::run_options o;
  o.data_file = FP8_FUZZ_TRAINER_TEXT;
  o.base_precision = trainer::precision::fp8;
  o.model.context = 8;
  o.model.channels = 8;
  o.model.layers = 1;
  o.model.heads = 2;
  o.model.hidden = 16;
  o.batch = 1;
  o.steps = 2;
  o.eval_batches = 1;
  o.threads = 1;
  o.recipe.amax_history_length = 4;
  return o;
}

}  // namespace fp8_fuzz

// What a forward or backward pass needs beyond its tensors: the precision policy, the FP8 scaling
// state, and whether this pass records amaxes and per-GEMM statistics.
#pragma once

#include "precision.hpp"

namespace trainer {

class scaling_state;
class tensor_stats_log;

struct pass_context {
  const precision_policy* policy = nullptr;
  scaling_state* scaling = nullptr;  // null in fp32 runs
  // Training steps record amaxes into the delayed-scaling histories (also for GEMMs that run in BF16,
  // so that switching them to FP8 later starts from a warm history); evaluation and shadow passes
  // leave the scaling state untouched.
  bool record_amax = false;
  tensor_stats_log* stats = nullptr;  // non-null on steps that log per-GEMM tensor statistics
};

}  // namespace trainer

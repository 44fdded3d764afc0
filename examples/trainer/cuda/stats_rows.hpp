// stats.csv on the GPU: the counts the linear layers' casts made on a statistics step, written as
// the CPU trainer's rows (same columns, same definitions). Plain host code, tested on the CPU.
#pragma once

#include <vector>

#include <fp8/cuda/linear/statistics.hpp>

#include "../model.hpp"
#include "../precision.hpp"
#include "../scaling_state.hpp"
#include "../tensor_stats.hpp"

namespace trainer::cuda {

// The CPU's tensor_stats of one operand: amax, scale range, saturated fraction of all elements,
// flushed fraction of the nonzero ones.
tensor_stats to_tensor_stats(const fp8::cuda::cast_statistics& counted);

// One row per operand the layers counted on this step: those of fp8 and fake classes (the copies
// their products read) and of BF16 classes (a scratch cast showing what FP8 would do to them, as
// the CPU's `bf16` rows); operands not `counted` get no row. Layers in the scaling state's order,
// operands in fp8::gemm_operand order. `counted[i]` belongs to layer infos[i]; the format and
// granularity columns come from the scaling state's recipe, the mode column from the policy (the
// CPU's names: fp8, fake, bf16; the layers' classes are the policy's, linear_precision_of).
void log_statistics(tensor_stats_log& log, const scaling_state& scaling, const precision_policy& policy,
                    const std::vector<linear_layer_info>& infos,
                    const std::vector<fp8::cuda::linear_statistics>& counted);

}  // namespace trainer::cuda

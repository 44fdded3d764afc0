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

// One row per operand the GPU cast to FP8 on this step (fp8 and fake classes; operands not
// `counted` get no row), layers in the scaling state's order and operands in fp8::gemm_operand
// order. `counted[i]` belongs to layer infos[i]; the format and granularity columns come from the
// scaling state's recipe, the mode column from the policy (as the CPU writes them).
void log_statistics(tensor_stats_log& log, const scaling_state& scaling, const precision_policy& policy,
                    const std::vector<linear_layer_info>& infos,
                    const std::vector<fp8::cuda::linear_statistics>& counted);

}  // namespace trainer::cuda

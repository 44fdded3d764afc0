// The GPU's statistics rows (host code).
#include "stats_rows.hpp"

#include <string>

#include <fp8/error.hpp>
#include <fp8/scaling/gemm_operand.hpp>

namespace trainer::cuda {

tensor_stats to_tensor_stats(const fp8::cuda::cast_statistics& counted) {
  tensor_stats stats;
  stats.amax = counted.amax;
  stats.scale_min = counted.scale_min;
  stats.scale_max = counted.scale_max;
  stats.saturated = counted.saturated_fraction();
  stats.flushed = counted.flushed_fraction();
  return stats;
}

void log_statistics(tensor_stats_log& log, const scaling_state& scaling, const precision_policy& policy,
                    const std::vector<linear_layer_info>& infos,
                    const std::vector<fp8::cuda::linear_statistics>& counted) {
  if (counted.size() > infos.size() || counted.size() > scaling.layer_count()) {
    throw fp8::invalid_argument("trainer::cuda::log_statistics: statistics of " +
                                std::to_string(counted.size()) + " layers for a model with " +
                                std::to_string(infos.size()) + " linear layers and a scaling state of " +
                                std::to_string(scaling.layer_count()));
  }
  for (std::size_t layer = 0; layer < counted.size(); ++layer) {
    for (std::size_t op = 0; op < fp8::gemm_operand_count; ++op) {
      const fp8::cuda::cast_statistics& s = counted[layer][op];
      if (!s.counted) continue;
      const auto operand = fp8::gemm_operand(op);
      const fp8::quantization& q = scaling.operand_recipe(operand).quant;
      log.add(scaling.layer_name(layer), fp8::operand_name(operand), fp8::format_name(q.format),
              to_string(policy.linear_mode(infos[layer].unit, fp8::gemm_of(operand))),
              fp8::granularity_name(q.granularity), to_tensor_stats(s));
    }
  }
}

}  // namespace trainer::cuda

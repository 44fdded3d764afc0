// --device: which switches each device supports, checked before anything is allocated.
#pragma once

#include "options.hpp"

namespace trainer {

// Throws std::invalid_argument naming the switch when `options` ask --device cuda for something it
// cannot do: a program built without CUDA (`cuda_built` false), MX scaling (cuBLASLt takes MX
// block scales on Blackwell only) or fused attention in an fp32 run. --device cpu accepts everything
// but --attention fused; --attention other than auto needs the transformer.
void check_device_options(const run_options& options, bool cuda_built);

}  // namespace trainer

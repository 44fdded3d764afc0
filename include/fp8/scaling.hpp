// Umbrella for the scaling recipes: formats per GEMM operand, granularities and scale layouts, scale
// formulas, amax histories, delayed and current scaling, amax reduction, and checkpointable state.
#pragma once

#include "scaling/amax_history.hpp"
#include "scaling/amax_reducer.hpp"
#include "scaling/checkpoint.hpp"
#include "scaling/checksum.hpp"
#include "scaling/delayed_scaling_state.hpp"
#include "scaling/fp8_format.hpp"
#include "scaling/gemm_operand.hpp"
#include "scaling/granularity.hpp"
#include "scaling/recipe.hpp"
#include "scaling/scale.hpp"

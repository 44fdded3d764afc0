// Everything of fp8 that needs nvcc: device conversions (hardware cvt on sm_89+), the quantize
// kernels and the device delayed-scaling state, with the host-compilable parts of fp8 they build on.
#pragma once

#include "cuda/amax.cuh"
#include "cuda/amax_tracker.cuh"
#include "cuda/block_quantize.cuh"
#include "cuda/cast_transpose.cuh"
#include "cuda/columnwise.cuh"
#include "cuda/convert.cuh"
#include "cuda/current_scaling.cuh"
#include "cuda/delayed_scaling.cuh"
#include "cuda/element.cuh"
#include "cuda/error.hpp"
#include "cuda/launch.cuh"
#include "cuda/quantize.cuh"
#include "cuda/scale.cuh"
#include "cuda/tile_transpose.cuh"
#include "cuda/transpose_codes.cuh"
#include "fp8.hpp"
#include "scaling.hpp"

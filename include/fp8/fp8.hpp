// Umbrella header: everything of fp8 that a plain host C++17 compiler can use: the types (also usable
// in CUDA device code), their stream output (operator<<, from <fp8/io.hpp>), scaling recipes, CPU
// quantization, and MXFP4 / MXFP6 / NVFP4 block scaling with the cuBLASLt scale layout. Eigen support
// is opt-in (<fp8/eigen.hpp>). Code that needs only the number types includes <fp8/types.hpp>, a
// fraction of this header's compile time (bench/compile_time.sh measures both).
#pragma once

#include "error.hpp"
#include "io.hpp"
#include "quantize.hpp"
#include "quantize/mx.hpp"
#include "quantize/nvfp4.hpp"
#include "quantize/scale_swizzle.hpp"
#include "scaling.hpp"
#include "types.hpp"
#include "version.hpp"

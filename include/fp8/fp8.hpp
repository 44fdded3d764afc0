// Umbrella header: everything of fp8 that a plain host C++17 compiler can use: the types (also usable
// in CUDA device code), their stream output (operator<<, from <fp8/io.hpp>), scaling recipes and CPU
// quantization. Eigen support is opt-in (<fp8/eigen.hpp>). Code that needs only the number types
// includes <fp8/types.hpp>, which costs a tenth of this header's compile time (bench/compile_time.sh).
#pragma once

#include "version.hpp"
#include "types.hpp"
#include "io.hpp"
#include "error.hpp"
#include "scaling.hpp"
#include "quantize.hpp"

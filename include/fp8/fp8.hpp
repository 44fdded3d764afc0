// Umbrella header: everything of fp8 that a plain host C++17 compiler can use: the types (also usable
// in CUDA device code), scaling recipes and CPU quantization. Eigen support is opt-in (<fp8/eigen.hpp>).
#pragma once

#include "version.hpp"
#include "config.hpp"
#include "format.hpp"
#include "convert.hpp"
#include "float8.hpp"
#include "limits.hpp"
#include "error.hpp"
#include "scaling.hpp"
#include "quantize.hpp"

// Umbrella header: everything of fp8 that a plain host C++17 compiler can use (and that nvcc can
// use in device code). Eigen support is opt-in through <fp8/eigen.hpp>.
#pragma once

#include "version.hpp"
#include "config.hpp"
#include "format.hpp"
#include "convert.hpp"
#include "float8.hpp"
#include "limits.hpp"
#include "error.hpp"

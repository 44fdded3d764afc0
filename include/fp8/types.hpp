// The number types alone: format descriptors, the conversion routine, fp8::minifloat and its aliases
// (fp8_e4m3, fp8_e5m2, fp4_e2m1, fp6_e2m3, ...), std::numeric_limits and packed sub-byte storage.
// Dependency-free and cheap to include (no <ostream>, no containers, no exceptions); it is what
// device code and headers that only need the types should include. Stream output: <fp8/io.hpp>.
#pragma once

#include "config.hpp"
#include "convert.hpp"
#include "float8.hpp"
#include "format.hpp"
#include "limits.hpp"
#include "packed.hpp"

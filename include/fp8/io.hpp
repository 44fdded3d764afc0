// Stream output for the fp8 types. Kept out of <fp8/float8.hpp> so that code using the types does
// not pay for <ostream>; <fp8/fp8.hpp> includes it, so the umbrella still offers everything.
#pragma once

#include <ostream>

#include "float8.hpp"

namespace fp8 {

// Prints the value as float prints it ("448", "-0.001953125", "nan", "inf").
template <class Format>
std::ostream& operator<<(std::ostream& out, minifloat<Format> x) {
  return out << static_cast<float>(x);
}

}  // namespace fp8

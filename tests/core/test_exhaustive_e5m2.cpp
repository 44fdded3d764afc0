// Every float input to E5M2 in four policies, against the reference and CUDA's host conversion.
#include "exhaustive_float.hpp"

TEST_CASE("every float converts to E5M2 exactly as the reference and CUDA do") {
  exhaustive::check_all_floats<fp8::e5m2_format>(reference::e5m2, __NV_E5M2);
}

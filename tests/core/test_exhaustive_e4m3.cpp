// Every float input to E4M3 in four policies, against the reference and CUDA's host conversion.
#include "exhaustive_float.hpp"

TEST_CASE("every float converts to E4M3 exactly as the reference and CUDA do") {
  exhaustive::check_all_floats<fp8::e4m3_format>(reference::e4m3, __NV_E4M3);
}

// fp8 library version. CMake reads these three macros, so a vendored copy of include/ carries its
// version with it.
#pragma once

#define FP8_VERSION_MAJOR 0
#define FP8_VERSION_MINOR 1
#define FP8_VERSION_PATCH 0

#define FP8_VERSION (FP8_VERSION_MAJOR * 10000 + FP8_VERSION_MINOR * 100 + FP8_VERSION_PATCH)

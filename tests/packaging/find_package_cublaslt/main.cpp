// Links through fp8::cublaslt alone: fp8's headers and cuBLASLt must both come with it. Runs the shared
// conversion checks and asks the cuBLASLt library for its version (which needs no GPU).
#include <cublasLt.h>

#include <cstdio>

#include "../consumer_checks.hpp"

int main() {
  int wrong = consumer::count_wrong_conversions();
  // cublasLtGetVersion() is major * 10000 + minor * 100 + patch: the library linked must be the one
  // whose header was compiled against.
  const std::size_t library_version = cublasLtGetVersion();
  const std::size_t version_scale = 10000;
  if (library_version / version_scale != CUBLAS_VER_MAJOR) {
    std::printf("wrong: cuBLASLt library version %zu, header major version %d\n", library_version,
                CUBLAS_VER_MAJOR);
    ++wrong;
  }
  std::printf("fp8 %d.%d.%d with cuBLASLt %zu: %d wrong\n", FP8_VERSION_MAJOR, FP8_VERSION_MINOR,
              FP8_VERSION_PATCH, library_version, wrong);
  return wrong == 0 ? 0 : 1;
}

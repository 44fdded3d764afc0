// The program of the host packaging consumers (find_package, add_subdirectory, vendored headers): it
// runs the shared conversion checks and exits with 1 when one is wrong.
#include <cstdio>

#include "consumer_checks.hpp"

int main() {
  int wrong = consumer::count_wrong_conversions();
#if defined(FP8_PACKAGE_VERSION_MAJOR)
  // Given by the find_package consumer: the headers found must be those of the package version found.
  if (FP8_VERSION_MAJOR != FP8_PACKAGE_VERSION_MAJOR || FP8_VERSION_MINOR != FP8_PACKAGE_VERSION_MINOR ||
      FP8_VERSION_PATCH != FP8_PACKAGE_VERSION_PATCH) {
    std::printf("wrong: the headers say version %d.%d.%d, the package %d.%d.%d\n", FP8_VERSION_MAJOR,
                FP8_VERSION_MINOR, FP8_VERSION_PATCH, FP8_PACKAGE_VERSION_MAJOR, FP8_PACKAGE_VERSION_MINOR,
                FP8_PACKAGE_VERSION_PATCH);
    ++wrong;
  }
#endif
  std::printf("fp8 %d.%d.%d, C++ %ld: %d wrong\n", FP8_VERSION_MAJOR, FP8_VERSION_MINOR, FP8_VERSION_PATCH,
              long(__cplusplus), wrong);
  return wrong == 0 ? 0 : 1;
}

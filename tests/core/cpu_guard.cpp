// Ends a test program built for AVX2 or AVX-512 with the skip code 77 (SKIP_RETURN_CODE) when this CPU
// lacks the instruction set, before any code compiled for it runs. Compiled without those flags.
#include <cstdio>
#include <cstdlib>

namespace {

bool cpu_supports_build_target() {
  __builtin_cpu_init();
#if defined(FP8_TEST_REQUIRE_AVX512)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
#else
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#endif
}

struct guard {
  guard() {
    if (!cpu_supports_build_target()) {
      std::fprintf(stderr, "skipped: this CPU lacks the instruction set the test was built for\n");
      std::_Exit(77);
    }
  }
};

__attribute__((init_priority(101))) guard instance;

}  // namespace

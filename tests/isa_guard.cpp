// Runs before anything else in a test program built for AVX2 or AVX-512 and ends it with the skip
// code 77 (SKIP_RETURN_CODE in CMake) when the CPU or OS lacks the instruction set, so ctest reports
// the test as skipped instead of crashing on an illegal instruction or passing without running.
// This file is compiled without the instruction-set flags; it must not include fp8 headers.
#include <cpuid.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr int skip_return_code = 77;

// CPUID feature bits (Intel SDM vol. 2A, CPUID; AMD uses the same positions).
constexpr unsigned leaf1_ecx_fma = 1u << 12;
constexpr unsigned leaf1_ecx_osxsave = 1u << 27;
constexpr unsigned leaf1_ecx_avx = 1u << 28;
constexpr unsigned leaf1_ecx_f16c = 1u << 29;
constexpr unsigned leaf7_ebx_avx2 = 1u << 5;
// XCR0 bits the OS sets when it saves the registers: SSE and AVX (YMM) state.
constexpr std::uint64_t xcr0_avx_state = 0x6;
#if defined(FP8_TEST_REQUIRE_AVX512)
constexpr unsigned leaf7_ebx_avx512f = 1u << 16;
constexpr unsigned leaf7_ebx_avx512bw = 1u << 30;
constexpr unsigned leaf7_ebx_avx512vl = 1u << 31;
// Opmask, upper halves of ZMM0-15, ZMM16-31.
constexpr std::uint64_t xcr0_avx512_state = 0xE0;
#endif
#if defined(FP8_TEST_REQUIRE_AVX512_VBMI)
constexpr unsigned leaf7_ebx_avx512dq = 1u << 17;
constexpr unsigned leaf7_ecx_avx512vbmi = 1u << 1;
#endif

std::uint64_t read_xcr0() {
  std::uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (std::uint64_t(edx) << 32) | eax;
}

bool cpu_has_required_features() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned leaf1_ecx = ecx;
  const unsigned needed1 = leaf1_ecx_fma | leaf1_ecx_osxsave | leaf1_ecx_avx | leaf1_ecx_f16c;
  if ((leaf1_ecx & needed1) != needed1) return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned leaf7_ebx = ebx;
  const std::uint64_t xcr0 = read_xcr0();
  if ((xcr0 & xcr0_avx_state) != xcr0_avx_state || !(leaf7_ebx & leaf7_ebx_avx2)) return false;
#if defined(FP8_TEST_REQUIRE_AVX512)
  const unsigned needed7 = leaf7_ebx_avx512f | leaf7_ebx_avx512bw | leaf7_ebx_avx512vl;
#if defined(FP8_TEST_REQUIRE_AVX512_VBMI)
  if ((leaf7_ebx & leaf7_ebx_avx512dq) == 0 || (ecx & leaf7_ecx_avx512vbmi) == 0) return false;
#endif
  return (leaf7_ebx & needed7) == needed7 && (xcr0 & xcr0_avx512_state) == xcr0_avx512_state;
#elif defined(FP8_TEST_REQUIRE_AVX2)
  return true;
#else
#error "define FP8_TEST_REQUIRE_AVX512 or FP8_TEST_REQUIRE_AVX2"
#endif
}

struct isa_guard {
  isa_guard() {
    if (!cpu_has_required_features()) {
      std::fprintf(stderr,
                   "skipped: this CPU or OS lacks %s; the test of that instruction set cannot run here\n",
                   FP8_TEST_ISA_DESCRIPTION);
      std::fflush(stderr);
      std::_Exit(skip_return_code);
    }
  }
};

// Priority 101 (the first one available to programs) runs this before every default-priority
// initializer, including those of the translation units compiled for the instruction set.
__attribute__((init_priority(101))) isa_guard guard;

}  // namespace

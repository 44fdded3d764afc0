// See allocation_cap.cpp: the test binary's operator new refuses single allocations above the cap.
#pragma once

#include <cstddef>

namespace fp8_test {
// 64 MiB: far above what any test of a loader needs, far below what a lying length field asks for.
inline constexpr std::size_t allocation_cap = std::size_t(64) << 20;
// The largest allocation granted so far (reset it before the code under test runs).
extern std::size_t largest_allocation;
}  // namespace fp8_test

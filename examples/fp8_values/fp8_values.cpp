// What FP8 does to a few values: for E4M3 and E5M2, under each rounding mode and overflow policy, the
// code a value becomes, the value that code stands for, and the relative error.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>

#include <fp8/fp8.hpp>

namespace {

// Stochastic rounding draws: each cell shows the mean of this many conversions of the same value.
constexpr int stochastic_draws = 10000;

const double inf = std::numeric_limits<double>::infinity();
const double nan = std::numeric_limits<double>::quiet_NaN();
const double inputs[] = {0.1, 1.0 / 3, 300, 448, 464, 465, 500, 57344, 61440, 1e-3, 0x1p-10, -0.0, nan, inf};

// One cell: the code (or the two codes stochastic rounding chose between), the value it decodes to
// (the mean, for stochastic rounding), and the relative error of that value.
template <class Fp8, fp8::rounding Rounding, fp8::overflow Overflow>
void print_cell(double x, std::mt19937& generator) {
  const int draws = Rounding == fp8::rounding::stochastic ? stochastic_draws : 1;
  unsigned low_code = std::numeric_limits<unsigned>::max(), high_code = 0;
  double sum = -0.0;  // not 0.0: 0.0 + -0.0 is +0, and -0 should print as -0
  for (int i = 0; i < draws; ++i) {
    const Fp8 y = fp8::convert<Fp8, Rounding, Overflow>(x, std::uint32_t(generator()));
    low_code = std::min<unsigned>(low_code, y.bits());
    high_code = std::max<unsigned>(high_code, y.bits());
    sum += static_cast<double>(y);
  }
  const double value = sum / draws;
  char codes[16];
  if (low_code == high_code) {
    std::snprintf(codes, sizeof codes, "0x%02X", low_code);
  } else {
    std::snprintf(codes, sizeof codes, "0x%02X/%02X", low_code, high_code);
  }
  std::printf(" | %-7s %-12.7g", codes, value);
  if (x != 0 && std::isfinite(x) && std::isfinite(value)) {
    std::printf(" %+8.2f%%", 100 * (value - x) / std::fabs(x));
  } else {
    std::printf(" %9s", "");
  }
}

template <class Fp8, fp8::overflow Overflow>
void print_table(const char* overflow_rule) {
  std::printf("\n%s, %s\n", Fp8::format::name, overflow_rule);
  std::printf("%12s | %-30s | %-30s | %s\n", "input", "nearest even", "toward zero", "stochastic");
  std::mt19937 generator(1);  // random bits for stochastic rounding; fixed seed, same table every run
  for (const double x : inputs) {
    std::printf("%12.7g", x);
    print_cell<Fp8, fp8::rounding::nearest_even, Overflow>(x, generator);
    print_cell<Fp8, fp8::rounding::toward_zero, Overflow>(x, generator);
    print_cell<Fp8, fp8::rounding::stochastic, Overflow>(x, generator);
    std::printf("\n");
  }
}

template <class Fp8>
void print_format() {
  using limits = std::numeric_limits<Fp8>;
  std::printf("\n== %s: largest %.7g, smallest normal %.7g, smallest subnormal %.7g, infinity: %s\n",
              Fp8::format::name, static_cast<double>(limits::max()), static_cast<double>(limits::min()),
              static_cast<double>(limits::denorm_min()), limits::has_infinity ? "yes" : "no");
  print_table<Fp8, fp8::overflow::saturate>("saturate: overflow and +-Inf give +-largest, NaN stays NaN");
  const char* nonsaturating_rule = limits::has_infinity ? "nonsaturating: overflow gives +-Inf"
                                                        : "nonsaturating: overflow and +-Inf give NaN";
  print_table<Fp8, fp8::overflow::nonsaturating>(nonsaturating_rule);
}

}  // namespace

int main() {
  std::printf(
      "fp8 %d.%d.%d. Each cell: code, value, relative error. Overflow is judged after rounding.\n"
      "The default, fp8::fp8_e4m3(x), is nearest even + saturate (as CUDA's __nv_fp8_e4m3(x)).\n"
      "Stochastic: the two codes it chose between and the mean value of %d draws.\n",
      FP8_VERSION_MAJOR, FP8_VERSION_MINOR, FP8_VERSION_PATCH, stochastic_draws);
  // The everyday conversion is the constructor; fp8::convert<>() below spells out the other policies.
  const fp8::fp8_e4m3 y(0.1f);
  std::printf("\nfp8::fp8_e4m3(0.1f): code 0x%02X, value %.7g\n", y.bits(), static_cast<float>(y));
  print_format<fp8::fp8_e4m3>();
  print_format<fp8::fp8_e5m2>();
}

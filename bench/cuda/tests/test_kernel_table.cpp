// bench_trainer's kernel table (kernel_table.hpp) on the CPU: the names it shows, its sums per
// kernel, the time in which something ran, and the lines of kernels.csv and timeline.csv.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../kernel_table.hpp"

using fp8_bench::kernel_table;
using fp8_bench::readable_kernel_name;

TEST_CASE("readable_kernel_name: demangled, without the return type and the parameter list") {
  // Mangled by the Itanium C++ ABI, as GCC and nvcc's host side write them.
  CHECK(readable_kernel_name("_ZN3fp84cuda6detail15quantize_kernelIfLi128EEEvPKT_i") ==
        "fp8::cuda::detail::quantize_kernel<float, 128>");
  // A template argument that is a cast holds parentheses of its own.
  CHECK(readable_kernel_name("_Z1fILN3fp88roundingE0EEvv") == "f<(fp8::rounding)0>");
  // The anonymous namespace opens with a parenthesis; a function with no template has no return type.
  CHECK(readable_kernel_name("_ZN12_GLOBAL__N_16kernelEv") == "(anonymous namespace)::kernel");
  CHECK(readable_kernel_name("_Z6kernelPfi") == "kernel");
  // extern "C" names (cuBLASLt's, cuDNN's) and text that is no mangled name stay as they are.
  CHECK(readable_kernel_name("sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128") ==
        "sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128");
  CHECK(readable_kernel_name("[memset]") == "[memset]");
  CHECK(readable_kernel_name("") == "");
  // Unbalanced parentheses (not a demangled name) lose nothing.
  CHECK(readable_kernel_name("odd)") == "odd)");
}

TEST_CASE(
    "kernel_table: calls and time per kernel, the longest first; overlaps counted once in the busy time") {
  kernel_table table;
  table.add("a", 100, 110);
  table.add("b", 105, 115);  // overlaps a (another stream)
  table.add("a", 120, 130);
  table.add("d", 150, 145);  // a record CUPTI could not complete: a call of no time
  table.add("c", 140, 140);
  CHECK(table.calls() == 5);
  CHECK(table.summed_nanoseconds() == 30.0);
  CHECK(table.busy_nanoseconds() == 25.0);  // [100, 115] and [120, 130]
  const std::vector<fp8_bench::kernel_time> rows = table.by_time();
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].name == "a");
  CHECK(rows[0].calls == 2);
  CHECK(rows[0].nanoseconds == 20.0);
  CHECK(rows[1].name == "b");
  CHECK(rows[2].name == "c");  // equal times in the order of their names
  CHECK(rows[3].name == "d");
  CHECK(rows[3].calls == 1);
  CHECK(rows[3].nanoseconds == 0.0);
  CHECK(kernel_table().busy_nanoseconds() == 0.0);
}

TEST_CASE("kernel_table: the busy time is the union of the executions, whatever their order") {
  std::mt19937 generator(7);
  for (int trial = 0; trial < 200; ++trial) {
    CAPTURE(trial);
    kernel_table table;
    std::vector<bool> covered(400, false);  // one flag per nanosecond [t, t + 1)
    double longest = 0.0;
    const int count = int(generator() % 12);
    for (int i = 0; i < count; ++i) {
      const std::uint64_t start = generator() % 300, length = generator() % 100;
      table.add(std::string(1, char('a' + generator() % 4)), start, start + length);
      for (std::uint64_t t = start; t < start + length; ++t) covered[t] = true;
      longest = std::max(longest, double(length));
    }
    const double expected = double(std::count(covered.begin(), covered.end(), true));
    CHECK(table.busy_nanoseconds() == expected);
    CHECK(table.busy_nanoseconds() <= table.summed_nanoseconds());
    CHECK(table.busy_nanoseconds() >= longest);
  }
}

TEST_CASE("kernel_csv_lines: per traced step, names quoted, the longest first") {
  kernel_table table;
  table.add("quantize<float, 128>", 0, 3'000'000);
  table.add("say \"hi\"", 0, 1'000'000);
  table.add("quantize<float, 128>", 5'000'000, 6'000'000);
  table.add("say \"hi\"", 7'000'000, 8'000'000);
  table.add("say \"hi\"", 9'000'000, 9'500'000);
  // Two traced steps: 4 ms of quantize in 2 calls is 2 ms and 1 call per step.
  CHECK(fp8_bench::kernel_csv_lines("fp8", table, 2) ==
        "fp8,\"quantize<float, 128>\",1,2\n"
        "fp8,\"say \"\"hi\"\"\",1.5,1.25\n");
  CHECK(fp8_bench::kernel_csv_lines("bf16", kernel_table(), 1).empty());
}

TEST_CASE("timeline_csv_lines: every execution in the order the GPU started them, from the first") {
  kernel_table table;
  table.add("second", 5'000'500, 5'002'750);
  table.add("first, with a comma", 5'000'000, 5'000'400);
  table.add("third", 5'010'000, 5'009'000);  // incomplete: no time
  CHECK(fp8_bench::timeline_csv_lines("fp8", table) ==
        "fp8,0.000,0.400,\"first, with a comma\"\n"
        "fp8,0.500,2.250,\"second\"\n"
        "fp8,10.000,0.000,\"third\"\n");
  const std::vector<fp8_bench::kernel_execution> ordered = table.timeline();
  REQUIRE(ordered.size() == 3);
  CHECK(ordered[0].name == "first, with a comma");
  CHECK(ordered[2].end == ordered[2].start);
  CHECK(fp8_bench::timeline_csv_lines("bf16", kernel_table()).empty());
}

TEST_CASE("kernel_table: a record without times is counted apart, out of the calls and the timeline") {
  kernel_table table;
  table.add("timed", 5'000'000, 5'000'400);
  table.add("untimed", 0, 0);  // CUPTI's mark of a record it could not time
  table.add("timed", 5'001'000, 5'001'100);
  CHECK(table.untimed() == 1);
  CHECK(table.calls() == 2);
  CHECK(table.summed_nanoseconds() == 500.0);
  REQUIRE(table.by_time().size() == 1);
  CHECK(table.by_time()[0].name == "timed");
  // The origin stays the first timed execution's start, not 0.
  CHECK(fp8_bench::timeline_csv_lines("fp8", table) ==
        "fp8,0.000,0.400,\"timed\"\n"
        "fp8,1.000,0.100,\"timed\"\n");
}

// bench_trainer's kernel trace on a GPU: what a known sequence of launches, a memset and a copy
// leaves in the table (names, counts, times), and that a second trace in the same process starts
// from nothing, as bench_trainer's second precision needs.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <fp8/cuda/error.hpp>

#include "../kernel_trace.hpp"
#include "gpu_skip.hpp"

namespace trace_test {

// A kernel that runs long enough to be measured (a few microseconds), with template arguments so
// that the table's name shows them. Unsigned or float arithmetic: overflow is defined.
template <class T, int Rounds>
__global__ void spin(T* out, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  T value = out[i];
  for (int r = 0; r < Rounds; ++r) value = value * T(3) + T(1);
  out[i] = value;
}

}  // namespace trace_test

namespace {

const fp8_bench::kernel_time* find(const std::vector<fp8_bench::kernel_time>& rows, const std::string& name) {
  for (const fp8_bench::kernel_time& row : rows) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

std::string names(const std::vector<fp8_bench::kernel_time>& rows) {
  std::string text;
  for (const fp8_bench::kernel_time& row : rows) text += row.name + "; ";
  return text;
}

}  // namespace

TEST_CASE("kernel_trace: the launches, the memset and the copy of a traced sequence, each with its count") {
  constexpr int n = 1 << 20;
  unsigned* a = nullptr;
  float* b = nullptr;
  FP8_CUDA_CHECK(cudaMalloc(&a, n * sizeof(unsigned)));
  FP8_CUDA_CHECK(cudaMalloc(&b, n * sizeof(float)));
  // Both kernels launched once before the trace: module loading (lazy since CUDA 12.2: at a
  // kernel's first launch) is not what the trace is about, and a kernel that ran before the trace
  // must not appear in it.
  trace_test::spin<unsigned, 64><<<n / 256, 256>>>(a, n);
  trace_test::spin<float, 8><<<n / 256, 256>>>(b, n);
  FP8_CUDA_CHECK(cudaDeviceSynchronize());

  for (int round = 0; round < 2; ++round) {  // the second trace starts from an empty table
    CAPTURE(round);
    fp8_bench::kernel_trace trace;
    FP8_CUDA_CHECK(cudaMemsetAsync(a, 0, n * sizeof(unsigned)));
    for (int i = 0; i < 5; ++i) trace_test::spin<unsigned, 64><<<n / 256, 256>>>(a, n);
    FP8_CUDA_CHECK(cudaGetLastError());
    trace_test::spin<float, 8><<<n / 256, 256>>>(b, n);
    FP8_CUDA_CHECK(cudaMemcpyAsync(b, a, n * sizeof(float), cudaMemcpyDeviceToDevice));
    const fp8_bench::kernel_table table = trace.stop();
    CHECK(trace.dropped() == 0);
    CHECK(trace.buffers_cut_short() == 0);
    CHECK(table.untimed() == 0);

    const std::vector<fp8_bench::kernel_time> rows = table.by_time();
    INFO("traced: " << names(rows));
    const fp8_bench::kernel_time* spin64 = find(rows, "trace_test::spin<unsigned int, 64>");
    const fp8_bench::kernel_time* spin8 = find(rows, "trace_test::spin<float, 8>");
    const fp8_bench::kernel_time* memset = find(rows, "[memset]");
    const fp8_bench::kernel_time* copy = find(rows, "[copy device to device]");
    REQUIRE(spin64 != nullptr);
    REQUIRE(spin8 != nullptr);
    REQUIRE(memset != nullptr);
    REQUIRE(copy != nullptr);
    CHECK(spin64->calls == 5);
    CHECK(spin8->calls == 1);
    CHECK(memset->calls == 1);
    CHECK(copy->calls == 1);
    CHECK(table.calls() == 8);  // nothing else ran, and nothing from before the trace
    // Every execution took time; 64 rounds per element take longer than 8 (five launches of them
    // against one, so by far).
    CHECK(spin64->nanoseconds > 0.0);
    CHECK(spin8->nanoseconds > 0.0);
    CHECK(spin64->nanoseconds > spin8->nanoseconds);
    // One stream: nothing ran at once, so the busy time is the executions' sum, and never more; the
    // slack of a microsecond per execution allows for a copy's or memset's timestamps, taken
    // otherwise than a kernel's, touching a neighbour's.
    CHECK(table.busy_nanoseconds() <= table.summed_nanoseconds());
    CHECK(table.summed_nanoseconds() - table.busy_nanoseconds() <= 1e3 * double(table.calls()));
  }
  FP8_CUDA_CHECK(cudaFree(a));
  FP8_CUDA_CHECK(cudaFree(b));
}

TEST_CASE("kernel_trace: one trace at a time") {
  fp8_bench::kernel_trace first;
  CHECK_THROWS_AS(fp8_bench::kernel_trace(), std::logic_error);
  first.stop();
  CHECK_THROWS_AS(first.stop(), std::logic_error);
}

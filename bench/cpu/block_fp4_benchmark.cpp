// float32 -> MXFP4 / MXFP6 / NVFP4 (and MXFP8, for comparison) quantization throughput on one core, beside
// memcpy of the same traffic, on Google Benchmark.
//
//   taskset -c 0 ./bench_cpu_block_fp4 [--benchmark_repetitions=5] [--benchmark_format=json]
//
// bytes_per_second counts bytes read + written (float input, packed elements, scales). The counter
// x_memcpy divides it by the rate of a memcpy that moves as many bytes (a copy of half the traffic:
// it reads that half and writes it), run right after each quantization in the same conditions (the
// same cache state and neighbours' load); x_memcpy = memcpy time / quantization time, so 0.5 means
// the quantizer moves its bytes at half memcpy's speed. Both sides are timed in this thread's CPU
// time, so other processes on a shared machine slow neither directly. (The bm_memcpy rows copy the
// whole float input in a loop of their own: a scale for the GB/s column, not the x_memcpy baseline.)
// The context line fp8_block_kernels names the kernel set (with "vbmi lookup" on AVX-512 VBMI CPUs).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <vector>

#include <fp8/quantize.hpp>
#include <fp8/quantize/isa.hpp>
#include <fp8/quantize/mx.hpp>
#include <fp8/quantize/nvfp4.hpp>

namespace {

// Deterministic training-like data: values over many binades, a few outliers.
std::vector<float> make_input(std::size_t n) {
  std::vector<float> data(n);
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  for (auto& x : data) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const auto u = std::uint32_t(state >> 32);
    const float mantissa = float(u & 0xFFFFu) / 65536.0f + 0.5f;
    const int exponent = int((u >> 16) & 15u) - 8;
    x = ((u >> 31) ? -mantissa : mantissa) * float(1 << (exponent + 8)) / 256.0f;
  }
  return data;
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Runs `quantize` under the benchmark loop and reports its traffic and x_memcpy: after every run (and
// outside the timed region) a memcpy moving the same traffic runs in the same conditions (cache state,
// neighbours' load), and the ratio compares the two sums of this thread's CPU time.
template <class Function>
void run(benchmark::State& state, std::size_t traffic_bytes, Function&& quantize) {
  const std::size_t copy_bytes = traffic_bytes / 2;  // a copy of n bytes reads n and writes n
  std::vector<char> from(copy_bytes, 1), to(copy_bytes, 0);
  double quantize_seconds = 0, memcpy_seconds = 0;
  for (auto _ : state) {
    const double start = thread_cpu_seconds();
    quantize();
    benchmark::ClobberMemory();
    quantize_seconds += thread_cpu_seconds() - start;
    state.PauseTiming();
    const double copy_start = thread_cpu_seconds();
    std::memcpy(to.data(), from.data(), copy_bytes);
    benchmark::ClobberMemory();
    memcpy_seconds += thread_cpu_seconds() - copy_start;
    state.ResumeTiming();
  }
  benchmark::DoNotOptimize(to.data());
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(traffic_bytes));
  state.counters["x_memcpy"] = memcpy_seconds / quantize_seconds;
}

void bm_memcpy(benchmark::State& state) {
  const auto n = std::size_t(state.range(0));
  const std::size_t bytes = n * sizeof(float);
  std::vector<char> from(bytes, 1), to(bytes, 0);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(2 * bytes));
}

template <class Element>
void bm_mx(benchmark::State& state) {
  const auto n = std::size_t(state.range(0));
  const std::size_t cols = 4096, rows = n / cols;
  const auto in = make_input(n);
  std::vector<std::uint8_t> packed(fp8::packed_bytes<Element>(n)), scales(n / fp8::mx_block_size);
  run(state, n * sizeof(float) + packed.size() + scales.size(),
      [&] { fp8::quantize_mx<Element>(in.data(), rows, cols, packed.data(), scales.data()); });
}

// MXFP8 (E4M3 elements, one byte each) through fp8::quantize's mx_1x32 granularity, for comparison.
void bm_mxfp8(benchmark::State& state) {
  const auto n = std::size_t(state.range(0));
  const std::size_t cols = 4096, rows = n / cols;
  const auto in = make_input(n);
  std::vector<std::uint8_t> codes(n), scales(n / fp8::mx_block_size);
  const fp8::quantization q{fp8::fp8_format::e4m3, fp8::granularity::mx_1x32};
  run(state, n * sizeof(float) + codes.size() + scales.size(), [&] {
    benchmark::DoNotOptimize(fp8::quantize(in.data(), rows, cols, q, codes.data(), scales.data()));
  });
}

void bm_nvfp4(benchmark::State& state) {
  const auto n = std::size_t(state.range(0));
  const std::size_t cols = 4096, rows = n / cols;
  const auto in = make_input(n);
  std::vector<std::uint8_t> packed(n / 2), scales(n / fp8::nvfp4_block_size);
  // Includes the pass over the tensor for its amax (a second read of the input, not counted as traffic).
  run(state, n * sizeof(float) + packed.size() + scales.size(), [&] {
    benchmark::DoNotOptimize(fp8::quantize_nvfp4(in.data(), rows, cols, packed.data(), scales.data()));
  });
}

void bm_nvfp4_given_scale(benchmark::State& state) {
  const auto n = std::size_t(state.range(0));
  const std::size_t cols = 4096, rows = n / cols;
  const auto in = make_input(n);
  std::vector<std::uint8_t> packed(n / 2), scales(n / fp8::nvfp4_block_size);
  const auto tensor_scale = fp8::nvfp4_tensor_scale_from_amax(4096.0f);
  run(state, n * sizeof(float) + packed.size() + scales.size(),
      [&] { fp8::quantize_nvfp4(in.data(), rows, cols, tensor_scale, packed.data(), scales.data()); });
}

// 1 Mi elements (4 MiB, cache-resident on large caches) and 16 Mi elements (64 MiB, from memory).
constexpr std::int64_t small_size = 1 << 20;
constexpr std::int64_t large_size = 1 << 24;

BENCHMARK(bm_memcpy)->Arg(small_size)->Arg(large_size)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_mx<fp8::e2m1_format>)
    ->Name("mxfp4")
    ->Arg(small_size)
    ->Arg(large_size)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_mx<fp8::e3m2_format>)
    ->Name("mxfp6_e3m2")
    ->Arg(small_size)
    ->Arg(large_size)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_mxfp8)->Name("mxfp8_e4m3")->Arg(small_size)->Arg(large_size)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_nvfp4)->Name("nvfp4")->Arg(small_size)->Arg(large_size)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_nvfp4_given_scale)
    ->Name("nvfp4_given_tensor_scale")
    ->Arg(small_size)
    ->Arg(large_size)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("fp8_block_kernels", fp8::detail::block_kernels_name);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// CPU quantize throughput on Google Benchmark: each conversion through the build's kernels and
// through the scalar reference path, with a memcpy of the same traffic measured right after each
// fast row, on buffers far larger than the last-level cache.
//
//   taskset -c 0 ./bench_cpu_quantize [--elements=N] [--benchmark_repetitions=7]
//                                     [--benchmark_out=cpu.json --benchmark_out_format=json]
//   python3 bench/cpu/table.py cpu.json      # the markdown table of docs/cpu_quantize_benchmark.md
//
// Counters: bytes_per_second counts bytes read + bytes written; items_per_second elements.
// memcpy_bytes_per_second is a memcpy that moves as many bytes (a copy of (read + written) / 2
// bytes, the mean of as many copies as the row ran iterations, up to 20, timed right after them) and
// x_memcpy the ratio of the two. With
// --benchmark_repetitions, Google Benchmark adds the mean, median, standard deviation and
// coefficient of variation of every counter.
#include <benchmark/benchmark.h>

#include <fp8/quantize.hpp>
#include <fp8/scaling.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

// Deterministic data of training-like spread: normal-ish values over many binades, a few outliers.
void fill(std::vector<float>& data) {
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  for (auto& x : data) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const auto u = std::uint32_t(state >> 32);
    const float mantissa = float(u & 0xFFFFu) / 65536.0f + 0.5f;
    const int exponent = int((u >> 16) & 31u) - 20;
    x = ((u >> 31) ? -1.0f : 1.0f) * std::ldexp(mantissa, exponent);
  }
}

// The buffers every benchmark works on (built once, after the command line sets the size).
struct buffers {
  static constexpr std::size_t cols = 4096;  // matrix view for the 2-D rows
  std::size_t rows, elements;
  std::vector<float> f32, f32_out;
  std::vector<fp8::bfloat16> bf16;
  std::vector<std::uint8_t> codes, codes_e5m2;
  std::vector<float> tile_scales;
  float tensor_scale_inv = 0.0f;
  std::vector<unsigned char> copy_from, copy_to;

  explicit buffers(std::size_t requested)
      : rows(std::max<std::size_t>(1, requested / cols)),
        elements(rows * cols),
        f32(elements),
        f32_out(elements),
        bf16(elements),
        codes(elements),
        codes_e5m2(elements),
        tile_scales(fp8::scale_count(fp8::granularity::tile_1x128, rows, cols)),
        copy_from(elements * 9 / 2, 1),  // the largest traffic: 9 bytes per element
        copy_to(elements * 9 / 2, 2) {
    fill(f32);
    for (std::size_t i = 0; i < elements; ++i) bf16[i] = fp8::bfloat16(f32[i]);
    fp8::cast_to_fp8(f32.data(), elements, fp8::fp8_format::e4m3, codes.data());
    fp8::cast_to_fp8(f32.data(), elements, fp8::fp8_format::e5m2, codes_e5m2.data());
  }
};

buffers* data = nullptr;

// One conversion: bytes moved per element and its two implementations.
struct conversion {
  const char* name;
  double read_per_element;
  double written_per_element;
  std::function<void(buffers&)> fast;
  std::function<void(buffers&)> scalar;
};

std::vector<conversion> conversions() {
  using scalar = fp8::detail::scalar_ops;
  using fp8::detail::cast_span;
  using fp8::detail::decode_span;
  using e4m3 = fp8::e4m3_format;
  using e5m2 = fp8::e5m2_format;
  const fp8::quantization tile{fp8::fp8_format::e4m3, fp8::granularity::tile_1x128};
  const fp8::quantization tensor{fp8::fp8_format::e4m3, fp8::granularity::per_tensor};
  constexpr float delayed_scale = 3.0f;
  const double tile_scale_bytes = 4.0 / 128.0;
  return {
      {"float32 -> E4M3 (RNE, saturate)", 4, 1,
       [](buffers& b) { fp8::cast_to_fp8(b.f32.data(), b.elements, fp8::fp8_format::e4m3, b.codes.data()); },
       [](buffers& b) { cast_span<scalar, e4m3, false>(b.f32.data(), b.elements, 1.0f, b.codes.data()); }},
      {"float32 -> E5M2 (RNE, saturate)", 4, 1,
       [](buffers& b) {
         fp8::cast_to_fp8(b.f32.data(), b.elements, fp8::fp8_format::e5m2, b.codes_e5m2.data());
       },
       [](buffers& b) {
         cast_span<scalar, e5m2, false>(b.f32.data(), b.elements, 1.0f, b.codes_e5m2.data());
       }},
      {"bfloat16 -> E4M3", 2, 1,
       [](buffers& b) { fp8::cast_to_fp8(b.bf16.data(), b.elements, fp8::fp8_format::e4m3, b.codes.data()); },
       [](buffers& b) { cast_span<scalar, e4m3, false>(b.bf16.data(), b.elements, 1.0f, b.codes.data()); }},
      {"E4M3 -> float32", 1, 4,
       [](buffers& b) {
         fp8::dequantize(b.codes.data(), b.elements, fp8::fp8_format::e4m3, 1.0f, b.f32_out.data());
       },
       [](buffers& b) { decode_span<scalar, e4m3>(b.codes.data(), b.elements, 1.0f, b.f32_out.data()); }},
      {"E5M2 -> float32", 1, 4,
       [](buffers& b) {
         fp8::dequantize(b.codes_e5m2.data(), b.elements, fp8::fp8_format::e5m2, 1.0f, b.f32_out.data());
       },
       [](buffers& b) {
         decode_span<scalar, e5m2>(b.codes_e5m2.data(), b.elements, 1.0f, b.f32_out.data());
       }},
      {"quantize + amax, given scale (delayed)", 4, 1,
       [](buffers& b) {
         benchmark::DoNotOptimize(
             fp8::quantize(b.f32.data(), b.elements, fp8::fp8_format::e4m3, delayed_scale, b.codes.data()));
       },
       [](buffers& b) {
         benchmark::DoNotOptimize(
             cast_span<scalar, e4m3, true>(b.f32.data(), b.elements, delayed_scale, b.codes.data()));
       }},
      {"current scaling, per tensor (2 reads)", 8, 1,
       [tensor](buffers& b) {
         benchmark::DoNotOptimize(
             fp8::quantize(b.f32.data(), b.rows, b.cols, tensor, b.codes.data(), &b.tensor_scale_inv));
       },
       [tensor](buffers& b) {
         benchmark::DoNotOptimize(fp8::detail::quantize_blocks_with<scalar>(
             b.f32.data(), b.rows, b.cols, tensor, b.codes.data(), &b.tensor_scale_inv));
       }},
      {"current scaling, 1x128 tiles", 4, 1 + tile_scale_bytes,
       [tile](buffers& b) {
         benchmark::DoNotOptimize(
             fp8::quantize(b.f32.data(), b.rows, b.cols, tile, b.codes.data(), b.tile_scales.data()));
       },
       [tile](buffers& b) {
         benchmark::DoNotOptimize(fp8::detail::quantize_blocks_with<scalar>(
             b.f32.data(), b.rows, b.cols, tile, b.codes.data(), b.tile_scales.data()));
       }},
  };
}

// Mean seconds of `runs` memcpys of `bytes` bytes (timed as the conversion's iterations are, so that
// the ratio compares like with like).
double memcpy_seconds(buffers& b, std::size_t bytes, std::int64_t runs) {
  std::memcpy(b.copy_to.data(), b.copy_from.data(), bytes);  // warm-up
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t r = 0; r < runs; ++r) {
    std::memcpy(b.copy_to.data(), b.copy_from.data(), bytes);
    benchmark::ClobberMemory();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / double(runs);
}

void run_conversion(benchmark::State& state, const conversion& c, bool fast) {
  buffers& b = *data;
  const auto& run = fast ? c.fast : c.scalar;
  run(b);  // warm-up: page faults, frequency ramp
  const double traffic = double(b.elements) * (c.read_per_element + c.written_per_element);
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    run(b);
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                         double(state.iterations());
  state.SetBytesProcessed(std::int64_t(traffic) * state.iterations());
  state.SetItemsProcessed(std::int64_t(b.elements) * state.iterations());
  if (fast) {
    const double copy =
        memcpy_seconds(b, std::size_t(traffic / 2), std::min<std::int64_t>(state.iterations(), 20));
    state.counters["memcpy_bytes_per_second"] = traffic / copy;
    state.counters["x_memcpy"] = copy / seconds;
  }
}

std::size_t take_elements_flag(int& argc, char** argv) {
  std::size_t elements = std::size_t(64) << 20;  // 64 Mi elements: 256 MiB of float
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--elements=", 0) == 0) {
      char* end = nullptr;
      elements = std::strtoull(arg.c_str() + 11, &end, 10);
      if (*end != '\0' || elements == 0) {
        std::fprintf(stderr, "--elements takes a positive number of elements; got %s\n", arg.c_str() + 11);
        std::exit(2);
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return elements;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t elements = take_elements_flag(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  buffers shared(elements);
  data = &shared;
  benchmark::AddCustomContext("kernels", fp8::quantize_isa);
  benchmark::AddCustomContext("elements", std::to_string(shared.elements) + " (" +
                                              std::to_string(shared.rows) + " x " +
                                              std::to_string(buffers::cols) + ")");
  static const std::vector<conversion> all = conversions();
  for (const conversion& c : all) {
    for (const bool fast : {true, false}) {
      const std::string name = std::string(c.name) + "/kernels:" + (fast ? fp8::quantize_isa : "scalar");
      benchmark::RegisterBenchmark(name.c_str(),
                                   [&c, fast](benchmark::State& s) { run_conversion(s, c, fast); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// CPU quantize throughput: each conversion beside memcpy of the same traffic and beside the scalar
// reference path, all measured in this run on buffers far larger than the last-level cache.
//
//   taskset -c 0 ./bench_cpu_quantize [--elements N] [--repeats R] [--markdown]
//
// GB/s counts bytes read + bytes written. "x memcpy" divides by the GB/s of a memcpy that moves as
// many bytes (a copy of (read + written) / 2 bytes), "x scalar" by the scalar path's. Each figure is
// the best of R runs (the machine may be shared; the median is printed too).
#include <fp8/quantize.hpp>
#include <fp8/scaling.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct timing {
  double best;
  double median;
};

timing measure(int repeats, const std::function<void()>& run) {
  run();  // warm-up: page faults, frequency ramp
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    const auto start = clock_type::now();
    run();
    seconds.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return {seconds.front(), seconds[seconds.size() / 2]};
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

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

struct row {
  std::string name;
  std::size_t bytes_read;
  std::size_t bytes_written;
  std::function<void()> fast;
  std::function<void()> scalar;
};

}  // namespace

int main(int argc, char** argv) {
  std::size_t elements = std::size_t(64) << 20;  // 64 Mi elements: 256 MiB of float
  int repeats = 7;
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--elements" && i + 1 < argc) {
      elements = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (arg == "--markdown") {
      markdown = true;
    } else {
      std::fprintf(stderr, "usage: %s [--elements N] [--repeats R] [--markdown]\n", argv[0]);
      return 2;
    }
  }
  if (elements == 0 || repeats < 1) {
    std::fprintf(stderr, "--elements and --repeats must be positive\n");
    return 2;
  }
  const std::size_t cols = 4096;  // matrix view for the 1x128 rows: elements / 4096 rows
  const std::size_t rows = elements / cols;
  elements = rows * cols;

  std::vector<float> f32(elements), f32_out(elements);
  fill(f32);
  std::vector<fp8::bfloat16> bf16(elements);
  for (std::size_t i = 0; i < elements; ++i) bf16[i] = fp8::bfloat16(f32[i]);
  std::vector<std::uint8_t> codes(elements), codes_e5m2(elements);
  fp8::cast_to_fp8(f32.data(), elements, fp8::fp8_format::e4m3, codes.data());
  fp8::cast_to_fp8(f32.data(), elements, fp8::fp8_format::e5m2, codes_e5m2.data());
  const fp8::quantization tile{fp8::fp8_format::e4m3, fp8::granularity::tile_1x128};
  const fp8::quantization tensor{fp8::fp8_format::e4m3, fp8::granularity::per_tensor};
  std::vector<float> tile_scales(fp8::scale_count(tile.granularity, rows, cols));
  float tensor_scale_inv = 0.0f;
  const float delayed_scale = 3.0f;

  using scalar = fp8::detail::scalar_ops;
  using simd = fp8::detail::simd_ops;
  using fp8::detail::cast_span;
  using fp8::detail::decode_span;
  using e4m3 = fp8::e4m3_format;
  using e5m2 = fp8::e5m2_format;
  volatile float sink = 0.0f;  // keeps amaxes alive

  const std::size_t n = elements;
  const std::vector<row> rows_to_run = {
      {"float32 -> E4M3 (RNE, saturate)", 4 * n, n,
       [&] { fp8::cast_to_fp8(f32.data(), n, fp8::fp8_format::e4m3, codes.data()); },
       [&] { cast_span<scalar, e4m3, false>(f32.data(), n, 1.0f, codes.data()); }},
      {"float32 -> E5M2 (RNE, saturate)", 4 * n, n,
       [&] { fp8::cast_to_fp8(f32.data(), n, fp8::fp8_format::e5m2, codes_e5m2.data()); },
       [&] { cast_span<scalar, e5m2, false>(f32.data(), n, 1.0f, codes_e5m2.data()); }},
      {"bfloat16 -> E4M3", 2 * n, n, [&] { fp8::cast_to_fp8(bf16.data(), n, fp8::fp8_format::e4m3, codes.data()); },
       [&] { cast_span<scalar, e4m3, false>(bf16.data(), n, 1.0f, codes.data()); }},
      {"E4M3 -> float32", n, 4 * n, [&] { fp8::dequantize(codes.data(), n, fp8::fp8_format::e4m3, 1.0f, f32_out.data()); },
       [&] { decode_span<scalar, e4m3>(codes.data(), n, 1.0f, f32_out.data()); }},
      {"E5M2 -> float32", n, 4 * n,
       [&] { fp8::dequantize(codes_e5m2.data(), n, fp8::fp8_format::e5m2, 1.0f, f32_out.data()); },
       [&] { decode_span<scalar, e5m2>(codes_e5m2.data(), n, 1.0f, f32_out.data()); }},
      {"quantize + amax, given scale (delayed)", 4 * n, n,
       [&] { sink = fp8::quantize(f32.data(), n, fp8::fp8_format::e4m3, delayed_scale, codes.data()); },
       [&] { sink = float(cast_span<scalar, e4m3, true>(f32.data(), n, delayed_scale, codes.data())); }},
      {"current scaling, per tensor (2 reads)", 8 * n, n,
       [&] { sink = fp8::quantize(f32.data(), rows, cols, tensor, codes.data(), &tensor_scale_inv); },
       [&] { sink = fp8::detail::quantize_blocks_with<scalar>(f32.data(), rows, cols, tensor, codes.data(), &tensor_scale_inv); }},
      {"current scaling, 1x128 tiles", 4 * n, n + tile_scales.size() * 4,
       [&] { sink = fp8::quantize(f32.data(), rows, cols, tile, codes.data(), tile_scales.data()); },
       [&] { sink = fp8::detail::quantize_blocks_with<scalar>(f32.data(), rows, cols, tile, codes.data(), tile_scales.data()); }},
  };
  (void)simd::width;

  // memcpy of the same traffic, one buffer pair sized for the largest row.
  std::size_t largest = 0;
  for (const row& r : rows_to_run) largest = std::max(largest, (r.bytes_read + r.bytes_written) / 2);
  std::vector<unsigned char> copy_from(largest, 1), copy_to(largest, 2);

  std::printf("%s%s; kernels: %s; %zu elements (%zu x %zu, float buffer %zu MiB); best of %d runs%s\n",
              markdown ? "" : "# ", cpu_model().c_str(), fp8::quantize_isa, elements, rows, cols,
              elements * sizeof(float) >> 20, repeats, markdown ? "\n" : "");
  if (markdown) {
    std::printf("| conversion | GB/s | Gelem/s | memcpy GB/s | x memcpy | scalar GB/s | x scalar | median GB/s |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  } else {
    std::printf("%-40s %8s %8s %8s %9s %8s %9s %8s\n", "conversion", "GB/s", "Gelem/s", "memcpy", "x memcpy", "scalar",
                "x scalar", "median");
  }
  for (const row& r : rows_to_run) {
    const std::size_t traffic = r.bytes_read + r.bytes_written;
    const std::size_t copy_bytes = traffic / 2;
    const timing fast = measure(repeats, r.fast);
    const timing copy = measure(repeats, [&] { std::memcpy(copy_to.data(), copy_from.data(), copy_bytes); });
    const timing slow = measure(std::max(1, repeats / 3), r.scalar);
    const double gbps = double(traffic) / fast.best / 1e9;
    const double median_gbps = double(traffic) / fast.median / 1e9;
    const double memcpy_gbps = double(2 * copy_bytes) / copy.best / 1e9;
    const double scalar_gbps = double(traffic) / slow.best / 1e9;
    const double gelems = double(elements) / fast.best / 1e9;
    if (markdown) {
      std::printf("| %s | %.1f | %.2f | %.1f | %.2f | %.2f | %.1f | %.1f |\n", r.name.c_str(), gbps, gelems, memcpy_gbps,
                  gbps / memcpy_gbps, scalar_gbps, gbps / scalar_gbps, median_gbps);
    } else {
      std::printf("%-40s %8.1f %8.2f %8.1f %9.2f %8.2f %9.1f %8.1f\n", r.name.c_str(), gbps, gelems, memcpy_gbps,
                  gbps / memcpy_gbps, scalar_gbps, gbps / scalar_gbps, median_gbps);
    }
    std::fflush(stdout);
  }
  return sink == -1.0f ? 1 : 0;
}

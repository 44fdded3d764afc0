// Bandwidth of the quantize kernels beside a device-to-device copy moving the same number of bytes,
// measured in the same run: GB/s = (bytes read once + bytes written) / time, and the ratio to copy.
// Inputs are random normal values (a constant input would make every block's amax and scale alike
// and the conversion's data-dependent paths uniform); about a second of warm-up comes first; times
// are CUDA-event medians; the matrix (64 Mi elements, with --quick too) is far larger than L2.
//
//   bench_quantize <output-folder> [--quick]     (--quick: fewer repetitions, a shorter warm-up)
//
// quantize.csv: kernel,elements,bytes,ms,gbps,copy_gbps,ratio
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fp8/cuda.cuh>

#include "bench_rules.hpp"
#include "bench_support.cuh"

namespace {

using fp8_bench::device_memory;
using fp8_bench::fill_normal;
using fp8_bench::warm_up;

// Median time in ms of one call, over `repetitions` runs of `iterations` calls, after a short warm-up.
double time_ms(const std::function<void()>& call, int iterations, int repetitions) {
  warm_up(call, 0.05, 4);
  return fp8_bench::median_ms(call, repetitions, iterations);
}

struct measurement {
  std::string kernel;
  std::size_t elements;
  std::size_t bytes;  // read once + written
  std::function<void()> call;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <output-folder> [--quick]\n", argv[0]);
    return 2;
  }
  const std::string folder = argv[1];
  const bool quick = argc > 2 && std::string(argv[2]) == "--quick";
  try {
    int device = 0;
    FP8_CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp properties{};
    FP8_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    std::printf("device: %s (sm_%d%d)\n", properties.name, properties.major, properties.minor);

    // 64 Mi elements in both modes: the smallest traffic measured (BF16 in, E4M3 out) must not fit
    // the L2 (see quantize_matrix_side); the larger matrix costs --quick well under a second.
    const std::size_t rows = fp8_bench::quantize_matrix_side, cols = fp8_bench::quantize_matrix_side;
    const std::size_t n = rows * cols;
    device_memory in(n * sizeof(float)), out(n), out_t(n), scalars(64 * sizeof(float));
    device_memory scale_inv(fp8::scale_count(fp8::granularity::tile_1x128, rows, cols) * sizeof(float));
    device_memory wide(n * sizeof(float));  // copy source and destination, and dequantize output
    device_memory in_bf16(n * sizeof(__nv_bfloat16));
    fill_normal(in.as<float>(), n);
    fill_normal(in_bf16.as<__nv_bfloat16>(), n);
    const float* x = in.as<float>();
    const __nv_bfloat16* xb = in_bf16.as<__nv_bfloat16>();
    device_memory scale_inv_t(fp8::scale_count(fp8::granularity::tile_1x128, cols, rows) * sizeof(float));
    device_memory mx_scales(fp8::scale_count(fp8::granularity::mx_1x32, rows, cols));
    device_memory mx_scales_t(fp8::scale_count(fp8::granularity::mx_1x32, cols, rows));
    const fp8::quantization mx{fp8::fp8_format::e4m3, fp8::granularity::mx_1x32, 0, true};
    float* amax = scalars.as<float>();
    const fp8::cuda::tensor_scale given{scalars.as<float>() + 1, scalars.as<float>() + 2, amax};
    const float initial[3] = {0.0f, 1.0f, 1.0f};  // amax, scale, scale_inv
    FP8_CUDA_CHECK(cudaMemcpy(scalars.as<float>(), initial, sizeof initial, cudaMemcpyHostToDevice));
    const auto e4m3 = fp8::fp8_format::e4m3;
    const auto current = [&](fp8::granularity g) { return fp8::quantization{e4m3, g, 0, false}; };

    const std::vector<measurement> kernels = {
        {"quantize f32->e4m3 +amax", n, n * 5,
         [&] { fp8::cuda::quantize(x, n, e4m3, given, out.as<std::uint8_t>()); }},
        {"quantize bf16->e4m3 +amax", n, n * 3,
         [&] { fp8::cuda::quantize(xb, n, e4m3, given, out.as<std::uint8_t>()); }},
        {"quantize_transpose f32 +amax", n, n * 6,
         [&] {
           fp8::cuda::quantize_transpose(x, rows, cols, e4m3, given, out.as<std::uint8_t>(),
                                         out_t.as<std::uint8_t>());
         }},
        {"quantize_transpose bf16 +amax", n, n * 4,
         [&] {
           fp8::cuda::quantize_transpose(xb, rows, cols, e4m3, given, out.as<std::uint8_t>(),
                                         out_t.as<std::uint8_t>());
         }},
        {"compute_amax f32", n, n * 4, [&] { fp8::cuda::compute_amax(x, n, amax); }},
        {"current per_tensor f32 (2 reads)", n, n * 5,
         [&] {
           fp8::cuda::quantize(x, rows, cols, current(fp8::granularity::per_tensor), out.as<std::uint8_t>(),
                               scale_inv.as<float>(), amax);
         }},
        {"current per_row f32", n, n * 5,
         [&] {
           fp8::cuda::quantize(x, rows, cols, current(fp8::granularity::per_row), out.as<std::uint8_t>(),
                               scale_inv.as<float>(), amax);
         }},
        {"current tile_1x128 f32", n, n * 5,
         [&] {
           fp8::cuda::quantize(x, rows, cols, current(fp8::granularity::tile_1x128), out.as<std::uint8_t>(),
                               scale_inv.as<float>(), amax);
         }},
        {"current tile_1x128 bf16", n, n * 3,
         [&] {
           fp8::cuda::quantize(xb, rows, cols, current(fp8::granularity::tile_1x128), out.as<std::uint8_t>(),
                               scale_inv.as<float>(), amax);
         }},
        {"current block_128x128 f32", n, n * 5,
         [&] {
           fp8::cuda::quantize(x, rows, cols, current(fp8::granularity::block_128x128),
                               out.as<std::uint8_t>(), scale_inv.as<float>(), amax);
         }},
        {"current block_128x128 bf16", n, n * 3,
         [&] {
           fp8::cuda::quantize(xb, rows, cols, current(fp8::granularity::block_128x128),
                               out.as<std::uint8_t>(), scale_inv.as<float>(), amax);
         }},
        {"current block_128x128 bf16 +transpose", n, n * 4,
         [&] {
           fp8::cuda::quantize_transpose(xb, rows, cols, current(fp8::granularity::block_128x128),
                                         out.as<std::uint8_t>(), scale_inv.as<float>(),
                                         out_t.as<std::uint8_t>(), scale_inv_t.as<float>(), amax);
         }},
        {"current tile_1x128 bf16 +transpose", n, n * 4,
         [&] {
           fp8::cuda::quantize_transpose(xb, rows, cols, current(fp8::granularity::tile_1x128),
                                         out.as<std::uint8_t>(), scale_inv.as<float>(),
                                         out_t.as<std::uint8_t>(), scale_inv_t.as<float>(), amax);
         }},
        {"current mx_1x32 bf16", n, n * 3,
         [&] {
           fp8::cuda::quantize(xb, rows, cols, mx, out.as<std::uint8_t>(), mx_scales.as<std::uint8_t>(),
                               amax);
         }},
        {"current mx_1x32 bf16 +transpose (2 reads)", n, n * 4,
         [&] {
           fp8::cuda::quantize_transpose(xb, rows, cols, mx, out.as<std::uint8_t>(),
                                         mx_scales.as<std::uint8_t>(), out_t.as<std::uint8_t>(),
                                         mx_scales_t.as<std::uint8_t>(), amax);
         }},
        {"current per_tensor bf16 +transpose (2 reads)", n, n * 4,
         [&] {
           fp8::cuda::quantize_transpose(xb, rows, cols, current(fp8::granularity::per_tensor),
                                         out.as<std::uint8_t>(), scale_inv.as<float>(),
                                         out_t.as<std::uint8_t>(), scale_inv_t.as<float>(), amax);
         }},
        {"dequantize e4m3->bf16", n, n * 3,
         [&] {
           fp8::cuda::dequantize(out.as<std::uint8_t>(), n, e4m3, given.scale_inv, wide.as<__nv_bfloat16>());
         }},
    };

    std::ofstream csv(folder + "/quantize.csv");
    csv << "kernel,elements,bytes,ms,gbps,copy_gbps,ratio\n";
    std::printf("%-34s %12s %9s %9s %9s %7s\n", "kernel", "bytes", "ms", "GB/s", "copy GB/s", "ratio");
    const int iterations = quick ? 5 : 20, repetitions = quick ? 5 : 9;
    warm_up(kernels.front().call, quick ? 0.5 : 1.0, 4);
    for (const measurement& m : kernels) {
      // The ceiling: a copy that reads and writes the same total number of bytes, same run.
      const std::size_t half = m.bytes / 2;
      const double copy_ms = time_ms(
          [&] {
            FP8_CUDA_CHECK(cudaMemcpyAsync(wide.as<char>(), in.as<char>(), half, cudaMemcpyDeviceToDevice));
          },
          iterations, repetitions);
      const double ms = time_ms(m.call, iterations, repetitions);
      const double gbps = double(m.bytes) / (ms * 1e-3) / 1e9;
      const double copy_gbps = double(2 * half) / (copy_ms * 1e-3) / 1e9;
      csv << m.kernel << ',' << m.elements << ',' << m.bytes << ',' << ms << ',' << gbps << ',' << copy_gbps
          << ',' << gbps / copy_gbps << '\n';
      csv.flush();  // a run cut short by its time limit keeps the rows so far
      std::printf("%-34s %12zu %9.4f %9.1f %9.1f %7.2f\n", m.kernel.c_str(), m.bytes, ms, gbps, copy_gbps,
                  gbps / copy_gbps);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_quantize: %s\n", e.what());
    return 1;
  }
  return 0;
}

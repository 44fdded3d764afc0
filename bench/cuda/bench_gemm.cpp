// FP8 vs BF16 GEMM throughput through fp8::cublaslt (square sizes 512..16384 and the GEMMs of a
// 7B-class transformer layer, fast accumulation on and off, row-wise and block scales), and the
// wrapper's per-call overhead with and without its algorithm cache. Writes CSV files to a folder.
//
//   bench_gemm <output-folder> [--quick]
//
// gemm.csv: kind,label,m,n,k,variant,ms,tflops (m, n, k of the row-major Y[m,n] = X[m,k]·W[n,k]ᵀ).
// overhead.csv: variant,us_per_call. Times are CUDA-event medians of several repetitions.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fp8/cublaslt.hpp>

namespace lt = fp8::cublaslt;

namespace {

class device_memory {
 public:
  explicit device_memory(std::size_t bytes) {
    FP8_CUDA_CHECK(cudaMalloc(&data_, bytes));
    FP8_CUDA_CHECK(cudaMemset(data_, 0x3C, bytes));  // 1.0 in E4M3-ish codes / small bf16 values: no NaN
  }
  device_memory(const device_memory&) = delete;
  device_memory& operator=(const device_memory&) = delete;
  ~device_memory() { cudaFree(data_); }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

class event_timer {
 public:
  event_timer() {
    FP8_CUDA_CHECK(cudaEventCreate(&start_));
    FP8_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~event_timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  // Median over `repetitions` of the mean time of `iterations` back-to-back calls, in milliseconds.
  template <class Function>
  double time(Function&& call, int iterations, int repetitions) {
    for (int i = 0; i < 3; ++i) call();  // warm-up: plan building, clocks
    std::vector<double> samples;
    for (int r = 0; r < repetitions; ++r) {
      FP8_CUDA_CHECK(cudaEventRecord(start_));
      for (int i = 0; i < iterations; ++i) call();
      FP8_CUDA_CHECK(cudaEventRecord(stop_));
      FP8_CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0.0f;
      FP8_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      samples.push_back(double(ms) / iterations);
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

struct shape {
  std::string kind;   // "square" or "layer"
  std::string label;  // e.g. "qkv fprop"
  std::int64_t m, n, k;
  lt::gemm_purpose purpose;
};

// Llama-2-7B-like layer: hidden 4096, MLP 11008 (gate and up fused), 4096 tokens per step.
std::vector<shape> layer_shapes() {
  constexpr std::int64_t tokens = 4096, hidden = 4096, mlp = 11008;
  struct linear {
    const char* name;
    std::int64_t in, out;
  };
  const linear linears[] = {{"qkv", hidden, 3 * hidden}, {"attn_out", hidden, hidden}, {"gate_up", hidden, 2 * mlp},
                            {"down", mlp, hidden}};
  std::vector<shape> shapes;
  for (const linear& l : linears) {
    // fprop Y = X·Wᵀ; dgrad dX = dY·W (W transposed copy); wgrad dW = dYᵀ·X (transposed copies).
    shapes.push_back({"layer", std::string(l.name) + " fprop", tokens, l.out, l.in, lt::gemm_purpose::forward});
    shapes.push_back({"layer", std::string(l.name) + " dgrad", tokens, l.in, l.out, lt::gemm_purpose::gradient});
    shapes.push_back({"layer", std::string(l.name) + " wgrad", l.out, l.in, tokens, lt::gemm_purpose::gradient});
  }
  return shapes;
}

struct variant {
  std::string name;
  lt::data_type input;
  lt::scale_mode x_mode, w_mode;
  lt::fast_accumulation fast;
};

const variant variants[] = {
    {"bf16", lt::data_type::bf16, lt::scale_mode::tensorwise, lt::scale_mode::tensorwise, lt::fast_accumulation::off},
    {"fp8 fast_accum", lt::data_type::e4m3, lt::scale_mode::tensorwise, lt::scale_mode::tensorwise, lt::fast_accumulation::on},
    {"fp8 split_accum", lt::data_type::e4m3, lt::scale_mode::tensorwise, lt::scale_mode::tensorwise, lt::fast_accumulation::off},
    {"fp8 row_wise", lt::data_type::e4m3, lt::scale_mode::row_wise, lt::scale_mode::row_wise, lt::fast_accumulation::on},
    {"fp8 1x128x128x128", lt::data_type::e4m3, lt::scale_mode::block_1x128, lt::scale_mode::block_128x128,
     lt::fast_accumulation::off},
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
    lt::handle handle;
    std::printf("device: %s (sm_%d%d), cuBLASLt %zu\n", handle.device().name.c_str(), handle.device().major,
                handle.device().minor, cublasLtGetVersion());

    std::vector<shape> shapes;
    for (std::int64_t size = 512; size <= (quick ? 4096 : 16384); size *= 2) {
      shapes.push_back({"square", std::to_string(size), size, size, size, lt::gemm_purpose::forward});
    }
    for (const shape& s : layer_shapes()) shapes.push_back(s);

    std::ofstream csv(folder + "/gemm.csv");
    csv << "kind,label,m,n,k,variant,ms,tflops\n";
    event_timer timer;
    std::printf("%-8s %-16s %6s %6s %6s %-18s %9s %9s\n", "kind", "label", "m", "n", "k", "variant", "ms", "TFLOP/s");
    for (const shape& s : shapes) {
      const std::size_t mk = std::size_t(s.m * s.k), nk = std::size_t(s.n * s.k), mn = std::size_t(s.m * s.n);
      device_memory x(mk * 2), w(nk * 2), y(mn * 2);
      device_memory x_scales(sizeof(float) * std::size_t(lt::scale_tensor_elements(lt::scale_mode::block_1x128, s.m, s.k) + s.m));
      device_memory w_scales(sizeof(float) * std::size_t(lt::scale_tensor_elements(lt::scale_mode::block_1x128, s.n, s.k) + s.n));
      const double flop = 2.0 * double(s.m) * double(s.n) * double(s.k);
      const int iterations = flop > 1e12 ? 5 : (flop > 1e11 ? 20 : 100);
      for (const variant& v : variants) {
        lt::linear_problem p{};
        p.m = s.m;
        p.n = s.n;
        p.k = s.k;
        const bool fp8 = lt::is_fp8(v.input);
        p.x = {x.data(), v.input, 0, v.x_mode, fp8 ? static_cast<const float*>(x_scales.data()) : nullptr};
        p.w = {w.data(), v.input, 0, v.w_mode, fp8 ? static_cast<const float*>(w_scales.data()) : nullptr};
        p.y = {y.data(), lt::data_type::bf16};
        p.options.purpose = s.purpose;
        p.options.fast_accum = fp8 ? v.fast : lt::fast_accumulation::by_purpose;
        if (const auto why = lt::find_rejection(lt::to_gemm(p), handle.device())) {
          std::printf("%-8s %-16s %6lld %6lld %6lld %-18s skipped: %s\n", s.kind.c_str(), s.label.c_str(),
                      (long long)s.m, (long long)s.n, (long long)s.k, v.name.c_str(), why->cause.c_str());
          continue;
        }
        const double ms = timer.time([&] { handle.linear(p); }, iterations, quick ? 3 : 7);
        const double tflops = flop / (ms * 1e-3) / 1e12;
        csv << s.kind << ',' << s.label << ',' << s.m << ',' << s.n << ',' << s.k << ',' << v.name << ',' << ms << ','
            << tflops << '\n';
        std::printf("%-8s %-16s %6lld %6lld %6lld %-18s %9.4f %9.1f\n", s.kind.c_str(), s.label.c_str(), (long long)s.m,
                    (long long)s.n, (long long)s.k, v.name.c_str(), ms, tflops);
        std::fflush(stdout);
      }
    }

    // Per-call overhead: a tiny product whose kernel time is negligible, enqueued many times; the
    // host time per call with the cache (descriptors and algorithm reused) and without (built and
    // chosen by the heuristic every call, as frameworks without a cache do).
    std::ofstream overhead(folder + "/overhead.csv");
    overhead << "variant,us_per_call\n";
    device_memory a(64 * 64), b(64 * 64), d(64 * 64 * 2);
    lt::linear_problem tiny{};
    tiny.m = tiny.n = tiny.k = 64;
    tiny.x = {a.data(), lt::data_type::e4m3};
    tiny.w = {b.data(), lt::data_type::e4m3};
    tiny.y = {d.data(), lt::data_type::bf16};
    for (const bool cached : {true, false}) {
      handle.set_algorithm_cache(cached);
      // Batches short enough never to fill the launch queue, so the host never waits for the GPU.
      constexpr int batch = 64;
      const int batches = cached ? 200 : 40;
      handle.linear(tiny);
      FP8_CUDA_CHECK(cudaDeviceSynchronize());
      double host_us = 0.0;
      for (int round = 0; round < batches; ++round) {
        const auto begin = std::chrono::steady_clock::now();
        for (int i = 0; i < batch; ++i) handle.linear(tiny);
        const auto end = std::chrono::steady_clock::now();
        host_us += std::chrono::duration<double, std::micro>(end - begin).count();
        FP8_CUDA_CHECK(cudaDeviceSynchronize());
      }
      const double us = host_us / double(batch * batches);
      overhead << (cached ? "with_cache" : "without_cache") << ',' << us << '\n';
      std::printf("per-call host time %s the algorithm cache: %.2f us\n", cached ? "with" : "without", us);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm: %s\n", e.what());
    return 1;
  }
  return 0;
}

// FP8 vs BF16 GEMM throughput through fp8::cublaslt, with the ceilings measured in the same run:
// square sizes, a DeepSeek-V3 shape with row-wise and block scales, the GEMM set of a transformer
// layer (hidden 4096, FFN 16384, 15,872 tokens), the device-to-device copy bandwidth, and the
// wrapper's per-call host overhead with and without its plan cache. The 8192³ and DeepSeek-V3
// products are measured twice: with the heuristic's first algorithm, and tuned (every candidate
// timed, the fastest kept; variant names end in " tuned"). Every product's output is checked
// against a float64 reference at sampled elements; a wrong result fails the run.
//
//   bench_gemm <output-folder> [--quick] [--only M,N,K]
//
// Honest timing: random normal inputs (not a constant byte: tensor-core power and clocks depend on
// the data), several copies of the inputs rotated so that at least twice the L2 size is touched
// between reuses (no product runs from a warm cache), about a second of warm-up before the first
// measurement, CUDA-event medians over repetitions, and the device, driver and cuBLASLt versions
// printed and written beside the figures.
//
// gemm.csv: kind,label,m,n,k,variant,ms,tflops,max_error (m, n, k of the row-major Y = X·Wᵀ;
//   max_error: see sampled_error, over 256 sampled outputs).
// tuning.csv: kind,label,m,n,k,variant,candidates,ran,heuristic_ms,fastest_ms,heuristic_algorithm,
//   fastest_algorithm (what each tuning measured: the heuristic's pick's median time per call and
//   the fastest candidate's, and their configurations as cuBLASLt reports them).
// ceilings.csv: name,value,unit (copy bandwidth, device, versions). overhead.csv: variant,us_per_call.
// --only M,N,K measures one shape (kind "only"): scaled_mm.py calls it between its own timings.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fp8/cublaslt.hpp>
#include <fp8/fp8.hpp>

#include "bench_rules.hpp"

namespace lt = fp8::cublaslt;

namespace {

class device_memory {
 public:
  explicit device_memory(std::size_t bytes) : bytes_(bytes) {
    FP8_CUDA_CHECK(cudaMalloc(&data_, bytes == 0 ? 1 : bytes));
  }
  device_memory(const device_memory&) = delete;
  device_memory& operator=(const device_memory&) = delete;
  ~device_memory() { cudaFree(data_); }
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

// A pool of random normal values (mean 0, deviation 1) in each element type; matrices repeat it.
constexpr std::size_t pool_elements = std::size_t(1) << 22;
struct value_pool {
  std::vector<std::uint8_t> e4m3;
  std::vector<std::uint16_t> bf16;
  std::vector<double> e4m3_values, bf16_values;
};
value_pool make_pool(std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  value_pool pool;
  pool.e4m3.resize(pool_elements);
  pool.bf16.resize(pool_elements);
  pool.e4m3_values.resize(pool_elements);
  pool.bf16_values.resize(pool_elements);
  for (std::size_t i = 0; i < pool_elements; ++i) {
    const float v = normal(generator);
    pool.e4m3[i] = fp8::convert_bits<fp8::e4m3_format>(v);
    pool.e4m3_values[i] = fp8::decode<double, fp8::e4m3_format>(pool.e4m3[i]);
    pool.bf16[i] = fp8::bfloat16(v).bits();
    pool.bf16_values[i] = double(float(fp8::bfloat16::from_bits(pool.bf16[i])));
  }
  return pool;
}

// Fills `bytes` of device memory with the pool's bytes repeated (copy, then double on the device).
void fill_from(void* device, std::size_t bytes, const void* pool, std::size_t pool_bytes) {
  const std::size_t first = std::min(bytes, pool_bytes);
  FP8_CUDA_CHECK(cudaMemcpy(device, pool, first, cudaMemcpyHostToDevice));
  for (std::size_t done = first; done < bytes;) {
    const std::size_t chunk = std::min(done, bytes - done);
    FP8_CUDA_CHECK(cudaMemcpy(static_cast<char*>(device) + done, device, chunk, cudaMemcpyDeviceToDevice));
    done += chunk;
  }
}

void fill_value(float* device, std::size_t count, float value) {
  const std::vector<float> values(count, value);
  FP8_CUDA_CHECK(cudaMemcpy(device, values.data(), count * sizeof(float), cudaMemcpyHostToDevice));
}

// The inverse scales of the FP8 products: 2 for every scale of X, 1 for W, so the FP8 outputs are
// 2·X·Wᵀ and a product that drops X's scales (or reads them as 1) fails the sampled check. A power of
// two: the scaling adds no rounding.
constexpr float x_scale_inv = 2.0f, w_scale_inv = 1.0f;

// Times calls enqueued on one stream of its own (non-blocking), with events on that stream.
class event_timer {
 public:
  event_timer() {
    FP8_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    FP8_CUDA_CHECK(cudaEventCreate(&start_));
    FP8_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~event_timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }
  event_timer(const event_timer&) = delete;
  event_timer& operator=(const event_timer&) = delete;

  cudaStream_t stream() const noexcept { return stream_; }

  // Calls `call` for about `seconds` (the clocks settle, plans are built).
  template <class Function>
  void warm_up(Function&& call, double seconds) {
    const auto begin = std::chrono::steady_clock::now();
    do {
      for (int i = 0; i < 4; ++i) call();
      FP8_CUDA_CHECK(cudaDeviceSynchronize());
    } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() < seconds);
  }
  // Median over `repetitions` of the mean time of `iterations` back-to-back calls, in milliseconds.
  template <class Function>
  double median_ms(Function&& call, int iterations, int repetitions) {
    return median_of(repetitions, iterations, [&] {
      for (int i = 0; i < iterations; ++i) call();
    });
  }
  // The same with the `iterations` calls captured once into a CUDA graph and each repetition one
  // launch of it. A small product takes less GPU time than the host needs to enqueue it (about 11 us
  // per cuBLASLt call on the first H100 run, while a 1024^3 FP8 product runs in a few), so enqueued
  // one by one such products would time the host, FP8 and BF16 alike. A graph enqueues them all at
  // once, as a program that replays its step does; large products time the same either way.
  // Throws (the capture ended, nothing left captured) when a call cannot be captured.
  template <class Function>
  double graph_median_ms(Function&& call, int iterations, int repetitions) {
    cudaGraph_t graph = nullptr;
    FP8_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      for (int i = 0; i < iterations; ++i) call();
    } catch (...) {
      if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
      (void)cudaGetLastError();  // capture errors are not sticky
      throw;
    }
    FP8_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    FP8_CUDA_CHECK(instantiated);
    struct destroy_exec {
      cudaGraphExec_t exec;
      ~destroy_exec() { cudaGraphExecDestroy(exec); }
    } owned{exec};
    FP8_CUDA_CHECK(cudaGraphLaunch(exec, stream_));  // its first launch uploads it
    FP8_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return median_of(repetitions, iterations, [&] { FP8_CUDA_CHECK(cudaGraphLaunch(exec, stream_)); });
  }

 private:
  template <class Enqueue>
  double median_of(int repetitions, int iterations, Enqueue&& enqueue) {
    std::vector<double> samples;
    for (int r = 0; r < repetitions; ++r) {
      FP8_CUDA_CHECK(cudaEventRecord(start_, stream_));
      enqueue();
      FP8_CUDA_CHECK(cudaEventRecord(stop_, stream_));
      FP8_CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0.0f;
      FP8_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      samples.push_back(double(ms) / iterations);
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
  }

  cudaStream_t stream_{};
  cudaEvent_t start_{}, stop_{};
};

struct shape {
  std::string kind;   // "square", "deepseek", "layer" or "only"
  std::string label;  // e.g. "fc1 dgrad"
  std::int64_t m, n, k;
  lt::gemm_purpose purpose;
};

struct variant {
  std::string name;
  lt::data_type input;
  lt::scale_mode x_mode, w_mode;
  lt::fast_accumulation fast;
};

const variant bf16_variant{"bf16", lt::data_type::bf16, lt::scale_mode::tensorwise,
                           lt::scale_mode::tensorwise, lt::fast_accumulation::by_purpose};
const variant fp8_fast{"fp8 fast_accum", lt::data_type::e4m3, lt::scale_mode::tensorwise,
                       lt::scale_mode::tensorwise, lt::fast_accumulation::on};
const variant fp8_split{"fp8 split_accum", lt::data_type::e4m3, lt::scale_mode::tensorwise,
                        lt::scale_mode::tensorwise, lt::fast_accumulation::off};
const variant fp8_by_purpose{"fp8 by_purpose", lt::data_type::e4m3, lt::scale_mode::tensorwise,
                             lt::scale_mode::tensorwise, lt::fast_accumulation::by_purpose};
const variant fp8_row_wise{"fp8 row_wise", lt::data_type::e4m3, lt::scale_mode::row_wise,
                           lt::scale_mode::row_wise, lt::fast_accumulation::on};
const variant fp8_block_2d{"fp8 1x128x128x128", lt::data_type::e4m3, lt::scale_mode::block_1x128,
                           lt::scale_mode::block_128x128, lt::fast_accumulation::off};
const variant fp8_block_1d{"fp8 1x128x1x128", lt::data_type::e4m3, lt::scale_mode::block_1x128,
                           lt::scale_mode::block_1x128, lt::fast_accumulation::off};

// Which shapes are also measured tuned: the headline square and the DeepSeek-V3 shape, where the
// heuristic's pick for the block-scaled products fell short of the aims.
bool tuned_too(const shape& s) { return s.kind == "deepseek" || (s.kind == "square" && s.m == 8192); }
constexpr const char* tuned_suffix = " tuned";  // a variant's name when measured with its plan tuned

std::vector<variant> variants_for(const std::string& kind) {
  if (kind == "layer") return {bf16_variant, fp8_by_purpose};
  if (kind == "deepseek") return {bf16_variant, fp8_fast, fp8_row_wise, fp8_block_2d, fp8_block_1d};
  return {bf16_variant, fp8_fast, fp8_split, fp8_row_wise, fp8_block_2d};
}

// Each variant of the shape through the heuristic's pick, then (tuned_too) each again tuned.
std::vector<std::pair<variant, bool>> measurements_for(const shape& s) {
  std::vector<std::pair<variant, bool>> measurements;
  const std::vector<variant> variants = variants_for(s.kind);
  for (const variant& v : variants) measurements.emplace_back(v, false);
  if (tuned_too(s)) {
    for (const variant& v : variants) measurements.emplace_back(v, true);
  }
  return measurements;
}

// The GEMMs of one transformer layer (hidden 4096, FFN 16384, 15,872 tokens): for each linear,
// fprop Y = X·Wᵀ, dgrad dX = dY·W, wgrad dW = dYᵀ·X, all as row-major linear products.
std::vector<shape> layer_shapes() {
  constexpr std::int64_t tokens = 15872, hidden = 4096, ffn = 16384;
  struct linear {
    const char* name;
    std::int64_t in, out;
  };
  const linear linears[] = {
      {"qkv", hidden, 3 * hidden}, {"proj", hidden, hidden}, {"fc1", hidden, ffn}, {"fc2", ffn, hidden}};
  std::vector<shape> shapes;
  for (const linear& l : linears) {
    shapes.push_back(
        {"layer", std::string(l.name) + " fprop", tokens, l.out, l.in, lt::gemm_purpose::forward});
    shapes.push_back(
        {"layer", std::string(l.name) + " dgrad", tokens, l.in, l.out, lt::gemm_purpose::gradient});
    shapes.push_back(
        {"layer", std::string(l.name) + " wgrad", l.out, l.in, tokens, lt::gemm_purpose::gradient});
  }
  return shapes;
}

// The inputs of one shape: `sets` copies of X and W in FP8 and in BF16 (rotated between calls so
// that at least twice the L2 size is touched before a copy is reused, see rotation_sets), their
// inverse scales (x_scale_inv, w_scale_inv), one output.
struct shape_buffers {
  std::vector<std::unique_ptr<device_memory>> x8, w8, x16, w16;
  std::unique_ptr<device_memory> x_scales, w_scales, y;
  std::size_t sets = 1;
};

shape_buffers make_buffers(const shape& s, const value_pool& xs, const value_pool& ws, std::size_t l2_bytes) {
  shape_buffers b;
  const std::size_t mk = std::size_t(s.m) * std::size_t(s.k), nk = std::size_t(s.n) * std::size_t(s.k);
  b.sets = fp8_bench::rotation_sets(mk + nk, l2_bytes);  // counted in FP8 bytes, the smaller copies
  for (std::size_t i = 0; i < b.sets; ++i) {
    b.x8.push_back(std::make_unique<device_memory>(mk));
    b.w8.push_back(std::make_unique<device_memory>(nk));
    b.x16.push_back(std::make_unique<device_memory>(2 * mk));
    b.w16.push_back(std::make_unique<device_memory>(2 * nk));
    fill_from(b.x8.back()->data(), mk, xs.e4m3.data(), pool_elements);
    fill_from(b.w8.back()->data(), nk, ws.e4m3.data(), pool_elements);
    fill_from(b.x16.back()->data(), 2 * mk, xs.bf16.data(), 2 * pool_elements);
    fill_from(b.w16.back()->data(), 2 * nk, ws.bf16.data(), 2 * pool_elements);
  }
  const std::size_t x_scales =
      std::size_t(lt::scale_tensor_elements(lt::scale_mode::block_1x128, s.m, s.k) + s.m + 4);
  const std::size_t w_scales =
      std::size_t(lt::scale_tensor_elements(lt::scale_mode::block_1x128, s.n, s.k) + s.n + 4);
  b.x_scales = std::make_unique<device_memory>(x_scales * sizeof(float));
  b.w_scales = std::make_unique<device_memory>(w_scales * sizeof(float));
  fill_value(static_cast<float*>(b.x_scales->data()), x_scales, x_scale_inv);
  fill_value(static_cast<float*>(b.w_scales->data()), w_scales, w_scale_inv);
  b.y = std::make_unique<device_memory>(std::size_t(s.m) * std::size_t(s.n) * 2);
  return b;
}

// The largest error over 256 sampled outputs (bf16 Y), ref in float64 (times the scales of FP8
// products): |got - ref| less one bf16 rounding of ref (2^-8 |ref|), divided by S = sum_t |x_t w_t|
// (times the same scales). A zero or wrongly scaled output gives about |ref| / S, which for random
// normal data is about 1 / sqrt(K) (0.008 at K = 16384), above every bound of gemm_error_bound.
double sampled_error(const shape& s, const variant& v, const shape_buffers& b, const value_pool& xs,
                     const value_pool& ws) {
  const bool fp8 = lt::is_fp8(v.input);
  const std::vector<double>& xv = fp8 ? xs.e4m3_values : xs.bf16_values;
  const std::vector<double>& wv = fp8 ? ws.e4m3_values : ws.bf16_values;
  const double scale = fp8 ? double(x_scale_inv) * double(w_scale_inv) : 1.0;  // BF16 has no scales
  std::mt19937 generator(std::uint32_t(s.m * 31 + s.n * 7 + s.k));
  double worst = 0.0;
  for (int sample = 0; sample < 256; ++sample) {
    const std::size_t i = generator() % std::size_t(s.m), j = generator() % std::size_t(s.n);
    double sum = 0.0, bound = 0.0;
    for (std::size_t t = 0; t < std::size_t(s.k); ++t) {
      const double product =
          xv[(i * std::size_t(s.k) + t) % pool_elements] * wv[(j * std::size_t(s.k) + t) % pool_elements];
      sum += product;
      bound += std::fabs(product);
    }
    sum *= scale;
    bound *= scale;
    std::uint16_t bits = 0;
    FP8_CUDA_CHECK(cudaMemcpy(&bits, static_cast<const char*>(b.y->data()) + 2 * (i * std::size_t(s.n) + j),
                              2, cudaMemcpyDeviceToHost));
    const double got = double(float(fp8::bfloat16::from_bits(bits)));
    // NaN would pass the comparisons below (max(0, NaN) is 0); Y starts as NaN, so this also fails
    // an output the product never wrote.
    if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();
    const double excess = std::max(0.0, std::fabs(got - sum) - std::ldexp(std::fabs(sum), -8));
    worst = std::max(worst, excess / std::max(bound, 1e-30));
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <output-folder> [--quick] [--only M,N,K]\n", argv[0]);
    return 2;
  }
  const std::string folder = argv[1];
  bool quick = false;
  std::vector<shape> shapes;
  for (int i = 2; i < argc; ++i) {
    const std::string option = argv[i];
    if (option == "--quick") {
      quick = true;
    } else if (option == "--only" && i + 1 < argc) {
      long long m = 0, n = 0, k = 0;
      if (std::sscanf(argv[++i], "%lld,%lld,%lld", &m, &n, &k) != 3 || m <= 0 || n <= 0 || k <= 0) {
        std::fprintf(stderr, "bench_gemm: --only wants M,N,K (positive integers)\n");
        return 2;
      }
      shapes.push_back({"only", std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k), m, n,
                        k, lt::gemm_purpose::forward});
    } else {
      std::fprintf(stderr, "bench_gemm: unknown option %s\n", option.c_str());
      return 2;
    }
  }
  const bool only = !shapes.empty();
  int failures = 0;
  try {
    lt::handle handle;
    lt::handle tuned;  // tunes each product's plan on its first call
    lt::tuning_options tuning;
    tuning.enabled = true;
    tuned.set_tuning(tuning);
    int device = 0, driver = 0, runtime = 0, l2 = 0;
    FP8_CUDA_CHECK(cudaGetDevice(&device));
    FP8_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    FP8_CUDA_CHECK(cudaDriverGetVersion(&driver));
    FP8_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    std::printf("device: %s (sm_%d%d), L2 %d MiB, driver CUDA %d, runtime %d, cuBLASLt %zu\n",
                handle.device().name.c_str(), handle.device().major, handle.device().minor, l2 >> 20, driver,
                runtime, cublasLtGetVersion());

    if (!only) {
      for (std::int64_t size = 1024; size <= (quick ? 8192 : 16384); size *= 2) {
        shapes.push_back({"square", std::to_string(size), size, size, size, lt::gemm_purpose::forward});
      }
      shapes.push_back({"deepseek", "4096x7168x16384", 4096, 7168, 16384, lt::gemm_purpose::forward});
      for (const shape& s : layer_shapes()) shapes.push_back(s);
    }
    const value_pool xs = make_pool(1), ws = make_pool(2);
    event_timer timer;

    const std::string suffix = only ? "_only" : "";
    std::ofstream csv(folder + "/gemm" + suffix + ".csv");
    csv << "kind,label,m,n,k,variant,ms,tflops,max_error,timing\n";
    std::ofstream tuning_csv;  // --only tunes nothing, and leaves the full run's file alone
    if (!only) {
      tuning_csv.open(folder + "/tuning.csv");
      tuning_csv << "kind,label,m,n,k,variant,candidates,ran,heuristic_ms,fastest_ms,heuristic_algorithm,"
                    "fastest_algorithm\n";
    }
    std::printf("%-8s %-16s %6s %6s %6s %-24s %9s %9s %9s\n", "kind", "label", "m", "n", "k", "variant", "ms",
                "TFLOP/s", "error");
    bool warmed = false;
    // A product that fails (cuBLASLt refuses it or finds no kernel, or its buffers do not fit) is
    // reported and counted, and the run goes on with the next one, so that one refusal does not
    // cost the figures of every later shape; an error that leaves the CUDA context unusable (a
    // kernel's illegal address: every later call would fail) ends the run.
    const auto failed = [&](const shape& s, const std::string& what, const std::exception& e) {
      ++failures;
      std::printf("%-8s %-16s %6lld %6lld %6lld %-18s FAILED: %s\n", s.kind.c_str(), s.label.c_str(),
                  (long long)s.m, (long long)s.n, (long long)s.k, what.c_str(), e.what());
      std::fflush(stdout);
      (void)cudaGetLastError();  // a failed allocation's error is not sticky: clear it
      FP8_CUDA_CHECK(cudaDeviceSynchronize());
    };
    for (const shape& s : shapes) {
      std::optional<shape_buffers> buffers;
      try {
        buffers.emplace(make_buffers(s, xs, ws, std::size_t(l2)));
      } catch (const std::exception& e) {
        failed(s, "(its inputs)", e);
        continue;
      }
      const shape_buffers& b = *buffers;
      const double flop = 2.0 * double(s.m) * double(s.n) * double(s.k);
      const int iterations = std::max(2, int(2e12 / std::max(flop, 1.0)));  // about 3-5 ms of work per sample
      for (const auto& [v, with_tuning] : measurements_for(s)) {
        const std::string name = with_tuning ? v.name + tuned_suffix : v.name;
        try {
          const bool fp8 = lt::is_fp8(v.input);
          lt::linear_problem p{};
          p.m = s.m;
          p.n = s.n;
          p.k = s.k;
          p.y = {b.y->data(), lt::data_type::bf16};
          p.options.purpose = s.purpose;
          p.options.fast_accum = fp8 ? v.fast : lt::fast_accumulation::by_purpose;
          const auto set_inputs = [&](std::size_t set) {
            p.x = {fp8 ? b.x8[set]->data() : b.x16[set]->data(), v.input, 0, v.x_mode,
                   fp8 ? static_cast<const float*>(b.x_scales->data()) : nullptr};
            p.w = {fp8 ? b.w8[set]->data() : b.w16[set]->data(), v.input, 0, v.w_mode,
                   fp8 ? static_cast<const float*>(b.w_scales->data()) : nullptr};
          };
          set_inputs(0);
          if (const auto why = lt::find_rejection(lt::to_gemm(p), handle.device())) {
            std::printf("%-8s %-16s %6lld %6lld %6lld %-24s skipped: %s\n", s.kind.c_str(), s.label.c_str(),
                        (long long)s.m, (long long)s.n, (long long)s.k, name.c_str(), why->cause.c_str());
            continue;
          }
          lt::handle& through = with_tuning ? tuned : handle;
          if (with_tuning) {
            const lt::tuning_report report = tuned.tune_linear(p);
            const auto& heuristic = report.candidates.front();  // its median is NaN if it failed
            const auto& fastest = report.candidates[report.fastest_first.front()];
            tuning_csv << s.kind << ',' << s.label << ',' << s.m << ',' << s.n << ',' << s.k << ',' << v.name
                       << ',' << report.candidates.size() << ',' << report.fastest_first.size() << ','
                       << heuristic.median_ms << ',' << fastest.median_ms << ',' << heuristic.algorithm << ','
                       << fastest.algorithm << '\n';
            tuning_csv.flush();
            std::printf(
                "%-8s %-16s %-24s tuned: %zu candidates, %zu ran; the heuristic's pick %.4f ms (%s), the "
                "fastest %.4f ms (%s)\n",
                s.kind.c_str(), s.label.c_str(), name.c_str(), report.candidates.size(),
                report.fastest_first.size(), heuristic.median_ms, heuristic.algorithm.c_str(),
                fastest.median_ms, fastest.algorithm.c_str());
          }
          std::size_t call_index = 0;
          const auto call = [&] {
            set_inputs(call_index++ % b.sets);
            through.linear(p, timer.stream());
          };
          timer.warm_up(call, warmed ? 0.05 : (quick ? 0.5 : 1.0));
          warmed = true;
          // Y starts the timed calls as NaN (0xFFFF in BF16), so the check reads what they wrote: a
          // graph that replays nothing, or a product that writes nothing, fails it instead of passing
          // on the output of the warm-up or of the shape's previous variant. The warm-up ends with
          // the device synchronised, so its calls on the timer's non-blocking stream (which the
          // legacy stream would not wait for) are done before the fill.
          FP8_CUDA_CHECK(cudaMemset(b.y->data(), 0xFF, std::size_t(s.m) * std::size_t(s.n) * 2));
          FP8_CUDA_CHECK(cudaDeviceSynchronize());
          const int repetitions = quick ? 5 : 9;
          std::string timing = "graph";
          double ms = 0.0;
          try {
            ms = timer.graph_median_ms(call, iterations, repetitions);
          } catch (const std::exception& e) {
            std::printf("%-8s %-16s %-24s not capturable in a graph (%s): timed as enqueued\n",
                        s.kind.c_str(), s.label.c_str(), name.c_str(), e.what());
            timing = "enqueued";
            ms = timer.median_ms(call, iterations, repetitions);
          }
          const double tflops = flop / (ms * 1e-3) / 1e12;
          const double error = sampled_error(s, v, b, xs, ws);
          const bool fast = fp8 && lt::uses_fast_accumulation(lt::to_gemm(p));
          const bool correct = error <= fp8_bench::gemm_error_bound(fp8, fast);
          if (!correct) ++failures;
          csv << s.kind << ',' << s.label << ',' << s.m << ',' << s.n << ',' << s.k << ',' << name << ','
              << ms << ',' << tflops << ',' << error << ',' << timing << '\n';
          csv.flush();  // a run cut short by its time limit keeps the rows so far
          std::printf("%-8s %-16s %6lld %6lld %6lld %-24s %9.4f %9.1f %9.2e%s\n", s.kind.c_str(),
                      s.label.c_str(), (long long)s.m, (long long)s.n, (long long)s.k, name.c_str(), ms,
                      tflops, error, correct ? "" : "  WRONG RESULT (above the bound)");
          std::fflush(stdout);
        } catch (const std::exception& e) { failed(s, name, e); }
      }
    }
    if (only) return failures > 0 ? 1 : 0;

    // The memory ceiling of the same run: a device-to-device copy of 1 GiB (each byte read and written).
    std::ofstream ceilings(folder + "/ceilings.csv");
    ceilings << "name,value,unit\n";
    {
      const std::size_t bytes = std::size_t(quick ? 256 : 1024) << 20;
      device_memory from(bytes), to(bytes);
      FP8_CUDA_CHECK(cudaMemset(from.data(), 1, bytes));
      const auto copy = [&] {
        FP8_CUDA_CHECK(
            cudaMemcpyAsync(to.data(), from.data(), bytes, cudaMemcpyDeviceToDevice, timer.stream()));
      };
      timer.warm_up(copy, 0.1);
      const double ms = timer.median_ms(copy, 5, 9);
      const double gbps = 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
      ceilings << "device-to-device copy," << gbps << ",GB/s\n";
      std::printf("device-to-device copy: %.0f GB/s (read + write)\n", gbps);
    }
    ceilings << "device," << handle.device().name << ",\n";
    ceilings << "driver CUDA version," << driver << ",\n";
    ceilings << "runtime CUDA version," << runtime << ",\n";
    ceilings << "cuBLASLt version," << cublasLtGetVersion() << ",\n";

    // Per-call overhead: a tiny product whose kernel time is negligible, enqueued many times; the
    // host time per call with the cache (descriptors and algorithm reused), without (built and
    // chosen by the heuristic every call, as frameworks without a cache do), and of the bare
    // cublasLtMatmul on the same descriptors: the difference between the first and the last is
    // the wrapper's own work (validation, cache lookup, descriptor pointers).
    std::ofstream overhead(folder + "/overhead.csv");
    overhead << "variant,us_per_call\n";
    device_memory a(64 * 64), w(64 * 64), d(64 * 64 * 2);
    FP8_CUDA_CHECK(cudaMemset(a.data(), 0x38, 64 * 64));
    FP8_CUDA_CHECK(cudaMemset(w.data(), 0x38, 64 * 64));
    lt::linear_problem tiny{};
    tiny.m = tiny.n = tiny.k = 64;
    tiny.x = {a.data(), lt::data_type::e4m3};
    tiny.w = {w.data(), lt::data_type::e4m3};
    tiny.y = {d.data(), lt::data_type::bf16};
    // The median host time per call over batches short enough never to fill the launch queue, so
    // the host never waits for the GPU.
    const auto per_call_us = [](int batches, const auto& call) {
      constexpr int batch = 64;
      call();
      FP8_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<double> per_batch;
      for (int round = 0; round < batches; ++round) {
        const auto begin = std::chrono::steady_clock::now();
        for (int i = 0; i < batch; ++i) call();
        const auto end = std::chrono::steady_clock::now();
        per_batch.push_back(std::chrono::duration<double, std::micro>(end - begin).count() / batch);
        FP8_CUDA_CHECK(cudaDeviceSynchronize());
      }
      std::sort(per_batch.begin(), per_batch.end());
      return per_batch[per_batch.size() / 2];
    };
    for (const bool cached : {true, false}) {
      handle.set_algorithm_cache(cached);
      const double us = per_call_us(cached ? 200 : 40, [&] { handle.linear(tiny); });
      overhead << (cached ? "with_cache" : "without_cache") << ',' << us << '\n';
      std::printf("per-call host time %s the plan cache: %.2f us (median)\n", cached ? "with" : "without",
                  us);
    }
    handle.set_algorithm_cache(true);
    {
      const lt::gemm_problem p = lt::with_packed_leading_dimensions(lt::to_gemm(tiny));
      lt::detail::plan plan;
      lt::detail::build_plan(plan, handle.native_handle(), handle.workspace_bytes(), p, handle.device());
      device_memory workspace(handle.workspace_bytes());
      const float alpha = 1.0f, beta = 0.0f;
      const double us = per_call_us(200, [&] {
        FP8_CUBLAS_CHECK(
            cublasLtMatmul(handle.native_handle(), plan.desc.get, &alpha, p.a.data, plan.a.get, p.b.data,
                           plan.b.get, &beta, nullptr, plan.c.get, p.d.data, plan.d.get,
                           &plan.algorithms.front(), workspace.data(), handle.workspace_bytes(), nullptr),
            p, handle.device(), "the bare cublasLtMatmul of the overhead baseline");
      });
      overhead << "bare_cublasLtMatmul," << us << '\n';
      std::printf("per-call host time of the bare cublasLtMatmul: %.2f us (median)\n", us);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm: %s\n", e.what());
    return 1;
  }
  if (failures > 0) {
    std::fprintf(stderr,
                 "bench_gemm: %d products failed (errors above, or results outside their error bound)\n",
                 failures);
    return 1;
  }
  return 0;
}

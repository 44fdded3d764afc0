// The host work fp8::cublaslt::handle::gemm() does on a plan-cache hit, before it hands the product
// to cublasLtMatmul, timed on the CPU alone (Google Benchmark; no GPU needed):
//
//   ./bench_cpu_gemm_dispatch [--benchmark_repetitions=5]
//
// The wrapper's budget is 1 µs of host time per cached call on top of cuBLASLt's own enqueue
// (bench_gemm measures the whole call and the bare cublasLtMatmul on a GPU). This splits our part
// into its steps so that a regression shows where it is, and runs where no GPU is:
//   validate      leading dimensions resolved, then every shape, type, alignment and scale rule;
//   plan_key      the cache key of the problem and its hash;
//   cache_hit     the lookup in a cache holding 64 plans (the key already made);
//   set_pointers  the per-call descriptor attributes (scale pointers) through cuBLASLt's host API;
//   hit_path      all four in the order gemm() runs them.
// Counter x_budget: the step's CPU time over the 1 µs budget (0.25 = a quarter of it); Google
// Benchmark prints it with an "s", its unit for inverted rates.
// The problems: a transformer projection's fprop (M = 16384 tokens, N = K = 4096) in FP8 with
// per-tensor scales, the same with 1x128 / 128x128 block scales (the most rules), and in BF16.
#include <benchmark/benchmark.h>

#include <cublasLt.h>

#include <cstdint>
#include <stdexcept>

#include <fp8/cublaslt.hpp>

namespace lt = fp8::cublaslt;

namespace {

constexpr double budget_seconds = 1e-6;
constexpr std::size_t cached_plans = 64;

// Fake device addresses, 256-byte aligned like cudaMalloc's: the host path reads their values only.
const void* address(std::uintptr_t value) { return reinterpret_cast<const void*>(value); }
const float* float_address(std::uintptr_t value) { return reinterpret_cast<const float*>(value); }

// cuBLASLt 13.1 on an H100, as handle::device() describes it.
lt::device_info hopper() { return {1, 0, 9, 0, "NVIDIA H100 80GB HBM3", 130100, 130100}; }

enum class kind { fp8_tensorwise, fp8_blocks, bf16 };

lt::gemm_problem projection(kind k, std::int64_t tokens = 16384) {
  lt::linear_problem p{};
  p.m = tokens;
  p.n = 4096;
  p.k = 4096;
  const bool fp8 = k != kind::bf16;
  const lt::data_type input = fp8 ? lt::data_type::e4m3 : lt::data_type::bf16;
  p.x = {address(0x7f0000000000), input};
  p.w = {address(0x7f1000000000), input};
  if (fp8) {
    p.x.scale_inv = float_address(0x7f2000000000);
    p.w.scale_inv = float_address(0x7f2000001000);
  }
  if (k == kind::fp8_blocks) {
    p.x.scaling = lt::scale_mode::block_1x128;
    p.w.scaling = lt::scale_mode::block_128x128;
  }
  p.y = {reinterpret_cast<void*>(0x7f3000000000), lt::data_type::bf16};
  return lt::to_gemm(p);
}

// A cache as the handle keeps it, holding `cached_plans` problems of other token counts beside
// `hit` (the plans' descriptors stay empty: a lookup never reads them).
struct filled_cache {
  lt::lru_cache<lt::detail::plan_key, lt::detail::plan, lt::detail::plan_key_hash> plans{1024};
  explicit filled_cache(kind k) {
    for (std::size_t i = 0; i < cached_plans; ++i) {
      plans.insert(lt::detail::make_key(projection(k, std::int64_t(128 * (i + 1))), 32u << 20));
    }
  }
};

// A descriptor made as build_plan makes it (host-only cuBLASLt calls).
struct descriptor {
  lt::detail::matmul_desc desc;
  descriptor() {
    if (cublasLtMatmulDescCreate(&desc.get, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) {
      throw std::runtime_error("cublasLtMatmulDescCreate failed");
    }
  }
};

void report(benchmark::State& state) {
  state.counters["x_budget"] = benchmark::Counter(double(state.iterations()) * budget_seconds,
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void validate(benchmark::State& state, kind k) {
  const lt::gemm_problem problem = projection(k);
  const lt::device_info device = hopper();
  for (auto _ : state) {
    const lt::gemm_problem resolved = lt::with_packed_leading_dimensions(problem);
    lt::validate(resolved, device);
    benchmark::DoNotOptimize(resolved);
  }
  report(state);
}

void plan_key(benchmark::State& state, kind k) {
  const lt::gemm_problem problem = projection(k);
  for (auto _ : state) {
    const lt::detail::plan_key key = lt::detail::make_key(problem, 32u << 20);
    benchmark::DoNotOptimize(lt::detail::plan_key_hash{}(key));
  }
  report(state);
}

void cache_hit(benchmark::State& state, kind k) {
  filled_cache cache(k);
  const lt::detail::plan_key key = lt::detail::make_key(projection(k), 32u << 20);
  cache.plans.insert(key);
  for (auto _ : state) benchmark::DoNotOptimize(cache.plans.find(key));
  report(state);
}

void set_pointers(benchmark::State& state, kind k) {
  const lt::gemm_problem problem = projection(k);
  const lt::device_info device = hopper();
  descriptor d;
  for (auto _ : state) lt::detail::set_pointers(d.desc.get, problem, device);
  report(state);
}

// handle::gemm() on a hit, less cudaGetDevice (check_current_device) and cublasLtMatmul.
void hit_path(benchmark::State& state, kind k) {
  const lt::gemm_problem problem = projection(k);
  const lt::device_info device = hopper();
  filled_cache cache(k);
  const lt::detail::plan_key first =
      lt::detail::make_key(lt::with_packed_leading_dimensions(problem), 32u << 20);
  cache.plans.insert(first);
  descriptor d;
  for (auto _ : state) {
    const lt::gemm_problem resolved = lt::with_packed_leading_dimensions(problem);
    lt::validate(resolved, device);
    const lt::detail::plan_key key = lt::detail::make_key(resolved, 32u << 20);
    lt::detail::plan* found = cache.plans.find(key);
    if (found == nullptr) {
      state.SkipWithError("the plan was not found in the cache");
      break;
    }
    lt::detail::set_pointers(d.desc.get, resolved, device);
    benchmark::DoNotOptimize(found);
  }
  report(state);
}

BENCHMARK_CAPTURE(validate, fp8_tensorwise, kind::fp8_tensorwise);
BENCHMARK_CAPTURE(validate, fp8_blocks, kind::fp8_blocks);
BENCHMARK_CAPTURE(validate, bf16, kind::bf16);
BENCHMARK_CAPTURE(plan_key, fp8_tensorwise, kind::fp8_tensorwise);
BENCHMARK_CAPTURE(plan_key, fp8_blocks, kind::fp8_blocks);
BENCHMARK_CAPTURE(plan_key, bf16, kind::bf16);
BENCHMARK_CAPTURE(cache_hit, fp8_tensorwise, kind::fp8_tensorwise);
BENCHMARK_CAPTURE(cache_hit, fp8_blocks, kind::fp8_blocks);
BENCHMARK_CAPTURE(cache_hit, bf16, kind::bf16);
BENCHMARK_CAPTURE(set_pointers, fp8_tensorwise, kind::fp8_tensorwise);
BENCHMARK_CAPTURE(set_pointers, fp8_blocks, kind::fp8_blocks);
BENCHMARK_CAPTURE(set_pointers, bf16, kind::bf16);
BENCHMARK_CAPTURE(hit_path, fp8_tensorwise, kind::fp8_tensorwise);
BENCHMARK_CAPTURE(hit_path, fp8_blocks, kind::fp8_blocks);
BENCHMARK_CAPTURE(hit_path, bf16, kind::bf16);

}  // namespace

BENCHMARK_MAIN();

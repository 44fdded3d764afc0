// fp8::cuda::linear_layer on a GPU: forward, dgrad and wgrad against a float64 host reference on the
// dequantized operands (the layer's own FP8 copies, decoded on the host), for every device recipe and
// in BF16; dW and dbias accumulated over two micro-batches; W's FP8 copy reused until
// weights_changed(); the amaxes recorded into the scaling state, those of BF16 classes included
// (and left alone with record_bf16_amax = false).
//
// Tolerances, |got - ref| <= rel·|ref| + acc·Σ|a·b| over the product's terms, because the operands
// are exactly the dequantized copies and only the tensor-core sum and the output rounding differ:
//   rel = 2^-8 for BF16 outputs (Y, dX: one rounding to 8 significant bits), 2^-20 for FP32 dW;
//   acc = 2^-7 with fast accumulation (fprop: the FP8 accumulator is not promoted to FP32, which
//         the cuBLASLt wrapper's own test states), 2^-10 otherwise (FP32 accumulation in an order
//         the reference does not follow, with margin).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fp8/cuda/linear.cuh>
#include <fp8/quantize.hpp>

#include "device_buffer.hpp"
#include "gpu_skip.hpp"
#include "linear_config_of.hpp"

// Defined in linear_second_unit.cu, the second unit that includes the layer's header.
std::uint64_t weight_casts_of(const fp8::cuda::linear_layer& layer);

namespace {

using linear_test::current_recipe;

using fp8::gemm_kind;
using fp8::gemm_operand;
using fp8::cuda::linear_buffer;
using fp8::cuda::linear_config;
using fp8::cuda::linear_layer;
using fp8::cuda::linear_precision;
using fp8::cuda::linear_scaling;
using fp8_test::device_buffer;

constexpr std::int64_t M = 256, K = 256, N = 128;

std::vector<__nv_bfloat16> random_bf16(std::size_t count, unsigned seed, float range) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<__nv_bfloat16> v(count);
  for (auto& x : v) x = __float2bfloat16(dist(rng));
  return v;
}

std::vector<double> widen(const std::vector<__nv_bfloat16>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = double(__bfloat162float(v[i]));
  return out;
}

// The layer's FP8 copy decoded on the host with the CPU dequantize (the same scale layouts).
std::vector<double> dequantized(const linear_layer& layer, linear_buffer buffer, std::int64_t m,
                                fp8::cuda::linear_pass pass = fp8::cuda::linear_pass::training) {
  const linear_layer::fp8_copy copy = layer.copy(buffer, m, pass);
  const std::size_t count = std::size_t(copy.rows * copy.cols);
  std::vector<std::uint8_t> codes(count);
  std::vector<float> scales(
      fp8::scale_count(copy.quant.granularity, std::size_t(copy.rows), std::size_t(copy.cols)));
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
  FP8_CUDA_CHECK(cudaMemcpy(codes.data(), copy.data, count, cudaMemcpyDeviceToHost));
  FP8_CUDA_CHECK(
      cudaMemcpy(scales.data(), copy.scale_inv, scales.size() * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<float> values(count);
  fp8::dequantize(codes.data(), std::size_t(copy.rows), std::size_t(copy.cols), copy.quant, scales.data(),
                  values.data());
  return std::vector<double>(values.begin(), values.end());
}

// C[r, c] = Σ_l A[r, l]·B[c, l] (both row-major, K-contiguous) and Σ_l |A·B| for the tolerance.
struct reference {
  std::vector<double> value, magnitude;
};
reference product(const std::vector<double>& a, const std::vector<double>& b, std::int64_t rows,
                  std::int64_t cols, std::int64_t depth) {
  reference out{std::vector<double>(std::size_t(rows * cols)), std::vector<double>(std::size_t(rows * cols))};
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      double sum = 0, magnitude = 0;
      for (std::int64_t l = 0; l < depth; ++l) {
        const double term = a[std::size_t(r * depth + l)] * b[std::size_t(c * depth + l)];
        sum += term;
        magnitude += std::fabs(term);
      }
      out.value[std::size_t(r * cols + c)] = sum;
      out.magnitude[std::size_t(r * cols + c)] = magnitude;
    }
  }
  return out;
}

std::vector<double> transpose(const std::vector<double>& in, std::int64_t rows, std::int64_t cols) {
  std::vector<double> out(in.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) out[std::size_t(c * rows + r)] = in[std::size_t(r * cols + c)];
  }
  return out;
}

template <class T>
void check_close(const char* what, const std::vector<T>& got, const reference& ref,
                 const std::vector<double>& base, double rel, double acc) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double value;
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      value = double(__bfloat162float(got[i]));
    } else {
      value = double(got[i]);
    }
    const double expected = base.empty() ? ref.value[i] : base[i] + ref.value[i];
    const double tolerance = rel * std::fabs(expected) + acc * ref.magnitude[i] + 1e-30;
    if (!(std::fabs(value - expected) <= tolerance)) {
      if (bad++ < 3)
        MESSAGE(what << "[" << i << "] = " << value << ", expected " << expected << " +- " << tolerance);
    }
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << got.size() << " elements outside the tolerance");
}

double fast_or_split(bool fp8, bool fast) { return fp8 && fast ? 0x1p-7 : 0x1p-10; }

struct tensors {
  std::vector<__nv_bfloat16> x, w, bias, dy;
  std::int64_t m;  // tokens: x is [m, K], dy [m, N]
};

// One forward and backward over m tokens; checks Y, dX, dW (+ base), dbias (+ base) against the reference.
void step_and_check(linear_layer& layer, const linear_config& config, const tensors& host,
                    device_buffer<float>& dw, device_buffer<float>& dbias, const std::vector<double>& dw_base,
                    const std::vector<double>& dbias_base, bool accumulate, bool with_dx = true) {
  const std::int64_t m = host.m;
  const linear_precision& p = config.precision;
  const bool fprop8 = p.fprop == fp8::cuda::gemm_precision::fp8;
  const bool dgrad8 = p.dgrad == fp8::cuda::gemm_precision::fp8;
  const bool wgrad8 = p.wgrad == fp8::cuda::gemm_precision::fp8;
  device_buffer<__nv_bfloat16> x(host.x), w(host.w), bias(host.bias), dy(host.dy), y(std::size_t(m * N)),
      dx(std::size_t(m * K));
  layer.forward({x.data(), w.data(), bias.data(), y.data(), m, true});
  layer.backward({dy.data(), x.data(), w.data(), with_dx ? dx.data() : nullptr, dw.data(), dbias.data(), m,
                  accumulate, true});

  const auto xs = fprop8 ? dequantized(layer, linear_buffer::x_fp8, m) : widen(host.x);
  const auto ws = fprop8 ? dequantized(layer, linear_buffer::w_fp8, m) : widen(host.w);
  reference y_ref = product(xs, ws, m, N, K);
  const auto b = widen(host.bias);
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t c = 0; c < N; ++c) y_ref.value[std::size_t(r * N + c)] += b[std::size_t(c)];
  }
  check_close("y", y.download(), y_ref, {}, 0x1p-8, fast_or_split(fprop8, p.fast_accumulation_fprop));

  // dgrad: dX = dY·W with W's transpose [K, N] as the K-contiguous operand (skipped without dX:
  // the first layer of a model).
  if (with_dx) {
    const auto dys = dgrad8 ? dequantized(layer, linear_buffer::dy_fp8, m) : widen(host.dy);
    const auto wt = dgrad8 ? dequantized(layer, linear_buffer::w_t_fp8, m) : transpose(widen(host.w), N, K);
    check_close("dx", dx.download(), product(dys, wt, m, K, N), {}, 0x1p-8,
                fast_or_split(dgrad8, p.fast_accumulation_dgrad));
  }

  // wgrad: dW[N, K] = dYᵀ[N, M] · Xᵀ[K, M]ᵀ.
  const auto dyt = wgrad8 ? dequantized(layer, linear_buffer::dy_t_fp8, m) : transpose(widen(host.dy), m, N);
  const auto xt = wgrad8 ? dequantized(layer, linear_buffer::x_t_fp8, m) : transpose(widen(host.x), m, K);
  check_close("dw", dw.download(), product(dyt, xt, N, K, m), accumulate ? dw_base : std::vector<double>{},
              0x1p-20, fast_or_split(wgrad8, p.fast_accumulation_wgrad));

  // dbias: BGRADB (BF16 wgrads only) sums the product's B operand, dYᵀ; the column sum (FP8 and fake
  // FP8 wgrads) reads the BF16 dY.
  const fp8::cuda::linear_plan plan = layer.plan(m);
  const bool epilogue = plan.bias_gradient == fp8::cuda::bias_gradient_method::epilogue;
  const auto summed = epilogue ? dyt : transpose(widen(host.dy), m, N);
  const std::vector<double> ones(std::size_t(m), 1.0);
  // The epilogue writes C's type, FP32 beside the FP32 dW (cuBLASLt's rule for a bias gradient, which
  // the wrapper enforces), into the layer's float scratch: no rounding beyond FP32 sums.
  if (epilogue) CHECK(plan.bias_gradient_type == fp8::cublaslt::data_type::fp32);
  check_close("dbias", dbias.download(), product(summed, ones, N, 1, m),
              accumulate ? dbias_base : std::vector<double>{}, 0x1p-20, 0x1p-10);
}

std::vector<double> as_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

float max_abs(const std::vector<__nv_bfloat16>& a, const std::vector<__nv_bfloat16>& b) {
  float m = 0;
  for (const auto& v : {&a, &b}) {
    for (const auto& x : *v) m = std::fmax(m, std::fabs(__bfloat162float(x)));
  }
  return m;
}

// Counts the calls of the step-level amax reduction and the amaxes each one was given.
struct counting_reducer final : fp8::amax_reducer {
  int calls = 0;
  std::size_t count = 0;
  void reduce_max(float*, std::size_t n) override {
    ++calls;
    count = n;
  }
};

// Two micro-batches of m tokens in a layer sized for max_tokens (the copies and scale buffers are
// allocated for max_tokens; each call's scale layouts are those of its own m).
void run_recipe(const char* name, const fp8::gemm_recipe& recipe, const linear_precision& precision,
                bool record_bf16_amax = true, std::int64_t m = M, std::int64_t max_tokens = M) {
  CAPTURE(name);
  CAPTURE(record_bf16_amax);
  CAPTURE(m);
  fp8::cublaslt::handle lt;
  counting_reducer reducer;
  linear_scaling scaling(recipe, 1, &reducer);
  linear_config config{K, N, max_tokens, true, recipe, precision, true};
  linear_layer layer(config, scaling, 0, lt);
  layer.set_record_bf16_amax(record_bf16_amax);  // config's default (true), switched before any call
  CHECK(layer.config().record_bf16_amax == record_bf16_amax);
  config.record_bf16_amax = record_bf16_amax;

  const tensors first{random_bf16(m * K, 1, 2.0f), random_bf16(N * K, 2, 0.5f), random_bf16(N, 3, 1.0f),
                      random_bf16(m * N, 4, 0.01f), m};
  tensors second = first;
  second.x = random_bf16(m * K, 5, 3.0f);
  second.dy = random_bf16(m * N, 6, 0.02f);
  device_buffer<float> dw(static_cast<std::size_t>(N * K)), dbias(static_cast<std::size_t>(N));

  // Micro-batch 1 overwrites dW (accumulate = false), micro-batch 2 adds to it (beta = 1, FP32).
  step_and_check(layer, config, first, dw, dbias, {}, {}, false);
  const auto dw1 = as_double(dw.download());
  const auto db1 = as_double(dbias.download());
  step_and_check(layer, config, second, dw, dbias, dw1, db1, true);
  const bool w_copies = layer.plan(m).cast(fp8::cuda::linear_tensor::w).any();
  CHECK(weight_casts_of(layer) == (w_copies ? 1u : 0u));  // W cast once for both micro-batches

  // The state's current amaxes: max |X| over both micro-batches in both X slots, max |dY| in both
  // dY slots, max |W| in both W slots (W cast, or its amax taken, once for both micro-batches), for
  // every class: BF16 classes record the host's amax of their operands as FP8 classes do, unless
  // record_bf16_amax is off, which leaves their slots at 0.
  const fp8::delayed_scaling_state state = scaling.state().download();
  const auto current = [&](gemm_operand op) { return state[scaling.slot(0, op)].history.at(0); };
  const auto expect = [&](gemm_operand op, float amax) {
    CAPTURE(fp8::operand_name(op));
    const bool bf16 = precision.of(fp8::gemm_of(op)) == fp8::cuda::gemm_precision::bf16;
    CHECK(current(op) == (bf16 && !record_bf16_amax ? 0.0f : amax));
  };
  expect(gemm_operand::fprop_input, max_abs(first.x, second.x));
  expect(gemm_operand::fprop_weight, max_abs(first.w, first.w));
  expect(gemm_operand::wgrad_input, max_abs(first.x, second.x));
  expect(gemm_operand::wgrad_grad_output, max_abs(first.dy, second.dy));
  expect(gemm_operand::dgrad_grad_output, max_abs(first.dy, second.dy));
  expect(gemm_operand::dgrad_weight, max_abs(first.w, first.w));
  scaling.end_step();
  const fp8::delayed_scaling_state rolled = scaling.state().download();
  for (std::size_t t = 0; t < rolled.size(); ++t) CHECK(rolled[t].history.at(0) == 0.0f);
  CHECK(scaling.steps() == 1u);
  CHECK(reducer.calls == 1);  // once per step, on every operand slot of the group at once
  CHECK(reducer.count == fp8::gemm_operand_count);

  // Weight cache: new weights are not seen until weights_changed(), then they are, cast once more.
  tensors changed = first;
  changed.w = random_bf16(N * K, 7, 0.5f);
  device_buffer<__nv_bfloat16> x(first.x), w(changed.w), bias(first.bias), y(std::size_t(m * N));
  layer.forward({x.data(), w.data(), bias.data(), y.data(), m, false});
  if (w_copies && precision.fprop == fp8::cuda::gemm_precision::fp8) {
    const auto stale = dequantized(layer, linear_buffer::w_fp8, m);
    const auto original = widen(first.w);
    double diff = 0;
    for (std::size_t i = 0; i < stale.size(); ++i) diff = std::fmax(diff, std::fabs(stale[i] - original[i]));
    CHECK(diff <= 0.5 * 0x1p-3);  // still the copy of the first weights (FP8 rounding of |w| <= 0.5)
  }
  CHECK(layer.weight_casts() == (w_copies ? 1u : 0u));
  layer.weights_changed();
  layer.forward({x.data(), w.data(), bias.data(), y.data(), m, false});
  CHECK(layer.weight_casts() == (w_copies ? 2u : 0u));
  if (precision.fprop == fp8::cuda::gemm_precision::fp8) {
    const auto fresh = dequantized(layer, linear_buffer::w_fp8, m);
    const auto wanted = widen(changed.w);
    double diff = 0;
    for (std::size_t i = 0; i < fresh.size(); ++i) diff = std::fmax(diff, std::fabs(fresh[i] - wanted[i]));
    CHECK(diff <= 0.5 * 0x1p-3);
  }
  // Evaluation passes (record_amax = false) left the new step's histories alone.
  const fp8::delayed_scaling_state after_eval = scaling.state().download();
  for (std::size_t t = 0; t < after_eval.size(); ++t) CHECK(after_eval[t].history.at(0) == 0.0f);

  // The first layer of a model: no dX, only wgrad (and its copy of dY). dgrad does not run, so its
  // dY records no amax in any precision (nor does a fused cast of dY record one); wgrad's dY does.
  step_and_check(layer, config, changed, dw, dbias, {}, {}, false, /*with_dx=*/false);
  const fp8::delayed_scaling_state first_layer = scaling.state().download();
  CHECK(first_layer[scaling.slot(0, gemm_operand::dgrad_grad_output)].history.at(0) == 0.0f);
  const bool wgrad_bf16 = precision.wgrad == fp8::cuda::gemm_precision::bf16;
  CHECK(first_layer[scaling.slot(0, gemm_operand::wgrad_grad_output)].history.at(0) ==
        (wgrad_bf16 && !record_bf16_amax ? 0.0f : max_abs(changed.dy, changed.dy)));
}

}  // namespace

TEST_CASE("FP8 linear layer, delayed HYBRID scaling") {
  run_recipe("delayed", fp8::gemm_recipe{fp8::delayed_scaling{}}, linear_precision::fp8());
}

TEST_CASE("FP8 linear layer, current scaling per tensor and per row") {
  run_recipe("current per tensor", current_recipe(fp8::granularity::per_tensor), linear_precision::fp8());
  run_recipe("current per row", current_recipe(fp8::granularity::per_row), linear_precision::fp8());
}

TEST_CASE("FP8 linear layer, 1x128 tiles and 128x128 weight blocks") {
  run_recipe("current 1x128", current_recipe(fp8::granularity::tile_1x128), linear_precision::fp8());
  run_recipe("blockwise", fp8::gemm_recipe{fp8::current_scaling::blockwise()}, linear_precision::fp8());
}

TEST_CASE("token counts below max_tokens and not multiples of 128: each call's scale layouts") {
  // The copies and scale buffers are sized for max_tokens = 384; calls of 208 tokens use the layouts
  // of 208 rows (1x128: 208 scale rows per tile column; Xᵀ and dYᵀ: a partial 80-token tile), which
  // the casts, the host decode and cuBLASLt must all read alike. 208 is a multiple of 16 (FP8 wgrad)
  // and of 4 (block scales).
  constexpr std::int64_t tokens = 208, max_tokens = 384;
  run_recipe("delayed", fp8::gemm_recipe{fp8::delayed_scaling{}}, linear_precision::fp8(), true, tokens,
             max_tokens);
  run_recipe("current per row", current_recipe(fp8::granularity::per_row), linear_precision::fp8(), true,
             tokens, max_tokens);
  run_recipe("current 1x128", current_recipe(fp8::granularity::tile_1x128), linear_precision::fp8(), true,
             tokens, max_tokens);
  run_recipe("blockwise", fp8::gemm_recipe{fp8::current_scaling::blockwise()}, linear_precision::fp8(), true,
             tokens, max_tokens);
  run_recipe("bf16", fp8::gemm_recipe{fp8::delayed_scaling{}}, linear_precision::bf16(), true, tokens,
             max_tokens);
}

TEST_CASE("BF16 linear layer, and FP8 with one class in BF16") {
  run_recipe("bf16", fp8::gemm_recipe{fp8::delayed_scaling{}}, linear_precision::bf16());
  linear_precision mixed{};
  mixed.dgrad = fp8::cuda::gemm_precision::bf16;
  run_recipe("dgrad in bf16", fp8::gemm_recipe{fp8::delayed_scaling{}}, mixed);
  // The inference configuration (linear_layer.md): fprop in FP8 from row-major copies alone.
  run_recipe("fp8_forward, delayed", fp8::gemm_recipe{fp8::delayed_scaling{}},
             linear_precision::fp8_forward(), false);
  run_recipe("fp8_forward, current", fp8::gemm_recipe{fp8::current_scaling{}},
             linear_precision::fp8_forward(), false);
}

TEST_CASE(
    "BF16 classes record their operands' amaxes: amax-only passes, or beside the other operand's cast") {
  // Each class in BF16 alone, under delayed and current scaling: the BF16 operand's slot gets the
  // amax of the cast of its tensor for the FP8 operand (delayed: the slot copied; current: the cast's
  // amax), or of an amax-only pass where no operand of the tensor is cast (all BF16).
  const fp8::gemm_recipe current_row = current_recipe(fp8::granularity::per_row);
  for (gemm_kind kind : {gemm_kind::fprop, gemm_kind::dgrad, gemm_kind::wgrad}) {
    linear_precision one{};
    (kind == gemm_kind::fprop   ? one.fprop
     : kind == gemm_kind::dgrad ? one.dgrad
                                : one.wgrad) = fp8::cuda::gemm_precision::bf16;
    CAPTURE(int(kind));
    run_recipe("one class in bf16, delayed", fp8::gemm_recipe{fp8::delayed_scaling{}}, one);
    run_recipe("one class in bf16, current per row", current_row, one);
  }
  run_recipe("bf16, current per row", current_row, linear_precision::bf16());
  // Off: BF16 classes leave their slots alone (and FP8 classes record as before).
  run_recipe("bf16, no bf16 amaxes", fp8::gemm_recipe{fp8::delayed_scaling{}}, linear_precision::bf16(),
             false);
  linear_precision mixed{};
  mixed.wgrad = fp8::cuda::gemm_precision::bf16;
  run_recipe("wgrad in bf16, no bf16 amaxes", fp8::gemm_recipe{fp8::delayed_scaling{}}, mixed, false);
}

TEST_CASE("unfused casts: fprop and wgrad read X with different recipes") {
  fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
  recipe.use(gemm_operand::wgrad_input, fp8::current_scaling{});
  run_recipe("delayed fprop X, current wgrad X", recipe, linear_precision::fp8());
}

TEST_CASE("record_bf16_amax switched back on: W's BF16 operand records at the next call, W cast again") {
  // dgrad in BF16: W is cast for fprop only, and dgrad_weight's amax comes with that cast. A cast
  // made while recording was off recorded none for dgrad_weight; once it is back on, the next call
  // must not reuse that cached cast but cast W again and record both W slots.
  fp8::cublaslt::handle lt;
  const fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
  linear_scaling scaling(recipe, 1);
  linear_precision precision{};
  precision.dgrad = fp8::cuda::gemm_precision::bf16;
  linear_layer layer({K, N, M, false, recipe, precision, true}, scaling, 0, lt);
  const std::vector<__nv_bfloat16> w_host = random_bf16(N * K, 41, 0.5f);
  device_buffer<__nv_bfloat16> x(random_bf16(M * K, 42, 2.0f)), w(w_host), y(std::size_t(M * N));
  const auto current = [&](gemm_operand op) {
    return scaling.state().download()[scaling.slot(0, op)].history.at(0);
  };

  layer.set_record_bf16_amax(false);
  layer.forward({x.data(), w.data(), nullptr, y.data(), M, true});
  CHECK(layer.weight_casts() == 1u);
  CHECK(current(gemm_operand::fprop_weight) == max_abs(w_host, w_host));
  CHECK(current(gemm_operand::dgrad_weight) == 0.0f);

  scaling.end_step();  // between steps, as the switch asks
  layer.set_record_bf16_amax(true);
  layer.forward({x.data(), w.data(), nullptr, y.data(), M, true});
  CHECK(layer.weight_casts() == 2u);
  CHECK(current(gemm_operand::fprop_weight) == max_abs(w_host, w_host));
  CHECK(current(gemm_operand::dgrad_weight) == max_abs(w_host, w_host));

  // Switching on while already on drops nothing.
  layer.set_record_bf16_amax(true);
  layer.forward({x.data(), w.data(), nullptr, y.data(), M, true});
  CHECK(layer.weight_casts() == 2u);
}

// What a call refuses (fp8::invalid_argument's message), or "" where it runs.
std::string refusal_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const fp8::invalid_argument& e) { return e.what(); }
  return "";
}

// One layer under delayed scaling whose W cache the next two cases follow call by call.
struct weight_cache_case {
  fp8::cublaslt::handle lt;
  fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
  linear_scaling scaling{recipe, 1};
  linear_layer layer{{K, N, M, false, recipe, {}, true}, scaling, 0, lt};
  std::vector<__nv_bfloat16> w_host = random_bf16(N * K, 43, 0.5f);
  device_buffer<__nv_bfloat16> x{random_bf16(M * K, 44, 2.0f)}, w{w_host}, y{std::size_t(M * N)};
  float w_amax = max_abs(w_host, w_host);

  // A forward of X, recording amaxes or not (an evaluation pass).
  void forward(bool record) {
    linear_layer::forward_args args{x.data(), w.data(), nullptr, y.data(), M};
    args.record_amax = record;
    layer.forward(args);
  }
  // The current step's amax of an operand.
  float current(gemm_operand op) const {
    return scaling.state().download()[scaling.slot(0, op)].history.at(0);
  }
};

TEST_CASE("an evaluation call that casts W first leaves W's amaxes to the next recording call") {
  // The trainer evaluates right after the optimizer's weights_changed(): that forward casts W but
  // records nothing. The next training call must not reuse the cast without W's amaxes for the step.
  weight_cache_case c;
  c.forward(false);
  CHECK(c.layer.weight_casts() == 1u);
  CHECK(c.current(gemm_operand::fprop_weight) == 0.0f);
  CHECK(c.current(gemm_operand::dgrad_weight) == 0.0f);

  c.forward(true);  // records: W cast again
  CHECK(c.layer.weight_casts() == 2u);
  CHECK(c.current(gemm_operand::fprop_weight) == c.w_amax);
  CHECK(c.current(gemm_operand::dgrad_weight) == c.w_amax);

  // Cached by a recording call: later calls, recording or not, reuse it.
  c.forward(false);
  c.forward(true);
  CHECK(c.layer.weight_casts() == 2u);
}

TEST_CASE("a step whose first recording call is a backward records W's amaxes there, and needs W") {
  // An evaluation-style forward (no amaxes), then the step's backward, which records: W's amaxes
  // must reach the step's history from the backward, with or without dX, so it needs W.
  weight_cache_case c;
  device_buffer<__nv_bfloat16> dy(random_bf16(M * N, 45, 0.01f)), dx(std::size_t(M * K));
  device_buffer<float> dw(std::size_t(N * K));
  for (const bool with_dx : {true, false}) {
    CAPTURE(with_dx);
    c.forward(false);
    CHECK(c.current(gemm_operand::fprop_weight) == 0.0f);
    linear_layer::backward_args b{dy.data(), c.x.data(), nullptr, with_dx ? dx.data() : nullptr,
                                  dw.data(), nullptr,    M,       false};
    CHECK(refusal_of([&] { c.layer.backward(b); }).find("records the step's first amaxes and W's") !=
          std::string::npos);
    const std::uint64_t casts = c.layer.weight_casts();
    b.w = c.w.data();
    c.layer.backward(b);
    CHECK(c.layer.weight_casts() == casts + 1);
    CHECK(c.current(gemm_operand::fprop_weight) == c.w_amax);
    CHECK(c.current(gemm_operand::dgrad_weight) == c.w_amax);
    // Recorded for the step: a later backward without W is taken.
    b.w = nullptr;
    c.layer.forward({c.x.data(), c.w.data(), nullptr, c.y.data(), M, true});
    CHECK_NOTHROW(c.layer.backward(b));
    c.scaling.end_step();
  }
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST_CASE("statistics of BF16 classes whose recipe is mx_1x32: refused before the call changes anything") {
  // A statistics call casts a BF16 class's operands with their recipes; the layer has no MX cast, so
  // such a call is refused up front, naming the operand, and the same call without statistics runs.
  fp8::cublaslt::handle lt;
  const fp8::gemm_recipe mx{fp8::current_scaling::mx()};
  linear_scaling scaling(mx, 1);
  linear_layer layer({K, N, M, false, mx, linear_precision::bf16(), true}, scaling, 0, lt);
  device_buffer<__nv_bfloat16> x(random_bf16(M * K, 46, 1.0f)), w(random_bf16(N * K, 47, 0.5f)),
      dy(random_bf16(M * N, 48, 0.01f)), y(std::size_t(M * N)), dx(std::size_t(M * K));
  device_buffer<float> dw(std::size_t(N * K));
  linear_layer::forward_args f{x.data(), w.data(), nullptr, y.data(), M};
  f.statistics = true;
  const std::string forward_refusal = refusal_of([&] { layer.forward(f); });
  CHECK(forward_refusal.find("statistics cannot count") != std::string::npos);
  CHECK(forward_refusal.find("mx_1x32") != std::string::npos);
  f.statistics = false;
  CHECK_NOTHROW(layer.forward(f));
  linear_layer::backward_args b{dy.data(), x.data(), w.data(), dx.data(), dw.data(), nullptr, M, false};
  b.statistics = true;
  CHECK(refusal_of([&] { layer.backward(b); }).find("mx_1x32") != std::string::npos);
  b.statistics = false;
  CHECK_NOTHROW(layer.backward(b));
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST_CASE("a step that ends without weights_changed() records W's amaxes again in the next") {
  // Frozen weights, or an optimizer step skipped: end_step() clears W's slots, so every step's first
  // recording call casts W again (with that step's scale) and records its amaxes; the later calls of
  // the step (micro-batches) reuse the copy.
  weight_cache_case c;
  for (std::uint64_t step = 1; step <= 3; ++step) {
    CAPTURE(step);
    c.forward(true);
    c.forward(true);  // a second micro-batch
    CHECK(c.layer.weight_casts() == step);
    CHECK(c.current(gemm_operand::fprop_weight) == c.w_amax);
    CHECK(c.current(gemm_operand::dgrad_weight) == c.w_amax);
    c.scaling.end_step();
    CHECK(c.current(gemm_operand::fprop_weight) == 0.0f);  // cleared by the roll
  }
  // Every step's history holds W's amax (the newest three entries, after the rolls).
  const fp8::delayed_scaling_state state = c.scaling.state().download();
  const auto& history = state[c.scaling.slot(0, gemm_operand::fprop_weight)].history;
  for (std::size_t k = 1; k <= 3; ++k) CHECK(history.at(k) == c.w_amax);
}

TEST_CASE("an FP8 wgrad refuses a backward without its forward, naming what is missing") {
  fp8::cublaslt::handle lt;
  const fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
  linear_scaling scaling(recipe, 1);
  linear_layer layer({K, N, M, false, recipe, linear_precision::fp8(), true}, scaling, 0, lt);
  device_buffer<__nv_bfloat16> x(random_bf16(M * K, 51, 1.0f)), w(random_bf16(N * K, 52, 0.5f)),
      dy(random_bf16(M * N, 53, 0.01f)), y(std::size_t(M * N));
  device_buffer<float> dw(std::size_t(N * K));
  const auto refusal = [&](std::int64_t m) {
    try {
      layer.backward({dy.data(), x.data(), w.data(), nullptr, dw.data(), nullptr, m, false});
    } catch (const fp8::invalid_argument& e) { return std::string(e.what()); }
    return std::string();
  };
  CHECK(refusal(M).find("this layer has no completed forward to pair with") != std::string::npos);
  layer.forward({x.data(), w.data(), nullptr, y.data(), M, true});
  const std::string other = refusal(M - 16);
  CHECK(other.find("which had 256 tokens, not 240") != std::string::npos);
  CHECK(refusal(M).empty());
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
}

// --- Amaxes from the producer (x_amax, dy_amax) ----------------------------------------------------

namespace {

// A producer as a user's kernel would be one: out = in (standing in for a norm or an activation),
// out's amax recorded as it is written, with fp8::cuda::amax_tracker.
constexpr int producer_threads = 256;
__global__ void __launch_bounds__(producer_threads)
    produce_with_amax(const __nv_bfloat16* in, std::size_t count, __nv_bfloat16* out, float* amax) {
  fp8::cuda::amax_tracker tracker;
  const std::size_t stride = std::size_t(gridDim.x) * producer_threads;
  for (std::size_t i = blockIdx.x * std::size_t(producer_threads) + threadIdx.x; i < count; i += stride) {
    out[i] = in[i];
    tracker.add(out[i]);
  }
  tracker.record<producer_threads>(amax);
}

// The producer's output and its amax: the amax zeroed, then max-accumulated by 7 blocks (several
// atomics, some threads with nothing to add).
struct produced {
  device_buffer<__nv_bfloat16> values;
  device_buffer<float> amax{1};
  explicit produced(const std::vector<__nv_bfloat16>& host) : values(host.size()) {
    const device_buffer<__nv_bfloat16> source(host);
    produce_with_amax<<<7, producer_threads>>>(source.data(), host.size(), values.data(), amax.data());
    FP8_CUDA_CHECK(cudaGetLastError());
    FP8_CUDA_CHECK(cudaDeviceSynchronize());
  }
};

std::vector<std::uint8_t> bytes_of(const void* data, std::size_t count) {
  std::vector<std::uint8_t> out(count);
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
  FP8_CUDA_CHECK(cudaMemcpy(out.data(), data, count, cudaMemcpyDeviceToHost));
  return out;
}

// Codes and inverse scales of one of the layer's FP8 copies, as bytes.
std::vector<std::uint8_t> copy_bytes(const linear_layer& layer, linear_buffer buffer, std::int64_t m) {
  const linear_layer::fp8_copy c = layer.copy(buffer, m);
  std::vector<std::uint8_t> out = bytes_of(c.data, std::size_t(c.rows * c.cols));
  const std::size_t scales = fp8::scale_count(c.quant.granularity, std::size_t(c.rows), std::size_t(c.cols));
  const std::vector<std::uint8_t> s = bytes_of(c.scale_inv, scales * sizeof(float));
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

std::vector<float> current_amaxes(const linear_scaling& scaling) {
  const fp8::delayed_scaling_state state = scaling.state().download();
  std::vector<float> out;
  for (std::size_t op = 0; op < fp8::gemm_operand_count; ++op)
    out.push_back(state[scaling.slot(0, gemm_operand(op))].history.at(0));
  return out;
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// One layer fed the producer's amaxes and one that takes its own, on the same tensors: the same
// outputs, FP8 copies and recorded amaxes, bit for bit. Then a wrong amax (twice the true one) shows
// which calls read it: current per-tensor casts take their scale from it, an amax-only pass records
// it, and delayed or block-scaled casts do not read it at all.
void check_producer_amax(const char* name, const fp8::gemm_recipe& recipe,
                         const linear_precision& precision) {
  CAPTURE(name);
  fp8::cublaslt::handle lt;
  linear_scaling own_scaling(recipe, 1), given_scaling(recipe, 1);
  const linear_config config{K, N, M, false, recipe, precision, true};
  linear_layer own(config, own_scaling, 0, lt), given(config, given_scaling, 0, lt);
  const std::vector<__nv_bfloat16> x_host = random_bf16(M * K, 61, 2.0f),
                                   dy_host = random_bf16(M * N, 62, 0.01f);
  const produced x(x_host), dy(dy_host);
  const float x_amax = x.amax.download()[0], dy_amax = dy.amax.download()[0];
  CHECK(x_amax == max_abs(x_host, x_host));  // the tracker's amax is the tensor's
  CHECK(dy_amax == max_abs(dy_host, dy_host));

  device_buffer<__nv_bfloat16> w(random_bf16(N * K, 63, 0.5f));
  device_buffer<__nv_bfloat16> y_own(std::size_t(M * N)), y_given(std::size_t(M * N)),
      dx_own(std::size_t(M * K)), dx_given(std::size_t(M * K));
  device_buffer<float> dw_own(std::size_t(N * K)), dw_given(std::size_t(N * K));
  const auto step = [&](linear_layer& layer, __nv_bfloat16* y, __nv_bfloat16* dx, float* dw, const float* xa,
                        const float* dya) {
    linear_layer::forward_args f{x.values.data(), w.data(), nullptr, y, M, true};
    f.x_amax = xa;
    layer.forward(f);
    linear_layer::backward_args b{
        dy.values.data(), x.values.data(), w.data(), dx, dw, nullptr, M, false, true};
    b.dy_amax = dya;
    layer.backward(b);
  };
  step(own, y_own.data(), dx_own.data(), dw_own.data(), nullptr, nullptr);
  step(given, y_given.data(), dx_given.data(), dw_given.data(), x.amax.data(), dy.amax.data());
  CHECK(same_bytes(y_own.download(), y_given.download()));
  CHECK(same_bytes(dx_own.download(), dx_given.download()));
  CHECK(same_bytes(dw_own.download(), dw_given.download()));
  CHECK(current_amaxes(own_scaling) == current_amaxes(given_scaling));
  const fp8::cuda::linear_plan plan = own.plan(M);
  for (const linear_buffer b :
       {linear_buffer::x_fp8, linear_buffer::x_t_fp8, linear_buffer::dy_fp8, linear_buffer::dy_t_fp8}) {
    const bool made = [&] {
      for (const fp8::cuda::cast_plan& c : plan.casts) {
        if ((c.row_major && c.row_buffer == b) || (c.transposed && c.transposed_buffer == b)) return true;
      }
      return false;
    }();
    if (made) {
      CAPTURE(fp8::cuda::buffer_name(b));
      CHECK(same_bytes(copy_bytes(own, b, M), copy_bytes(given, b, M)));
    }
  }

  // Twice the true amax, given in a fresh step.
  own_scaling.end_step();
  given_scaling.end_step();
  const float doubled = 2.0f * x_amax;
  device_buffer<float> wrong(std::vector<float>{doubled});
  linear_layer::forward_args f{x.values.data(), w.data(), nullptr, y_given.data(), M, true};
  f.x_amax = wrong.data();
  given.forward(f);
  own.forward({x.values.data(), w.data(), nullptr, y_own.data(), M, true});
  const fp8::operand_recipe& fprop_x = recipe[gemm_operand::fprop_input];
  const bool reads_given = fprop_x.mode == fp8::scaling_mode::current &&
                           fprop_x.quant.granularity == fp8::granularity::per_tensor &&
                           fp8::cuda::casts_to_fp8(precision.fprop);
  const bool records_given = precision.fprop == fp8::cuda::gemm_precision::bf16 &&
                             precision.wgrad == fp8::cuda::gemm_precision::bf16;  // X's amax-only pass
  if (fp8::cuda::casts_to_fp8(precision.fprop)) {
    CHECK(same_bytes(copy_bytes(own, linear_buffer::x_fp8, M), copy_bytes(given, linear_buffer::x_fp8, M)) ==
          !reads_given);
  }
  const float recorded = current_amaxes(given_scaling)[std::size_t(gemm_operand::fprop_input)];
  CHECK(recorded == (reads_given || records_given ? doubled : x_amax));
}

}  // namespace

TEST_CASE(
    "amaxes from the producer: the same results as the layer's own amax pass, and where they are read") {
  const fp8::gemm_recipe per_tensor = current_recipe(fp8::granularity::per_tensor);
  check_producer_amax("current per tensor", per_tensor, linear_precision::fp8());
  linear_precision wgrad_bf16{};
  wgrad_bf16.wgrad = fp8::cuda::gemm_precision::bf16;
  check_producer_amax("current per tensor, wgrad in bf16", per_tensor, wgrad_bf16);
  check_producer_amax("bf16 (amax-only passes)", fp8::gemm_recipe{fp8::delayed_scaling{}},
                      linear_precision::bf16());
  check_producer_amax("delayed (not read)", fp8::gemm_recipe{fp8::delayed_scaling{}},
                      linear_precision::fp8());
  check_producer_amax("1x128 tiles (not read)", current_recipe(fp8::granularity::tile_1x128),
                      linear_precision::fp8());

  // A given amax is one float the kernels read: an address that is not a float's is refused, named.
  fp8::cublaslt::handle lt;
  linear_scaling scaling(per_tensor, 1);
  linear_layer layer({K, N, M, false, per_tensor, linear_precision::fp8(), true}, scaling, 0, lt);
  device_buffer<__nv_bfloat16> x(random_bf16(M * K, 64, 1.0f)), w(random_bf16(N * K, 65, 0.5f)),
      y(std::size_t(M * N));
  device_buffer<float> amax(2);
  linear_layer::forward_args f{x.data(), w.data(), nullptr, y.data(), M, true};
  f.x_amax = reinterpret_cast<const float*>(reinterpret_cast<const char*>(amax.data()) + 2);
  std::string refusal;
  try {
    layer.forward(f);
  } catch (const fp8::invalid_argument& e) { refusal = e.what(); }
  CHECK(refusal.find("fp8::cuda::linear_layer::forward: x_amax is at 0x") != std::string::npos);
  CHECK(refusal.find("not a float's 4-byte alignment") != std::string::npos);
}

namespace {

// A producer that writes its output as the layer's FP8 codes (linear_layer::fp8_input), as a user's
// norm or activation kernel would: each value (here the input itself) as BF16, through
// fp8::cuda::scaled_code with the target's scale; its amax recorded when `amax` is set.
template <class Format>
__global__ void __launch_bounds__(producer_threads)
    produce_fp8(const __nv_bfloat16* in, std::size_t count, const float* scale, std::uint8_t* codes,
                float* amax) {
  fp8::cuda::amax_tracker tracker;
  const float s = *scale;
  const std::size_t stride = std::size_t(gridDim.x) * producer_threads;
  for (std::size_t i = blockIdx.x * std::size_t(producer_threads) + threadIdx.x; i < count; i += stride) {
    const __nv_bfloat16 value = in[i];
    codes[i] = fp8::cuda::scaled_code<Format>(__bfloat162float(value), s);
    tracker.add(value);
  }
  if (amax != nullptr) tracker.record<producer_threads>(amax);  // the same for the whole grid
}

void produce_into(const linear_layer::fp8_input_target& target, const device_buffer<__nv_bfloat16>& in,
                  bool record) {
  REQUIRE(std::size_t(target.rows * target.cols) == in.size());
  float* amax = record ? target.amax : nullptr;
  if (target.format == fp8::fp8_format::e4m3) {
    produce_fp8<fp8::e4m3_format>
        <<<7, producer_threads>>>(in.data(), in.size(), target.scale, target.codes, amax);
  } else {
    REQUIRE(target.format == fp8::fp8_format::e5m2);
    produce_fp8<fp8::e5m2_format>
        <<<7, producer_threads>>>(in.data(), in.size(), target.scale, target.codes, amax);
  }
  FP8_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

TEST_CASE(
    "X and dY written as FP8 by their producers: the same results as the layer's own casts, bit for bit") {
  const fp8::gemm_recipe recipe{fp8::delayed_scaling{}};  // HYBRID: X E4M3, dY E5M2
  fp8::cublaslt::handle lt;
  linear_scaling cast_scaling(recipe, 1), written_scaling(recipe, 1);
  const linear_config config{K, N, M, false, recipe, linear_precision::fp8(), true};
  linear_layer cast(config, cast_scaling, 0, lt), written(config, written_scaling, 0, lt);
  REQUIRE(written.takes_fp8_input(fp8::cuda::linear_tensor::x));
  REQUIRE(written.takes_fp8_input(fp8::cuda::linear_tensor::dy));
  device_buffer<__nv_bfloat16> w(random_bf16(N * K, 71, 0.5f));
  device_buffer<__nv_bfloat16> y_cast(std::size_t(M * N)), y_written(std::size_t(M * N)),
      dx_cast(std::size_t(M * K)), dx_written(std::size_t(M * K));
  device_buffer<float> dw_cast(std::size_t(N * K)), dw_written(std::size_t(N * K));
  // Each step starts with the transposed operands' scales (wgrad's X and dY) unlike the row
  // operands' in both states: a fused cast scales both copies with the row operand's scale, so
  // codes written or decoded with the other operand's scale would show.
  const auto skew = [](linear_scaling& s) {
    const fp8::delayed_scaling_state host = s.state().download();
    std::vector<fp8::delayed_scaling_state::tensor> parts;
    for (std::size_t t = 0; t < host.size(); ++t) parts.push_back(host[t]);
    for (const gemm_operand op : {gemm_operand::wgrad_input, gemm_operand::wgrad_grad_output}) {
      fp8::scale_pair& p = parts[s.slot(0, op)].scales;
      p = fp8::scale_pair{p.scale * 4.0f, p.scale_inv * 0.25f};
    }
    s.state().upload(fp8::delayed_scaling_state::from_parts(host.config(), std::move(parts)));
  };
  // Three steps: the first with the state's initial scales (1), the later ones with scales from the
  // amax history, and dY's values growing so that the last step's E5M2 codes saturate.
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    skew(cast_scaling);
    skew(written_scaling);
    const device_buffer<__nv_bfloat16> x(random_bf16(M * K, 72 + unsigned(step), 2.0f)),
        dy(random_bf16(M * N, 82 + unsigned(step), 0.01f * float(1 << (8 * step))));
    cast.forward({x.data(), w.data(), nullptr, y_cast.data(), M, true});
    cast.backward(
        {dy.data(), x.data(), w.data(), dx_cast.data(), dw_cast.data(), nullptr, M, step > 0, true});

    produce_into(written.fp8_input(fp8::cuda::linear_tensor::x, M), x, true);
    linear_layer::forward_args f{nullptr, w.data(), nullptr, y_written.data(), M, true};
    f.x_written = true;
    written.forward(f);
    produce_into(written.fp8_input(fp8::cuda::linear_tensor::dy, M), dy, true);
    linear_layer::backward_args b{nullptr, nullptr,  w.data(), dx_written.data(), dw_written.data(), nullptr,
                                  M,       step > 0, true};
    b.dy_written = true;
    written.backward(b);

    CHECK(same_bytes(y_cast.download(), y_written.download()));
    CHECK(same_bytes(dx_cast.download(), dx_written.download()));
    CHECK(same_bytes(dw_cast.download(), dw_written.download()));
    for (const linear_buffer buffer :
         {linear_buffer::x_fp8, linear_buffer::x_t_fp8, linear_buffer::dy_fp8, linear_buffer::dy_t_fp8}) {
      CAPTURE(fp8::cuda::buffer_name(buffer));
      CHECK(same_bytes(copy_bytes(cast, buffer, M), copy_bytes(written, buffer, M)));
    }
    CHECK(current_amaxes(cast_scaling) == current_amaxes(written_scaling));
    cast_scaling.end_step();
    written_scaling.end_step();
  }
  const fp8::delayed_scaling_state cast_state = cast_scaling.state().download(),
                                   written_state = written_scaling.state().download();
  for (std::size_t t = 0; t < cast_state.size(); ++t) {
    CAPTURE(t);
    CHECK(cast_state[t].history == written_state[t].history);
    CHECK(std::memcmp(&cast_state[t].scales, &written_state[t].scales, sizeof(cast_state[t].scales)) == 0);
  }

  // What the layer refuses, named: statistics (they count the BF16 tensor), dY written without dX,
  // a flag without a layer that takes the codes, W, and current scaling.
  device_buffer<__nv_bfloat16> x(random_bf16(M * K, 90, 1.0f)), dy(random_bf16(M * N, 91, 0.01f));
  linear_layer::forward_args f{nullptr, w.data(), nullptr, y_written.data(), M, true};
  f.x_written = true;
  f.statistics = true;
  CHECK(refusal_of([&] { written.forward(f); }).find("statistics count the BF16 X") != std::string::npos);
  written.forward({x.data(), w.data(), nullptr, y_written.data(), M, true});
  linear_layer::backward_args b{nullptr, nullptr, w.data(), nullptr, dw_written.data(),
                                nullptr, M,       true,     true};
  b.dy_written = true;
  CHECK(refusal_of([&] { written.backward(b); }).find("needs a backward with dX") != std::string::npos);
  linear_layer::forward_args missing{nullptr, w.data(), nullptr, y_written.data(), M, true};
  CHECK(refusal_of([&] { written.forward(missing); }).find("x must be set") != std::string::npos);
  // Codes taken only as fp8_input gave their target: for this call's token count, in this step, once.
  (void)written.fp8_input(fp8::cuda::linear_tensor::x, M);
  linear_layer::forward_args fewer = f;
  fewer.statistics = false;
  fewer.m = M - 16;
  CHECK(refusal_of([&] {
          written.forward(fewer);
        }).find("fp8_input gave its target for 256 tokens, and this call has 240") != std::string::npos);
  linear_layer::forward_args taken = fewer;
  taken.m = M;
  written_scaling.end_step();
  CHECK(refusal_of([&] {
          written.forward(taken);
        }).find("end_step() has run since fp8_input gave its target") != std::string::npos);
  produce_into(written.fp8_input(fp8::cuda::linear_tensor::x, M), x, true);
  written.forward(taken);
  CHECK(refusal_of([&] { written.forward(taken); }).find("no fp8_input(X, m) gave its target") !=
        std::string::npos);
  // A call that casts the tensor itself overwrites the codes a producer wrote for it: a forward-only
  // evaluation between fp8_input and the forward, a backward from BF16 dY between fp8_input and the
  // backward. The codes are not taken after it.
  produce_into(written.fp8_input(fp8::cuda::linear_tensor::x, M), x, true);
  written.forward({x.data(), w.data(), nullptr, y_written.data(), M, false});
  CHECK(refusal_of([&] { written.forward(taken); }).find("no fp8_input(X, m) gave its target") !=
        std::string::npos);
  written.forward({x.data(), w.data(), nullptr, y_written.data(), M, true});
  produce_into(written.fp8_input(fp8::cuda::linear_tensor::dy, M), dy, true);
  written.backward(
      {dy.data(), nullptr, w.data(), dx_written.data(), dw_written.data(), nullptr, M, true, true});
  written.forward({x.data(), w.data(), nullptr, y_written.data(), M, true});
  linear_layer::backward_args overwritten{
      nullptr, nullptr, w.data(), dx_written.data(), dw_written.data(), nullptr, M, true, true};
  overwritten.dy_written = true;
  CHECK(refusal_of([&] { written.backward(overwritten); }).find("no fp8_input(dY, m) gave its target") !=
        std::string::npos);
  produce_into(written.fp8_input(fp8::cuda::linear_tensor::dy, M), dy, true);
  written_scaling.end_step();
  linear_layer::backward_args stale{nullptr, nullptr, w.data(), dx_written.data(), dw_written.data(), nullptr,
                                    M,       true,    true};
  stale.dy_written = true;
  CHECK(refusal_of([&] {
          written.backward(stale);
        }).find("dY was written as FP8 by its producer, but end_step()") != std::string::npos);
  CHECK(refusal_of([&] {
          (void)written.fp8_input(fp8::cuda::linear_tensor::w, M);
        }).find("W cannot be written as FP8 by its producer") != std::string::npos);
  const fp8::gemm_recipe per_tensor = current_recipe(fp8::granularity::per_tensor);
  linear_scaling current_scaling(per_tensor, 1);
  linear_layer current_layer({K, N, M, false, per_tensor, linear_precision::fp8(), true}, current_scaling, 0,
                             lt);
  CHECK_FALSE(current_layer.takes_fp8_input(fp8::cuda::linear_tensor::x));
  CHECK(refusal_of([&] {
          (void)current_layer.fp8_input(fp8::cuda::linear_tensor::x, M);
        }).find("not delayed scaling") != std::string::npos);
  linear_layer::forward_args g{nullptr, w.data(), nullptr, y_written.data(), M, true};
  g.x_written = true;
  CHECK(refusal_of([&] { current_layer.forward(g); }).find("X was written as FP8 by its producer, but") !=
        std::string::npos);
}

TEST_CASE("the stage hook sees each call's own kernels and its products, in stream order") {
  using stage = linear_layer::stage;
  fp8::cublaslt::handle lt;
  const fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
  linear_scaling scaling(recipe, 1);
  linear_layer layer({K, N, M, true, recipe, linear_precision::fp8(), true}, scaling, 0, lt);
  device_buffer<__nv_bfloat16> x(random_bf16(M * K, 71, 1.0f)), w(random_bf16(N * K, 72, 0.5f)),
      bias(random_bf16(N, 73, 1.0f)), dy(random_bf16(M * N, 74, 0.01f)), y(std::size_t(M * N)),
      dx(std::size_t(M * K));
  device_buffer<float> dw(static_cast<std::size_t>(N * K)), dbias(static_cast<std::size_t>(N));
  std::vector<stage> seen;
  layer.set_stage_hook([&](stage s) { seen.push_back(s); });
  layer.forward({x.data(), w.data(), bias.data(), y.data(), M, true});
  CHECK(seen == std::vector<stage>{stage::kernels, stage::products});
  seen.clear();
  // The FP8 wgrad's bias gradient is a column sum of dY: kernels again after the products.
  layer.backward({dy.data(), x.data(), w.data(), dx.data(), dw.data(), dbias.data(), M, false, true});
  CHECK(seen == std::vector<stage>{stage::kernels, stage::products, stage::kernels});
  seen.clear();
  layer.set_stage_hook({});
  layer.forward({x.data(), w.data(), bias.data(), y.data(), M, true});
  CHECK(seen.empty());
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST_CASE(
    "a forward that no backward follows: the same Y, no Xᵀ made, the pending backward kept, few tokens") {
  // An evaluation or inference forward (backward_follows = false) skips X's transposed copy for the
  // FP8 wgrad, so it takes token counts that wgrad would refuse; it must give the training
  // forward's Y bit for bit (the same codes through the same product), and leave the Xᵀ of the last
  // training forward, with the backward that pairs with it, as they were.
  fp8::cublaslt::handle lt;
  const fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
  linear_scaling scaling(recipe, 1);
  linear_layer layer({K, N, M, false, recipe, linear_precision::fp8(), true}, scaling, 0, lt);
  device_buffer<__nv_bfloat16> x1(random_bf16(M * K, 61, 1.0f)), x2(random_bf16(M * K, 62, 1.5f)),
      w(random_bf16(N * K, 63, 0.5f)), dy(random_bf16(M * N, 64, 0.01f)), y_eval(std::size_t(M * N)),
      y_train(std::size_t(M * N));
  device_buffer<float> dw(std::size_t(N * K));
  const auto forward = [&](const device_buffer<__nv_bfloat16>& x, device_buffer<__nv_bfloat16>& y,
                           std::int64_t m, bool backward_follows) {
    linear_layer::forward_args args{x.data(), w.data(), nullptr, y.data(), m};
    args.record_amax = false;  // the scales stay those of step 0 throughout
    args.backward_follows = backward_follows;
    layer.forward(args);
  };
  const auto backward = [&]() {  // wgrad only; the X passed is not read (the FP8 wgrad reads Xᵀ)
    layer.backward({dy.data(), x2.data(), w.data(), nullptr, dw.data(), nullptr, M, false, false});
  };

  forward(x2, y_eval, M, false);
  std::string refused;
  try {
    backward();
  } catch (const fp8::invalid_argument& e) { refused = e.what(); }
  CHECK(refused.find("no completed forward to pair with (one with backward_follows = false makes none") !=
        std::string::npos);

  forward(x1, y_train, M, true);
  const std::vector<std::uint8_t> x1_t = copy_bytes(layer, linear_buffer::x_t_fp8, M);
  backward();
  const std::vector<float> dw_paired = dw.download();

  forward(x2, y_eval, M, false);
  CHECK(same_bytes(copy_bytes(layer, linear_buffer::x_t_fp8, M), x1_t));  // no Xᵀ made
  const std::vector<std::uint8_t> x2_codes = copy_bytes(layer, linear_buffer::x_fp8, M);
  backward();  // still x1's: the evaluation between changed nothing it reads
  CHECK(same_bytes(dw.download(), dw_paired));

  forward(x2, y_train, M, true);
  CHECK(same_bytes(y_eval.download(), y_train.download()));
  CHECK(same_bytes(copy_bytes(layer, linear_buffer::x_fp8, M), x2_codes));      // the same codes and scale
  CHECK_FALSE(same_bytes(copy_bytes(layer, linear_buffer::x_t_fp8, M), x1_t));  // this one made x2's

  // Three tokens: refused where a backward may follow (an FP8 wgrad reduces over the tokens in
  // multiples of 16), taken by a forward alone, against the host reference on its decoded copies.
  constexpr std::int64_t few = 3;
  refused.clear();
  try {
    forward(x2, y_eval, few, true);
  } catch (const fp8::invalid_argument& e) { refused = e.what(); }
  CHECK(refused.find("tokens (M) = 3 is not a multiple of 16") != std::string::npos);
  forward(x2, y_eval, few, false);
  const auto pass = fp8::cuda::linear_pass::forward_only;
  const reference y_ref = product(dequantized(layer, linear_buffer::x_fp8, few, pass),
                                  dequantized(layer, linear_buffer::w_fp8, few, pass), few, N, K);
  std::vector<__nv_bfloat16> y_few = y_eval.download();
  y_few.resize(std::size_t(few * N));
  check_close("y (3 tokens)", y_few, y_ref, {}, 0x1p-8, fast_or_split(true, true));

  // A producer asking for X's codes at a token count no call has planned yet: X's target is the
  // same whatever follows, so it is held to fprop's rules (a forward alone may take 5 tokens);
  // dY's, which only a backward takes, to the whole pass's. The codes written give the cast's Y.
  constexpr std::int64_t unplanned = 5;
  const linear_layer::fp8_input_target x_target = layer.fp8_input(fp8::cuda::linear_tensor::x, unplanned);
  CHECK(x_target.rows == unplanned);
  CHECK(x_target.cols == K);
  CHECK(refusal_of([&] {
          (void)layer.fp8_input(fp8::cuda::linear_tensor::dy, unplanned);
        }).find("tokens (M) = 5 is not a multiple of 16") != std::string::npos);
  const device_buffer<__nv_bfloat16> x_unplanned(random_bf16(unplanned * K, 65, 1.0f));
  forward(x_unplanned, y_eval, unplanned, false);  // the layer's own cast
  // dY's target is still refused: the forward-only plan of 5 tokens does not stand for a backward's.
  CHECK(refusal_of([&] {
          (void)layer.fp8_input(fp8::cuda::linear_tensor::dy, unplanned);
        }).find("tokens (M) = 5 is not a multiple of 16") != std::string::npos);
  std::vector<__nv_bfloat16> y_cast = y_eval.download();
  produce_into(x_target, x_unplanned, false);
  linear_layer::forward_args written{nullptr, w.data(), nullptr, y_train.data(), unplanned};
  written.x_written = true;
  written.record_amax = false;
  written.backward_follows = false;
  layer.forward(written);
  std::vector<__nv_bfloat16> y_written = y_train.download();
  y_cast.resize(std::size_t(unplanned * N));
  y_written.resize(std::size_t(unplanned * N));
  CHECK(same_bytes(y_written, y_cast));
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST_CASE("a forward that no backward follows records X's fprop amax alone, cast, written or given") {
  // Its casts read X for fprop only: with record_amax, fprop_input's slot gets X's amax and
  // wgrad_input's nothing, whether the layer casts X, a producer wrote X's codes (delayed scaling),
  // or a producer gave X's amax (current scaling); each gives the Y of the layer's own cast.
  enum class source { cast, written, given };
  const std::vector<__nv_bfloat16> x_host = random_bf16(M * K, 91, 2.0f);
  const std::vector<__nv_bfloat16> w_host = random_bf16(N * K, 92, 0.5f);
  const auto forward_only = [&](const fp8::gemm_recipe& recipe, source from) {
    fp8::cublaslt::handle lt;
    linear_scaling scaling(recipe, 1);
    linear_layer layer({K, N, M, false, recipe, linear_precision::fp8(), true}, scaling, 0, lt);
    const produced x(x_host);
    const device_buffer<__nv_bfloat16> w(w_host);
    device_buffer<__nv_bfloat16> y(std::size_t(M * N));
    linear_layer::forward_args f{from == source::written ? nullptr : x.values.data(), w.data(), nullptr,
                                 y.data(), M};
    f.backward_follows = false;
    if (from == source::written) {
      produce_into(layer.fp8_input(fp8::cuda::linear_tensor::x, M), x.values, true);
      f.x_written = true;
    }
    if (from == source::given) f.x_amax = x.amax.data();
    layer.forward(f);
    const auto state = scaling.state().download();
    CHECK(state[scaling.slot(0, gemm_operand::fprop_input)].history.at(0) == max_abs(x_host, x_host));
    CHECK(state[scaling.slot(0, gemm_operand::wgrad_input)].history.at(0) == 0.0f);
    return y.download();
  };
  const fp8::gemm_recipe delayed{fp8::delayed_scaling{}}, current{fp8::current_scaling{}};
  CHECK(same_bytes(forward_only(delayed, source::written), forward_only(delayed, source::cast)));
  CHECK(same_bytes(forward_only(current, source::given), forward_only(current, source::cast)));

  // Fake quantization: the forward-only plan decodes X's row copy alone, into the same BF16 operand
  // a training forward's product reads.
  fp8::cublaslt::handle lt;
  linear_scaling scaling(delayed, 1);
  linear_layer fake({K, N, M, false, delayed, linear_precision::fake_fp8(), true}, scaling, 0, lt);
  const device_buffer<__nv_bfloat16> x(x_host), w(w_host);
  device_buffer<__nv_bfloat16> y_training(std::size_t(M * N)), y_alone(std::size_t(M * N));
  linear_layer::forward_args f{x.data(), w.data(), nullptr, y_training.data(), M};
  f.record_amax = false;
  fake.forward(f);
  f.y = y_alone.data();
  f.backward_follows = false;
  fake.forward(f);
  CHECK(same_bytes(y_alone.download(), y_training.download()));
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace {

// Two layers of a model, A (K -> N) then B (N -> K), through two training steps: A's forward, B's
// forward, B's backward, A's backward.
struct two_layer_case {
  fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
  linear_precision precision = linear_precision::fp8();
  bool producers = false;   // X and dY written into fp8_input right before each call (delayed scaling)
  bool first_dx = true;     // false: A is a first layer, whose backward makes no dX
  bool evaluation = false;  // an evaluation forward of A between B's forward and B's backward
};

// Every output, gradient and amax of a run, and both layers' Xᵀ (their own copies, which a shared
// workspace must leave alone).
struct two_layer_run {
  std::vector<__nv_bfloat16> y_a, y_b, y_eval, dx_a, dx_b;
  std::vector<float> dw_a, dw_b, amaxes;
  std::vector<std::uint8_t> x_t_a, x_t_b;
};

linear_config config_a_of(const two_layer_case& c) { return {K, N, M, false, c.recipe, c.precision, true}; }
linear_config config_b_of(const two_layer_case& c) { return {N, K, M, false, c.recipe, c.precision, true}; }

two_layer_run run_two_layers(const two_layer_case& c, fp8::cuda::linear_workspace* shared) {
  using fp8::cuda::linear_tensor;
  fp8::cublaslt::handle lt;
  linear_scaling scaling(c.recipe, 2);
  linear_layer a(config_a_of(c), scaling, 0, lt, shared), b(config_b_of(c), scaling, 1, lt, shared);
  const device_buffer<__nv_bfloat16> x(random_bf16(M * K, 81, 2.0f)), w_a(random_bf16(N * K, 82, 0.5f)),
      w_b(random_bf16(K * N, 83, 0.5f)), dy_b(random_bf16(M * K, 84, 0.01f)),
      x_eval(random_bf16(M * K, 87, 2.0f));
  device_buffer<__nv_bfloat16> y_a(std::size_t(M * N)), y_b(std::size_t(M * K)), y_eval(std::size_t(M * N)),
      dx_b(std::size_t(M * N)), dx_a(std::size_t(M * K));
  device_buffer<float> dw_a(std::size_t(N * K)), dw_b(std::size_t(K * N));
  // A call with its X (or dY) cast by the layer or, with producers, written right before it.
  const auto forward = [&](linear_layer& layer, const device_buffer<__nv_bfloat16>& in,
                           const device_buffer<__nv_bfloat16>& w, device_buffer<__nv_bfloat16>& y) {
    linear_layer::forward_args f{in.data(), w.data(), nullptr, y.data(), M, true};
    if (c.producers) {
      produce_into(layer.fp8_input(linear_tensor::x, M), in, true);
      f.x = nullptr;
      f.x_written = true;
    }
    layer.forward(f);
  };
  const auto backward = [&](linear_layer& layer, const device_buffer<__nv_bfloat16>& dy,
                            const device_buffer<__nv_bfloat16>& w, __nv_bfloat16* dx,
                            device_buffer<float>& dw) {
    linear_layer::backward_args b{dy.data(), nullptr, w.data(), dx, dw.data(), nullptr, M, false, true};
    if (c.producers) {
      produce_into(layer.fp8_input(linear_tensor::dy, M), dy, true);
      b.dy = nullptr;
      b.dy_written = true;
    }
    layer.backward(b);
  };
  // Two steps, so that the second runs on the scales the first recorded.
  for (int step = 0; step < 2; ++step) {
    forward(a, x, w_a, y_a);
    forward(b, y_a, w_b, y_b);
    if (c.evaluation) {
      linear_layer::forward_args e{x_eval.data(), w_a.data(), nullptr, y_eval.data(), M, false};
      e.backward_follows = false;
      a.forward(e);
    }
    backward(b, dy_b, w_b, dx_b.data(), dw_b);
    backward(a, dx_b, w_a, c.first_dx ? dx_a.data() : nullptr, dw_a);
    scaling.end_step();
    a.weights_changed();
    b.weights_changed();
  }
  two_layer_run out;
  out.y_a = y_a.download();
  out.y_b = y_b.download();
  out.y_eval = y_eval.download();
  out.dx_a = dx_a.download();
  out.dx_b = dx_b.download();
  out.dw_a = dw_a.download();
  out.dw_b = dw_b.download();
  const fp8::delayed_scaling_state state = scaling.state().download();
  for (std::size_t t = 0; t < state.size(); ++t) {  // every amax each step recorded
    for (std::size_t i = 0; i < state[t].history.length(); ++i) out.amaxes.push_back(state[t].history.at(i));
  }
  if (fp8::cuda::casts_to_fp8(c.precision.wgrad)) {
    out.x_t_a = copy_bytes(a, linear_buffer::x_t_fp8, M);
    out.x_t_b = copy_bytes(b, linear_buffer::x_t_fp8, M);
  }
  return out;
}

// The run with the two layers sharing a workspace of the size they need against the run with their
// own copies: the same bits everywhere.
void check_shared_like_own(const char* name, const two_layer_case& c) {
  CAPTURE(name);
  fp8::cuda::linear_workspace shared(std::max(fp8::cuda::linear_workspace_bytes(config_a_of(c)),
                                              fp8::cuda::linear_workspace_bytes(config_b_of(c))));
  const two_layer_run got = run_two_layers(c, &shared), want = run_two_layers(c, nullptr);
  CHECK(same_bytes(got.y_a, want.y_a));
  CHECK(same_bytes(got.y_b, want.y_b));
  CHECK(same_bytes(got.y_eval, want.y_eval));
  CHECK(same_bytes(got.dx_a, want.dx_a));
  CHECK(same_bytes(got.dx_b, want.dx_b));
  CHECK(same_bytes(got.dw_a, want.dw_a));
  CHECK(same_bytes(got.dw_b, want.dw_b));
  CHECK(same_bytes(got.amaxes, want.amaxes));
  CHECK(got.x_t_a == want.x_t_a);
  CHECK(got.x_t_b == want.x_t_b);
}

}  // namespace

TEST_CASE("layers that share a linear_workspace give the results of layers with their own copies") {
  two_layer_case casting;
  casting.evaluation = true;
  casting.first_dx = false;  // dY's transposed-only cast writes its row half into the row slot
  check_shared_like_own("delayed, the layers casting, an evaluation in between, no dX for A", casting);

  two_layer_case written;
  written.producers = true;
  check_shared_like_own("delayed, X and dY written by producers", written);

  two_layer_case unfused;  // X and dY each cast twice, the transposed-only casts into the scratch
  unfused.recipe.use(gemm_operand::wgrad_input, fp8::current_scaling{});
  unfused.recipe.use(gemm_operand::wgrad_grad_output, fp8::current_scaling{});
  check_shared_like_own("unfused casts of X and dY", unfused);

  two_layer_case bf16_fprop;  // X's transposed-only cast, its row half into the scratch
  bf16_fprop.precision.fprop = fp8::cuda::gemm_precision::bf16;
  check_shared_like_own("fprop in BF16", bf16_fprop);

  two_layer_case bf16_dgrad;  // dY's transposed-only cast, its row half into the scratch
  bf16_dgrad.precision.dgrad = fp8::cuda::gemm_precision::bf16;
  check_shared_like_own("dgrad in BF16", bf16_dgrad);

  two_layer_case tiles;
  tiles.recipe = current_recipe(fp8::granularity::tile_1x128, fp8::granularity::block_128x128);
  check_shared_like_own("current scaling, 1x128 tiles and 128x128 weight blocks", tiles);
}

TEST_CASE("a shared linear_workspace refuses what would read another layer's codes, or race") {
  using fp8::cuda::linear_tensor;
  const fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
  fp8::cublaslt::handle lt;
  linear_scaling scaling(recipe, 2);
  const linear_config config{K, N, M, false, recipe, linear_precision::fp8(), true};
  const std::size_t bytes = fp8::cuda::linear_workspace_bytes(config);
  {
    fp8::cuda::linear_workspace small(bytes - 1);
    const std::string refusal = refusal_of([&] { linear_layer too_big(config, scaling, 0, lt, &small); });
    CHECK(refusal.find("holds " + std::to_string(bytes - 1) + " bytes, but this layer needs " +
                       std::to_string(bytes)) != std::string::npos);
  }
  fp8::cuda::linear_workspace shared(bytes);
  linear_layer a(config, scaling, 0, lt, &shared), b(config, scaling, 1, lt, &shared);
  const device_buffer<__nv_bfloat16> x(random_bf16(M * K, 85, 2.0f)), w(random_bf16(N * K, 86, 0.5f)),
      dy(random_bf16(M * N, 88, 0.01f));
  device_buffer<__nv_bfloat16> y(std::size_t(M * N)), dx(std::size_t(M * K));
  device_buffer<float> dw(std::size_t(N * K));
  linear_layer::forward_args x_written{nullptr, w.data(), nullptr, y.data(), M, true};
  x_written.x_written = true;
  linear_layer::backward_args dy_written{nullptr, nullptr, w.data(), dx.data(), dw.data(),
                                         nullptr, M,       false,    true};
  dy_written.dy_written = true;
  const std::string overwritten =
      "'s FP8 codes are in the shared linear_workspace, where another layer's call";

  // A's X written, then B's forward (which casts its X into the same memory) before A's.
  produce_into(a.fp8_input(linear_tensor::x, M), x, true);
  b.forward({x.data(), w.data(), nullptr, y.data(), M, true});
  CHECK(refusal_of([&] { a.forward(x_written); }).find("X" + overwritten) != std::string::npos);
  // Written again right before the call: taken.
  produce_into(a.fp8_input(linear_tensor::x, M), x, true);
  a.forward(x_written);
  // A's dY written, then B's backward (which casts its dY there) before A's.
  produce_into(a.fp8_input(linear_tensor::dy, M), dy, true);
  b.backward({dy.data(), nullptr, w.data(), dx.data(), dw.data(), nullptr, M, false, true});
  CHECK(refusal_of([&] { a.backward(dy_written); }).find("dY" + overwritten) != std::string::npos);
  // A's X written, then A's own backward (its dY copies take the same memory) before A's forward.
  produce_into(a.fp8_input(linear_tensor::x, M), x, true);
  a.backward({dy.data(), nullptr, w.data(), dx.data(), dw.data(), nullptr, M, false, true});
  CHECK(refusal_of([&] { a.forward(x_written); }).find("X" + overwritten) != std::string::npos);

  // Another stream than the one the sharing layers ran on: refused before anything is enqueued.
  cudaStream_t other = nullptr;
  FP8_CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  const std::string stream_refusal = refusal_of([&] {
    b.forward({x.data(), w.data(), nullptr, y.data(), M, true}, other);
  });
  FP8_CUDA_CHECK(cudaStreamDestroy(other));
  CHECK(stream_refusal.find("whose layers run on another stream") != std::string::npos);
}

namespace {

// Everything a training call of a layer with a bias leaves behind: Y, dX, dW, dbias and the FP8
// copies its casts made (codes and scales).
struct layer_outputs {
  std::vector<__nv_bfloat16> y, dx;
  std::vector<float> dw, dbias;
  std::vector<std::vector<std::uint8_t>> copies;
};

layer_outputs run_with_bias(const fp8::gemm_recipe& recipe) {
  fp8::cublaslt::handle lt;
  linear_scaling scaling(recipe, 1);
  linear_layer layer({K, N, M, true, recipe, linear_precision::fp8(), true}, scaling, 0, lt);
  const device_buffer<__nv_bfloat16> x(random_bf16(M * K, 101, 2.0f)), w(random_bf16(N * K, 102, 0.5f)),
      bias(random_bf16(N, 103, 1.0f)), dy(random_bf16(M * N, 104, 0.01f));
  device_buffer<__nv_bfloat16> y(std::size_t(M * N)), dx(std::size_t(M * K));
  device_buffer<float> dw(static_cast<std::size_t>(N * K)), dbias(static_cast<std::size_t>(N));
  layer.forward({x.data(), w.data(), bias.data(), y.data(), M, true});
  layer.backward({dy.data(), x.data(), w.data(), dx.data(), dw.data(), dbias.data(), M, false, true});
  layer_outputs out{y.download(), dx.download(), dw.download(), dbias.download(), {}};
  for (const linear_buffer buffer :
       {linear_buffer::x_fp8, linear_buffer::w_fp8, linear_buffer::w_t_fp8, linear_buffer::dy_fp8,
        linear_buffer::dy_t_fp8, linear_buffer::x_t_fp8}) {
    out.copies.push_back(copy_bytes(layer, buffer, M));
  }
  return out;
}

}  // namespace

TEST_CASE("with the grid capped at 3 blocks, a layer's casts and bias gradient give the same bits") {
  // At M = 256 tokens and N = 128 outputs every kernel of the layer runs under the device's grid cap
  // (SMs x 8 blocks), so the loops in which a block takes its next tile, row or element run only at
  // real sizes; so do the bias gradient's loops over its 4 chunks of 64 rows. Capped at 3 blocks,
  // every kernel loops, and everything the layer makes must be the uncapped run's, bit for bit (the
  // uncapped run is held to the float64 reference above).
  const std::pair<const char*, fp8::gemm_recipe> recipes[] = {
      {"delayed", fp8::gemm_recipe{fp8::delayed_scaling{}}},
      {"current per tensor", current_recipe(fp8::granularity::per_tensor)},
      {"current per row", current_recipe(fp8::granularity::per_row)},
      {"current 1x128 and 128x128",
       current_recipe(fp8::granularity::tile_1x128, fp8::granularity::block_128x128)},
  };
  for (const auto& named : recipes) {
    const fp8::gemm_recipe& recipe = named.second;
    CAPTURE(named.first);
    const layer_outputs uncapped = run_with_bias(recipe);
    const layer_outputs capped = [&] {
      const fp8::cuda::detail::scoped_grid_cap_for_testing cap(3);
      return run_with_bias(recipe);
    }();
    CHECK(same_bytes(capped.y, uncapped.y));
    CHECK(same_bytes(capped.dx, uncapped.dx));
    CHECK(same_bytes(capped.dw, uncapped.dw));
    CHECK(same_bytes(capped.dbias, uncapped.dbias));
    for (std::size_t i = 0; i < capped.copies.size(); ++i) {
      CAPTURE(i);
      CHECK(capped.copies[i] == uncapped.copies[i]);
    }
  }
}

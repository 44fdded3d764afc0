// fp8::cuda::linear_layer's fake_fp8 classes and cast statistics on a GPU, against the CPU library:
//  - fake_fp8: each BF16 decode the layer makes equals, bit for bit, the host's
//    fp8::dequantize(fp8::quantize(operand)) with the same recipe and scale (the transposed copies:
//    of the transposed operand); Y, dX and dW equal the float64 product of those host decodes up to
//    the BF16 product's own error;
//  - statistics: amax, scale range, and exact counts of saturated, flushed and nonzero elements of
//    every operand, on data with planted outliers and underflows, against a host count of the
//    host's own quantization (the definitions of fp8/cuda/linear/statistics.hpp); the operands of
//    BF16 classes counted from a scratch cast, equal to the counts of the same operand in an FP8
//    class, and recording no amax of their own.
//
// Tolerance of the products, |got - ref| <= 2^-8·|ref| + 2^-10·Σ|a·b|: the operands are exactly the
// host decodes (checked bit for bit first), so only the BF16 product differs from the reference: one
// rounding of a BF16 output to 8 significant bits (2^-8; FP32 dW: 2^-20), and FP32 accumulation in
// cuBLASLt's order over at most 256 terms (at most 256·2^-24·Σ|a·b| = 2^-16·Σ|a·b|; 2^-10 is the
// margin test_linear_layer uses for FP32 accumulation, kept so that both tests state one rule).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fp8/cuda/linear.cuh>
#include <fp8/float8.hpp>
#include <fp8/quantize.hpp>

#include "device_buffer.hpp"
#include "gpu_skip.hpp"
#include "linear_config_of.hpp"

namespace {

using linear_test::current_recipe;

using fp8::gemm_kind;
using fp8::gemm_operand;
using fp8::cuda::gemm_precision;
using fp8::cuda::linear_buffer;
using fp8::cuda::linear_config;
using fp8::cuda::linear_layer;
using fp8::cuda::linear_precision;
using fp8::cuda::linear_scaling;

constexpr std::int64_t M = 256, K = 256, N = 128;

using fp8_test::device_buffer;

template <class T>
std::vector<T> download(const T* device, std::size_t count) {
  std::vector<T> host(count);
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
  FP8_CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// Values in [-range, range], rounded to BF16, kept as floats (the host's view of the BF16 tensor).
std::vector<float> random_values(std::size_t count, unsigned seed, float range) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<float> v(count);
  for (auto& x : v) x = __bfloat162float(__float2bfloat16(dist(rng)));
  return v;
}

std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16(v[i]);  // exact: BF16 values
  return out;
}

std::vector<float> transpose(const std::vector<float>& in, std::int64_t rows, std::int64_t cols) {
  std::vector<float> out(in.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) out[std::size_t(c * rows + r)] = in[std::size_t(r * cols + c)];
  }
  return out;
}

// The host's cast of one operand (rows x cols, as the product reads it) with its recipe: delayed
// operands with `delayed_scale` per tensor, current ones by their own blocks. The reference of both
// the fake decode and the statistics.
struct host_cast {
  fp8::quantization quant;
  std::vector<std::uint8_t> codes;
  std::vector<float> scale_inv;
  std::vector<std::uint16_t> decoded;  // BF16 bits of dequantize(codes)
  float amax = 0.0f;
};

host_cast cast_on_host(const std::vector<float>& in, std::int64_t rows, std::int64_t cols,
                       const fp8::operand_recipe& recipe, float delayed_scale) {
  host_cast h;
  h.quant = recipe.quant;
  const auto r = std::size_t(rows), c = std::size_t(cols);
  h.codes.resize(r * c);
  if (recipe.mode == fp8::scaling_mode::delayed) {
    h.amax = fp8::quantize(in.data(), r * c, h.quant.format, delayed_scale, h.codes.data());
    h.scale_inv = {1.0f / delayed_scale};
  } else {
    h.scale_inv.resize(fp8::scale_count(h.quant.granularity, r, c));
    h.amax = fp8::quantize(in.data(), r, c, h.quant, h.codes.data(), h.scale_inv.data());
  }
  std::vector<fp8::bfloat16> bf16(r * c);
  fp8::dequantize(h.codes.data(), r, c, h.quant, h.scale_inv.data(), bf16.data());
  h.decoded.resize(bf16.size());
  for (std::size_t i = 0; i < bf16.size(); ++i) h.decoded[i] = bf16[i].bits();
  return h;
}

std::vector<double> values_of(const std::vector<std::uint16_t>& bf16_bits) {
  std::vector<double> out(bf16_bits.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint32_t bits = std::uint32_t(bf16_bits[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    out[i] = double(f);
  }
  return out;
}

// The layer's BF16 decode `buffer` equals the host's, bit for bit.
void check_decode(const linear_layer& layer, linear_buffer buffer, const host_cast& host) {
  CAPTURE(fp8::cuda::buffer_name(buffer));
  const std::vector<__nv_bfloat16> got = download(layer.fake_copy(buffer, M), host.decoded.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, &got[i], sizeof bits);
    if (bits != host.decoded[i] && bad++ < 3) {
      MESSAGE("element " << i << ": device 0x" << std::hex << bits << ", host 0x" << host.decoded[i]);
    }
  }
  CHECK_MESSAGE(bad == 0, bad << " of " << got.size() << " decoded elements differ from the host's");
}

// C[r, c] = Σ_l A[r, l]·B[c, l] (+ bias[c] where given) against `got`, with the tolerance of the
// file's header.
template <class T>
void check_product(const char* what, const std::vector<T>& got, const std::vector<double>& a,
                   const std::vector<double>& b, std::int64_t rows, std::int64_t cols, std::int64_t depth,
                   double rel, const std::vector<double>& bias = {}) {
  std::size_t bad = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      double sum = bias.empty() ? 0.0 : bias[std::size_t(c)];
      double magnitude = std::fabs(sum);
      for (std::int64_t l = 0; l < depth; ++l) {
        const double term = a[std::size_t(r * depth + l)] * b[std::size_t(c * depth + l)];
        sum += term;
        magnitude += std::fabs(term);
      }
      double value;
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        value = double(__bfloat162float(got[std::size_t(r * cols + c)]));
      } else {
        value = double(got[std::size_t(r * cols + c)]);
      }
      const double tolerance = rel * std::fabs(sum) + 0x1p-10 * magnitude + 1e-30;
      if (!(std::fabs(value - sum) <= tolerance) && bad++ < 3) {
        MESSAGE(what << "[" << r << ", " << c << "] = " << value << ", expected " << sum << " +- "
                     << tolerance);
      }
    }
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " elements outside the tolerance");
}

float state_scale(linear_scaling& scaling, gemm_operand op) {
  return scaling.state().download().scale(scaling.slot(0, op));
}

// `with_bias`: the layer adds a bias in forward and sums dY's columns into dbias in backward (for
// fake_fp8 wgrads from the BF16 dY, as for FP8 ones: cuBLASLt's BGRADB takes BF16 products only).
void run_fake(const char* name, const fp8::gemm_recipe& recipe, bool with_bias = false) {
  CAPTURE(name);
  CAPTURE(with_bias);
  fp8::cublaslt::handle lt;
  linear_scaling scaling(recipe, 1);
  const linear_config config{K, N, M, with_bias, recipe, linear_precision::fake_fp8(), true};
  linear_layer layer(config, scaling, 0, lt);

  const std::vector<float> x = random_values(std::size_t(M * K), 11, 2.0f);
  const std::vector<float> w = random_values(std::size_t(N * K), 12, 0.5f);
  const std::vector<float> dy = random_values(std::size_t(M * N), 13, 0.01f);
  const std::vector<float> bias = random_values(std::size_t(N), 14, 1.0f);
  device_buffer<__nv_bfloat16> x_dev(to_bf16(x)), w_dev(to_bf16(w)), dy_dev(to_bf16(dy)),
      bias_dev(to_bf16(bias)), y(std::size_t(M * N)), dx(std::size_t(M * K));
  device_buffer<float> dw(std::size_t(N * K)), dbias(static_cast<std::size_t>(N));
  layer.forward({x_dev.data(), w_dev.data(), with_bias ? bias_dev.data() : nullptr, y.data(), M, true});
  layer.backward({dy_dev.data(), x_dev.data(), w_dev.data(), dx.data(), dw.data(),
                  with_bias ? dbias.data() : nullptr, M, false, true});

  // The host casts, each of the operand as its product reads it (the transposes for dgrad's W and
  // wgrad's X and dY), with the scale the state held during the step (delayed: 1 at the start).
  const auto host = [&](const std::vector<float>& in, std::int64_t rows, std::int64_t cols, gemm_operand op) {
    return cast_on_host(in, rows, cols, recipe[op], state_scale(scaling, op));
  };
  const host_cast hx = host(x, M, K, gemm_operand::fprop_input);
  const host_cast hw = host(w, N, K, gemm_operand::fprop_weight);
  const host_cast hdy = host(dy, M, N, gemm_operand::dgrad_grad_output);
  const host_cast hwt = host(transpose(w, N, K), K, N, gemm_operand::dgrad_weight);
  const host_cast hxt = host(transpose(x, M, K), K, M, gemm_operand::wgrad_input);
  const host_cast hdyt = host(transpose(dy, M, N), N, M, gemm_operand::wgrad_grad_output);
  check_decode(layer, linear_buffer::x_fake, hx);
  check_decode(layer, linear_buffer::w_fake, hw);
  check_decode(layer, linear_buffer::dy_fake, hdy);
  check_decode(layer, linear_buffer::w_t_fake, hwt);
  check_decode(layer, linear_buffer::x_t_fake, hxt);
  check_decode(layer, linear_buffer::dy_t_fake, hdyt);

  // The bias as the layer reads it: its BF16 values.
  std::vector<double> bias_values;
  if (with_bias) {
    for (const __nv_bfloat16 b : to_bf16(bias)) bias_values.push_back(double(__bfloat162float(b)));
  }
  check_product("y", download(y.data(), std::size_t(M * N)), values_of(hx.decoded), values_of(hw.decoded), M,
                N, K, 0x1p-8, bias_values);
  check_product("dx", download(dx.data(), std::size_t(M * K)), values_of(hdy.decoded), values_of(hwt.decoded),
                M, K, N, 0x1p-8);
  check_product("dw", download(dw.data(), std::size_t(N * K)), values_of(hdyt.decoded),
                values_of(hxt.decoded), N, K, M, 0x1p-20);

  if (with_bias) {
    // dbias[c] = Σ_r dY[r, c] over the BF16 dY (not its fake-quantized decode): FP32 sums of 256
    // BF16 values in any order, at most 256·2^-24 = 2^-16 of the sum of magnitudes off.
    const std::vector<__nv_bfloat16> dy16 = to_bf16(dy);
    const std::vector<float> got = download(dbias.data(), std::size_t(N));
    for (std::int64_t c = 0; c < N; ++c) {
      double sum = 0, magnitude = 0;
      for (std::int64_t r = 0; r < M; ++r) {
        const double v = double(__bfloat162float(dy16[std::size_t(r * N + c)]));
        sum += v;
        magnitude += std::fabs(v);
      }
      CAPTURE(c);
      CHECK(std::fabs(double(got[std::size_t(c)]) - sum) <= 0x1p-16 * magnitude + 1e-30);
    }
  }

  // The amaxes go into the state as for fp8: the operands' own maxima.
  const fp8::delayed_scaling_state state = scaling.state().download();
  CHECK(state[scaling.slot(0, gemm_operand::fprop_input)].history.at(0) == hx.amax);
  CHECK(state[scaling.slot(0, gemm_operand::wgrad_grad_output)].history.at(0) == hdyt.amax);
  CHECK(state[scaling.slot(0, gemm_operand::dgrad_weight)].history.at(0) == hwt.amax);
}

// The statistics the host gives for its own cast (the definitions of cast_statistics).
fp8::cuda::cast_statistics count_on_host(const std::vector<float>& in, std::int64_t rows, std::int64_t cols,
                                         const host_cast& h) {
  const fp8::scale_layout layout =
      fp8::make_scale_layout(h.quant.granularity, std::size_t(rows), std::size_t(cols));
  const float max_finite = fp8::max_finite(h.quant.format);
  fp8::cuda::cast_statistics s;
  s.counted = true;
  s.amax = h.amax;
  s.scale_min = s.scale_max = 1.0f / h.scale_inv[layout.index(0, 0)];
  for (std::size_t i = 0; i < layout.grid_rows; ++i) {
    for (std::size_t j = 0; j < layout.grid_cols; ++j) {
      const float scale = 1.0f / h.scale_inv[layout.index(i, j)];
      s.scale_min = std::fmin(s.scale_min, scale);
      s.scale_max = std::fmax(s.scale_max, scale);
    }
  }
  s.elements = std::uint64_t(rows * cols);
  for (std::size_t r = 0; r < std::size_t(rows); ++r) {
    for (std::size_t c = 0; c < std::size_t(cols); ++c) {
      const std::size_t at = r * std::size_t(cols) + c;
      const float scale = 1.0f / h.scale_inv[layout.index_of_element(r, c)];
      if (std::fabs(in[at]) * scale > max_finite) ++s.saturated;
      if (in[at] != 0.0f) {
        ++s.nonzero;
        if ((h.codes[at] & 0x7Fu) == 0u) ++s.flushed;
      }
    }
  }
  return s;
}

void check_same(const fp8::cuda::cast_statistics& got, const fp8::cuda::cast_statistics& want) {
  CHECK(got.counted);
  CHECK(got.amax == want.amax);
  CHECK(got.scale_min == want.scale_min);
  CHECK(got.scale_max == want.scale_max);
  CHECK(got.elements == want.elements);
  CHECK(got.nonzero == want.nonzero);
  CHECK(got.saturated == want.saturated);
  CHECK(got.flushed == want.flushed);
}

// Plants `count` values of magnitude `value` (alternating signs) at spread-out places.
void plant(std::vector<float>& v, std::size_t count, float value, std::size_t offset) {
  for (std::size_t i = 0; i < count; ++i) {
    v[(offset + i * 7919) % v.size()] = __bfloat162float(__float2bfloat16(i % 2 == 0 ? value : -value));
  }
}

// X: outliers beyond E4M3's 448 (saturate at the delayed scale 1; under current scaling they set the
// scale, and the small values beside them underflow), values below half of E4M3's smallest subnormal
// 2^-9 (flush), and zeros (not counted as flushed).
std::vector<float> planted_x() {
  std::vector<float> x = random_values(std::size_t(M * K), 21, 2.0f);
  plant(x, 37, 1000.0f, 3);
  plant(x, 11, 3000.0f, 5);
  plant(x, 53, 0x1p-12f, 17);
  plant(x, 29, 0.0f, 101);
  return x;
}

// dY likewise for E5M2 (max 57344, smallest subnormal 2^-16).
std::vector<float> planted_dy() {
  std::vector<float> dy = random_values(std::size_t(M * N), 22, 0.01f);
  plant(dy, 13, 100000.0f, 7);
  plant(dy, 41, 0x1p-19f, 19);
  plant(dy, 5, 0.0f, 23);
  return dy;
}

// A fresh layer in `precision` with its operands: X and dY planted as above, W plain, on the host
// (for the host's counts) and on the device.
struct statistics_fixture {
  fp8::cublaslt::handle lt;
  linear_scaling scaling;
  linear_layer layer;
  const std::vector<float> x = planted_x(), dy = planted_dy(),
                           w = random_values(std::size_t(N * K), 23, 0.5f);
  device_buffer<__nv_bfloat16> x_dev{to_bf16(x)}, w_dev{to_bf16(w)}, dy_dev{to_bf16(dy)},
      y{std::size_t(M * N)}, dx{std::size_t(M * K)};
  device_buffer<float> dw{std::size_t(N * K)};

  statistics_fixture(const fp8::gemm_recipe& recipe, const linear_precision& precision)
      : scaling(recipe, 1), layer(linear_config{K, N, M, false, recipe, precision, true}, scaling, 0, lt) {}

  // One forward and backward with statistics (with dX unless `with_dx` is false: the first layer of
  // a model), `record` as the calls' record_amax.
  void statistics_step(bool record, bool with_dx = true) {
    linear_layer::forward_args forward{x_dev.data(), w_dev.data(), nullptr, y.data(), M, record};
    forward.statistics = true;
    layer.forward(forward);
    linear_layer::backward_args backward{
        dy_dev.data(), x_dev.data(), w_dev.data(), dx.data(), dw.data(), nullptr, M, false, record};
    if (!with_dx) backward.dx = nullptr;
    backward.statistics = true;
    layer.backward(backward);
  }
};

void run_statistics(const char* name, const fp8::gemm_recipe& recipe, const linear_precision& precision) {
  CAPTURE(name);
  statistics_fixture f(recipe, precision);

  // No statistics asked: nothing counted.
  f.layer.forward({f.x_dev.data(), f.w_dev.data(), nullptr, f.y.data(), M, false, false});
  for (const auto& s : f.layer.read_statistics()) CHECK_FALSE(s.counted);

  f.statistics_step(true);
  const fp8::cuda::linear_statistics got = f.layer.read_statistics();

  struct operand_case {
    gemm_operand op;
    const std::vector<float>* in;
    std::int64_t rows, cols;
    bool transposed;
  };
  for (const operand_case& c : {operand_case{gemm_operand::fprop_input, &f.x, M, K, false},
                                operand_case{gemm_operand::fprop_weight, &f.w, N, K, false},
                                operand_case{gemm_operand::dgrad_grad_output, &f.dy, M, N, false},
                                operand_case{gemm_operand::dgrad_weight, &f.w, N, K, true},
                                operand_case{gemm_operand::wgrad_input, &f.x, M, K, true},
                                operand_case{gemm_operand::wgrad_grad_output, &f.dy, M, N, true}}) {
    CAPTURE(fp8::operand_name(c.op));
    const fp8::cuda::cast_statistics& s = got[std::size_t(c.op)];
    // A BF16 class is counted too, from a scratch cast with the recipe and scale an FP8 class uses.
    CHECK(s.precision == precision.of(fp8::gemm_of(c.op)));
    // The operand as its product reads it (a BF16 class: as its FP8 form would), cast on the host
    // with the scale of the step (delayed: 1).
    const std::vector<float> read = c.transposed ? transpose(*c.in, c.rows, c.cols) : *c.in;
    const std::int64_t rows = c.transposed ? c.cols : c.rows, cols = c.transposed ? c.rows : c.cols;
    const host_cast h = cast_on_host(read, rows, cols, recipe[c.op], state_scale(f.scaling, c.op));
    const fp8::cuda::cast_statistics want = count_on_host(read, rows, cols, h);
    check_same(s, want);
    // The planted values make every count nonzero where the recipe lets them happen.
    if (recipe[c.op].mode == fp8::scaling_mode::delayed && !fp8::is_weight(c.op)) {
      CHECK(want.saturated > 0);
      CHECK(want.flushed > 0);
    }
  }
  // Read once: a second read finds nothing new.
  for (const auto& s : f.layer.read_statistics()) CHECK_FALSE(s.counted);
}

// One statistics step of a fresh fixture: what it counted and the scaling state after it.
struct statistics_step {
  fp8::cuda::linear_statistics counted{};
  fp8::delayed_scaling_state state;
};

statistics_step run_statistics_step(const fp8::gemm_recipe& recipe, const linear_precision& precision,
                                    bool record, bool with_dx = true) {
  statistics_fixture f(recipe, precision);
  f.statistics_step(record, with_dx);
  return {f.layer.read_statistics(), f.scaling.state().download()};
}

// A BF16 class's statistics are those of the same operand in an FP8 class (same recipe, data and
// scale: the same cast, counted the same way), every field but `precision`; and with record_amax
// off, the scratch casts of a statistics call leave the state's amaxes at 0.
void run_bf16_statistics(const char* name, const fp8::gemm_recipe& recipe) {
  CAPTURE(name);
  const statistics_step fp8_step = run_statistics_step(recipe, linear_precision::fp8(), true);
  linear_precision dgrad_bf16{};
  dgrad_bf16.dgrad = gemm_precision::bf16;
  for (const linear_precision& bf16 : {linear_precision::bf16(), dgrad_bf16}) {
    const statistics_step step = run_statistics_step(recipe, bf16, true);
    for (std::size_t op = 0; op < fp8::gemm_operand_count; ++op) {
      CAPTURE(fp8::operand_name(gemm_operand(op)));
      CHECK(step.counted[op].precision == bf16.of(fp8::gemm_of(gemm_operand(op))));
      check_same(step.counted[op], fp8_step.counted[op]);
      // The amaxes too: a BF16 class records what an FP8 class records (record_bf16_amax default).
      CHECK(step.state[op].history.at(0) == fp8_step.state[op].history.at(0));
      CHECK(step.state[op].history.at(0) == fp8_step.counted[op].amax);
    }
  }
  const statistics_step quiet = run_statistics_step(recipe, linear_precision::bf16(), false);
  for (std::size_t op = 0; op < fp8::gemm_operand_count; ++op) {
    CAPTURE(fp8::operand_name(gemm_operand(op)));
    check_same(quiet.counted[op], fp8_step.counted[op]);
    CHECK(quiet.state[op].history.at(0) == 0.0f);
  }
  // The first layer of a model (no dX): dgrad does not run, so its BF16 dY is neither counted nor
  // recorded; wgrad's dYᵀ is (the transposed half of the fused scratch cast alone).
  const statistics_step first = run_statistics_step(recipe, linear_precision::bf16(), true, false);
  const auto dgrad_dy = std::size_t(gemm_operand::dgrad_grad_output);
  const auto wgrad_dy = std::size_t(gemm_operand::wgrad_grad_output);
  CHECK_FALSE(first.counted[dgrad_dy].counted);
  CHECK(first.state[dgrad_dy].history.at(0) == 0.0f);
  check_same(first.counted[wgrad_dy], fp8_step.counted[wgrad_dy]);
  CHECK(first.state[wgrad_dy].history.at(0) == fp8_step.state[wgrad_dy].history.at(0));
}

}  // namespace

TEST_CASE("fake_fp8 layer: decodes bit for bit as the host's, products of them, delayed scaling") {
  run_fake("delayed", fp8::gemm_recipe{fp8::delayed_scaling{}});
  run_fake("delayed, with a bias", fp8::gemm_recipe{fp8::delayed_scaling{}}, true);
}

TEST_CASE("fake_fp8 layer: current scaling per tensor, per row, 1x128 and 128x128") {
  run_fake("current per tensor", current_recipe(fp8::granularity::per_tensor));
  run_fake("current per row", current_recipe(fp8::granularity::per_row));
  run_fake("blockwise", fp8::gemm_recipe{fp8::current_scaling::blockwise()});
}

TEST_CASE("cast statistics: exact counts of saturated and flushed elements, every operand") {
  run_statistics("delayed, fp8", fp8::gemm_recipe{fp8::delayed_scaling{}}, linear_precision::fp8());
  run_statistics("delayed, fake_fp8", fp8::gemm_recipe{fp8::delayed_scaling{}}, linear_precision::fake_fp8());
  linear_precision mixed{};
  mixed.dgrad = gemm_precision::bf16;
  mixed.wgrad = gemm_precision::fake_fp8;
  run_statistics("delayed, dgrad bf16, wgrad fake", fp8::gemm_recipe{fp8::delayed_scaling{}}, mixed);
  run_statistics("delayed, all bf16", fp8::gemm_recipe{fp8::delayed_scaling{}}, linear_precision::bf16());
  run_statistics("current per row", current_recipe(fp8::granularity::per_row), linear_precision::fp8());
  run_statistics("blockwise", fp8::gemm_recipe{fp8::current_scaling::blockwise()}, linear_precision::fp8());
}

TEST_CASE("cast statistics of BF16 classes: a scratch cast, counted as the same operand in an FP8 class") {
  run_bf16_statistics("delayed", fp8::gemm_recipe{fp8::delayed_scaling{}});
  run_bf16_statistics("current per tensor", current_recipe(fp8::granularity::per_tensor));
  run_bf16_statistics("current per row", current_recipe(fp8::granularity::per_row));
  run_bf16_statistics("blockwise", fp8::gemm_recipe{fp8::current_scaling::blockwise()});
}

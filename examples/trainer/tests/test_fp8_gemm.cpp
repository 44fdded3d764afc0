// The emulated FP8 GEMM against a float64 reference built from the same FP8 codes and scales, for
// every granularity and operand layout; fake quantization, BF16 GEMMs, and amax recording.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <fp8/float8.hpp>
#include <fp8/quantize.hpp>

#include "fp8_gemm.hpp"
#include "gradient_check.hpp"
#include "parallel.hpp"
#include "scaling_state.hpp"
#include "tensor_stats.hpp"

using namespace trainer;
using namespace trainer::testing;

namespace {

// FP32 accumulation of K products, each exact: the error of a sum of K terms is at most about
// K * 2^-24 times the sum of their magnitudes (plus one rounding for each scaling multiply).
double accumulation_bound(int k, double magnitude_sum) {
  return (double(k) + 4.0) * std::ldexp(1.0, -24) * magnitude_sum;
}

// The operand as the GEMM reads it ([rows, K]), dequantized in double from its codes and scales.
std::vector<double> dequantized(const quantized_operand& q) {
  const auto layout = fp8::make_scale_layout(q.quant.granularity, std::size_t(q.rows), std::size_t(q.cols));
  std::vector<float> values(q.codes.size());
  fp8::dequantize(q.codes.data(), q.codes.size(), q.quant.format, 1.0f, values.data());
  std::vector<double> out(values.size());
  for (std::size_t r = 0; r < std::size_t(q.rows); ++r) {
    for (std::size_t c = 0; c < std::size_t(q.cols); ++c) {
      const std::size_t at = r * std::size_t(q.cols) + c;
      out[at] = double(values[at]) * double(q.scale_inv[layout.index_of_element(r, c)]);
    }
  }
  return out;
}

struct gemm_case {
  const char* name;
  fp8::scaling_mode recipe;
  fp8::granularity grain;
};

// Runs C = A B^T through gemm() in `mode` with A read from `a_stored` (transposed or not) and checks
// it against sum_k deq(A) deq(B) in double, using the codes and scales that quantize_operand produces.
void check_fp8_product(const gemm_case& c, bool a_transposed, bool b_transposed) {
  const int m = 37, n = 29, k = 300;  // K is not a multiple of 128 or 32: partial blocks at the edge
  rng generator(31);
  // Values spread over several binades, with a few outliers, as activations have.
  std::vector<float> a = random_vector(std::size_t(m * k), generator, 3.0f);
  std::vector<float> b = random_vector(std::size_t(n * k), generator, 0.05f);
  a[5] = 80.0f;
  b[7] = -2.0f;
  recipe_switches switches;
  switches.recipe.recipe = c.recipe;
  switches.recipe.scale_granularity = c.grain;
  scaling_state state(switches, {"layer"});
  if (c.recipe == fp8::scaling_mode::delayed) {
    // A history with an amax below the current one: the delayed scale saturates the outlier.
    state.delayed().record(state.tensor_index(0, fp8::gemm_operand::fprop_input), 20.0f);
    state.delayed().record(state.tensor_index(0, fp8::gemm_operand::fprop_weight), 1.0f);
    state.end_step();
  }
  const gemm_matrix a_op = a_transposed ? gemm_matrix{a.data(), k, m, true} : gemm_matrix{a.data(), m, k};
  const gemm_matrix b_op = b_transposed ? gemm_matrix{b.data(), k, n, true} : gemm_matrix{b.data(), n, k};
  // The stored matrices were filled as [M, K] and [N, K]; transposed reads see them as [K, M] data, so
  // compare against the same reads.
  operand_scaling a_scaling{&state, 0, fp8::gemm_operand::fprop_input, false, nullptr, gemm_mode::fp8};
  operand_scaling b_scaling{&state, 0, fp8::gemm_operand::fprop_weight, false, nullptr, gemm_mode::fp8};
  const quantized_operand qa = quantize_operand(a_op, a_scaling);
  const quantized_operand qb = quantize_operand(b_op, b_scaling);
  const std::vector<double> da = dequantized(qa), db = dequantized(qb);
  // The casts read the logical operands (a transposed read really transposes): nearly every element
  // is its input within FP8's rounding (E4M3: 2^-4 relative), except outliers that saturate and tiny
  // values that flush. A wrong orientation would miss almost all.
  const auto close_fraction = [](const std::vector<float>& stored, const std::vector<double>& cast, int rows,
                                 int cols, bool transposed) {
    int close = 0;
    for (int r = 0; r < rows; ++r) {
      for (int col = 0; col < cols; ++col) {
        const double x =
            transposed ? stored[std::size_t(col * rows + r)] : stored[std::size_t(r * cols + col)];
        if (std::abs(cast[std::size_t(r * cols + col)] - x) <= 0.07 * std::abs(x) + 1e-3) ++close;
      }
    }
    return double(close) / double(rows * cols);
  };
  CHECK(close_fraction(a, da, m, k, a_transposed) > 0.95);
  CHECK(close_fraction(b, db, n, k, b_transposed) > 0.95);

  std::vector<float> result(std::size_t(m * n), 0.0f);
  gemm_call call;
  call.mode = gemm_mode::fp8;
  call.a = a_op;
  call.b = b_op;
  call.c = result.data();
  call.a_scaling = &a_scaling;
  call.b_scaling = &b_scaling;
  gemm(call);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double exact = 0.0, magnitude = 0.0;
      for (int kk = 0; kk < k; ++kk) {
        const double product = da[std::size_t(i * k + kk)] * db[std::size_t(j * k + kk)];
        exact += product;
        magnitude += std::abs(product);
      }
      CAPTURE(c.name);
      CAPTURE(i);
      CAPTURE(j);
      CHECK(std::abs(double(result[std::size_t(i * n + j)]) - exact) <= accumulation_bound(k, magnitude));
    }
  }
}

}  // namespace

TEST_CASE("the emulated FP8 GEMM equals the float64 product of the dequantized operands") {
  set_thread_count(1);  // tiny tensors: thread start-up would dominate on a busy machine
  const gemm_case cases[] = {
      {"delayed per tensor", fp8::scaling_mode::delayed, fp8::granularity::per_tensor},
      {"current per tensor", fp8::scaling_mode::current, fp8::granularity::per_tensor},
      {"current per row", fp8::scaling_mode::current, fp8::granularity::per_row},
      {"current 1x128 / 128x128", fp8::scaling_mode::current, fp8::granularity::tile_1x128},
      {"current MX 1x32", fp8::scaling_mode::current, fp8::granularity::mx_1x32},
  };
  for (const gemm_case& c : cases) {
    check_fp8_product(c, false, false);
    check_fp8_product(c, true, false);
    check_fp8_product(c, false, true);
    check_fp8_product(c, true, true);
  }
}

TEST_CASE("per-row and block scales follow the operand as the GEMM reads it") {
  set_thread_count(1);  // tiny tensors: thread start-up would dominate on a busy machine
  // A [2, 256] operand: row 0 all 1, row 1 is 1 in its first 128 columns and 1000 in the rest.
  // Per row: row 1's scale is 1000x smaller than row 0's. In 1x128 tiles: only tile (1, 1) is.
  std::vector<float> data(512, 1.0f);
  for (std::size_t i = 256 + 128; i < 512; ++i) data[i] = 1000.0f;
  for (fp8::granularity grain : {fp8::granularity::per_row, fp8::granularity::tile_1x128}) {
    CAPTURE(to_string(grain));
    recipe_switches switches;
    switches.recipe.recipe = fp8::scaling_mode::current;
    switches.recipe.scale_granularity = grain;
    scaling_state state(switches, {"layer"});
    operand_scaling s{&state, 0, fp8::gemm_operand::fprop_input, false, nullptr, gemm_mode::fp8};
    const quantized_operand q = quantize_operand({data.data(), 2, 256}, s);
    const auto layout = fp8::make_scale_layout(q.quant.granularity, 2, 256);
    const float row0 = q.scale_inv[layout.index_of_element(0, 0)];
    const float row1_left = q.scale_inv[layout.index_of_element(1, 0)];
    const float row1_right = q.scale_inv[layout.index_of_element(1, 255)];
    CHECK(row1_right / row0 == doctest::Approx(1000.0).epsilon(0.05));
    CHECK(row1_left / row0 ==
          doctest::Approx(grain == fp8::granularity::per_row ? 1000.0 : 1.0).epsilon(0.05));
    CHECK(q.amax == 1000.0f);
  }
}

TEST_CASE("fake quantization is a BF16 GEMM of the operands cast to FP8 and back") {
  set_thread_count(1);  // tiny tensors: thread start-up would dominate on a busy machine
  const int m = 8, n = 6, k = 40;
  rng generator(32);
  std::vector<float> a = random_vector(std::size_t(m * k), generator),
                     b = random_vector(std::size_t(n * k), generator);
  recipe_switches switches;
  scaling_state state(switches, {"layer"});
  operand_scaling sa{&state, 0, fp8::gemm_operand::fprop_input, false, nullptr, gemm_mode::fake_fp8};
  operand_scaling sb{&state, 0, fp8::gemm_operand::fprop_weight, false, nullptr, gemm_mode::fake_fp8};
  std::vector<float> result(std::size_t(m * n));
  gemm_call call;
  call.mode = gemm_mode::fake_fp8;
  call.a = {a.data(), m, k};
  call.b = {b.data(), n, k};
  call.c = result.data();
  call.out = storage::bf16;
  call.a_scaling = &sa;
  call.b_scaling = &sb;
  gemm(call);
  // Scales are 1 (a fresh delayed state), so the fake operands are the FP8 roundings of the inputs.
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double exact = 0.0;
      for (int kk = 0; kk < k; ++kk) {
        exact += double(static_cast<float>(fp8::fp8_e4m3(a[std::size_t(i * k + kk)]))) *
                 double(static_cast<float>(fp8::fp8_e4m3(b[std::size_t(j * k + kk)])));
      }
      // One BF16 rounding of the FP32 sum: within 2^-8 relative (plus the accumulation error).
      CHECK(std::abs(double(result[std::size_t(i * n + j)]) - exact) <=
            std::abs(exact) * std::ldexp(1.0, -8) + 1e-5);
      // And the result is a BF16 value.
      CHECK(round_to_bf16(result[std::size_t(i * n + j)]) == result[std::size_t(i * n + j)]);
    }
  }
}

TEST_CASE("delayed scaling uses the previous steps' amax and records this step's") {
  set_thread_count(1);  // tiny tensors: thread start-up would dominate on a busy machine
  recipe_switches switches;
  switches.recipe.amax_history_length = 4;
  scaling_state state(switches, {"layer"});
  const std::size_t index = state.tensor_index(0, fp8::gemm_operand::fprop_input);
  std::vector<float> x{0.5f, -3.5f, 1.0f, 2.0f};
  operand_scaling s{&state, 0, fp8::gemm_operand::fprop_input, true, nullptr, gemm_mode::fp8};
  const quantized_operand first = quantize_operand({x.data(), 2, 2}, s);
  CHECK(first.scale_inv[0] == 1.0f);  // a fresh state scales by 1
  CHECK(state.delayed().history(index).current() == 3.5f);
  state.end_step();
  // 448 / 3.5 = 128 (E4M3, margin 0): the next cast uses it.
  const quantized_operand second = quantize_operand({x.data(), 2, 2}, s);
  CHECK(second.scale_inv[0] == 1.0f / 128.0f);
  // observe_operand (a GEMM running in BF16) records without casting; a pass that does not record
  // (evaluation) leaves the history alone.
  state.end_step();
  std::vector<float> y{10.0f, -1.0f};
  observe_operand({y.data(), 1, 2}, s);
  CHECK(state.delayed().history(index).current() == 10.0f);
  operand_scaling evaluation = s;
  evaluation.record_amax = false;
  std::vector<float> z{100.0f};
  observe_operand({z.data(), 1, 1}, evaluation);
  quantize_operand({z.data(), 1, 1}, evaluation);
  CHECK(state.delayed().history(index).current() == 10.0f);
}

TEST_CASE("the bf16 GEMM mode rounds its result once to BF16") {
  set_thread_count(1);  // tiny tensors: thread start-up would dominate on a busy machine
  const int m = 5, n = 4, k = 16;
  rng generator(33);
  std::vector<float> a = random_vector(std::size_t(m * k), generator),
                     b = random_vector(std::size_t(n * k), generator);
  round_to_bf16(a.data(), a.size());
  round_to_bf16(b.data(), b.size());
  std::vector<float> result(std::size_t(m * n));
  gemm_call call;
  call.mode = gemm_mode::bf16;
  call.a = {a.data(), m, k};
  call.b = {b.data(), n, k};
  call.c = result.data();
  call.out = storage::bf16;
  gemm(call);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double exact = 0.0;
      for (int kk = 0; kk < k; ++kk)
        exact += double(a[std::size_t(i * k + kk)]) * double(b[std::size_t(j * k + kk)]);
      CHECK(std::abs(double(result[std::size_t(i * n + j)]) - exact) <=
            std::abs(exact) * std::ldexp(1.0, -8) + 1e-6);
      CHECK(round_to_bf16(result[std::size_t(i * n + j)]) == result[std::size_t(i * n + j)]);
    }
  }
}

TEST_CASE("statistics count saturated and flushed elements") {
  set_thread_count(1);
  recipe_switches switches;
  scaling_state state(switches, {"layer"});
  // amax 1 recorded, so the next step's E4M3 scale is 448: 2.0 saturates (896 > 448), 1e-6 becomes
  // 4.5e-4, below half of E4M3's smallest subnormal 2^-9, and flushes; 0 is not counted as flushed.
  state.delayed().record(state.tensor_index(0, fp8::gemm_operand::fprop_input), 1.0f);
  state.end_step();
  const auto path = std::filesystem::temp_directory_path() / "fp8_trainer_stats_test.csv";
  {
    tensor_stats_log log(path.string(), 0);
    log.set_step(7);
    operand_scaling s{&state, 0, fp8::gemm_operand::fprop_input, false, &log, gemm_mode::fp8};
    std::vector<float> x{2.0f, 1e-6f, 0.0f, 0.5f};
    quantize_operand({x.data(), 1, 4}, s);
  }
  std::ifstream in(path);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  CHECK(header == "step,layer,operand,format,mode,granularity,amax,scale_min,scale_max,saturated,flushed");
  CHECK(row == "7,layer,fprop_input,e4m3,fp8,per_tensor,2,448,448,0.25,0.333333");
}

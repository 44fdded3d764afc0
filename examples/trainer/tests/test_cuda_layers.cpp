// The CUDA layers against the CPU layers (the reference) on the same weights and inputs: forward and
// backward of every non-GEMM layer, in FP32 storage and in BF16 storage, plus the optimizer.
//
// Tolerances (expect_close: |gpu - cpu| <= relative |cpu| + absolute max|cpu|, and a cap on the share
// of elements whose bits differ at all), and why:
//  - exact: the same float operations in the same order (embedding lookup and scatter-add, BF16
//    rounding, gradient clipping by the same factor, the compute copy, the fused cross-entropy
//    against the unfused one).
//  - element-wise FP32 (RoPE, SwiGLU, cross-entropy): the host compiler contracts a * b + c into FMAs
//    (GCC with -march=native) where the kernels round every operation, and CUDA's expf is within 2 ulp
//    where glibc's is within 1: a few ulp, so 2e-6 relative (about 16 ulp) with a 1e-6 floor.
//  - reductions in FP32 (RMSNorm's statistics and weight gradient, the softmax sums, attention's
//    products): another summation order (warp trees, cuBLAS's blocking vs. Eigen's) changes the sums
//    by up to about K ulp of the largest partial sum: 1e-5 relative plus 1e-5 of the tensor's largest
//    value (cancellation in RMSNorm's and softmax's backward), 1e-4 relative for attention, whose
//    errors pass through two products and a softmax. RMSNorm's weight gradient sums 3000 rows: the
//    CPU's serial float sum drifts by about sqrt(N) half-ulps of the running sum (1e-4 of the largest
//    value covers several times that).
//  - BF16 storage: the FP32 differences above move a value across a BF16 rounding boundary now and
//    then; the stored value then differs by one BF16 ulp (2^-8 to 2^-7 relative). So 2^-7 relative,
//    and only a small share of elements may differ at all (a systematic error changes most of them).
//    Attention in bf16 mode: a flipped probability or dS enters the next product, so 2^-6 relative
//    and 2^-7 of the largest value, without a cap on the share.
//  - AdamW: the same formula, but the CPU loop may be contracted into FMAs: 1e-6 relative on the
//    moments and weights after three steps (about 8 ulp), and 1e-7 of the largest value for weights
//    that an update brings close to zero (the update's own few-ulp error is absolute, about 1e-10
//    here); the gradient norm is a double sum of float squares in another order: 1e-12 relative.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include <fp8/convert.hpp>
#include <fp8/cuda/error.hpp>
#include <fp8/float8.hpp>
#include <fp8/format.hpp>
#include <fp8/quantize.hpp>
#include <fp8/scaling/fp8_format.hpp>

#include "adamw.hpp"
#include "attention.hpp"
#include "cross_entropy.hpp"
#include "cuda/adamw.hpp"
#include "cuda/attention.hpp"
#include "cuda/batched_gemm.hpp"
#include "cuda/cross_entropy.hpp"
#include "cuda/cudnn_attention.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/embedding.hpp"
#include "cuda/gelu.hpp"
#include "cuda/grid_cap.hpp"
#include "cuda/residual.hpp"
#include "cuda/rmsnorm.hpp"
#include "cuda/rope.hpp"
#include "cuda/storage.hpp"
#include "cuda/swiglu.hpp"
#include "cuda_layer_check.hpp"
#include "embedding.hpp"
#include "gelu.hpp"
#include "gpu_skip.hpp"
#include "parallel.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"
#include "swiglu.hpp"

using namespace trainer;
using namespace trainer::cuda_testing;
using trainer::cuda::device_buffer;

namespace {

constexpr tolerance elementwise_fp32{2e-6, 1e-6, 1.0};
// GELU's derivative holds 1 - tanh^2, which cancels for |x| > 3: two ulp of tanh there are up to
// about 1e-5 of the result.
constexpr tolerance gelu_fp32{1e-5, 1e-6, 1.0};
constexpr tolerance reduction_fp32{1e-5, 1e-5, 1.0};
constexpr tolerance attention_fp32{1e-4, 1e-5, 1.0};
constexpr tolerance stored_bf16{0.0078125, 1e-5, 0.01};
constexpr tolerance attention_bf16{0.015625, 0.0078125, 1.0};
// The fused path (cuDNN's flash attention) computes the same layer another way: the probabilities
// are rounded to BF16 before they are normalised (and dS likewise in the backward pass), dq, dk, dv
// leave cuDNN as BF16 and are rounded once more after RoPE's inverse rotation. Each of those is an
// error of up to 2^-8 relative that the next product carries on, so twice the materialised bf16
// allowance: 2^-5 relative and 2^-6 of the largest value. A wrong mask, scale or layout is off by
// tens of percent.
constexpr tolerance attention_fused{0.03125, 0.015625, 1.0};
constexpr tolerance long_sum_fp32{1e-5, 1e-4, 1.0};
constexpr tolerance optimizer{1e-6, 1e-7, 1.0};

const tolerance& for_storage(storage where, const tolerance& fp32) {
  return where == storage::bf16 ? stored_bf16 : fp32;
}

void synchronize() { FP8_CUDA_CHECK(cudaDeviceSynchronize()); }

const char* name_of(storage where) { return where == storage::bf16 ? "bf16 storage" : "fp32 storage"; }

// The raw BF16 bits of BF16 values held in floats (exact: the low half is zero, NaN canonical).
std::vector<std::uint16_t> bf16_bits_of(const std::vector<float>& values) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = std::uint16_t(bits_of(values[i]) >> 16);
  return bits;
}

// BF16 bits widened to floats (exact).
std::vector<float> floats_of_bf16(const std::vector<std::uint16_t>& bits) {
  std::vector<float> values(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const std::uint32_t widened = std::uint32_t(bits[i]) << 16;
    std::memcpy(&values[i], &widened, sizeof(float));
  }
  return values;
}

}  // namespace

TEST_CASE("BF16 rounding on the device equals the CPU's, bit for bit") {
  // Every exponent, with the mantissas around the rounding point (ties to even and odd, just below
  // and above), both signs, plus zeros, subnormals, the largest floats (which round to Inf), Inf and
  // NaNs with payloads.
  std::vector<float> values;
  const std::uint32_t mantissas[] = {0x000000, 0x000001, 0x007FFF, 0x008000, 0x008001, 0x00FFFF,
                                     0x018000, 0x017FFF, 0x7F8000, 0x7FFFFF, 0x3FFFFF, 0x400000};
  for (std::uint32_t sign = 0; sign < 2; ++sign) {
    for (std::uint32_t exponent = 0; exponent < 256; ++exponent) {
      for (std::uint32_t mantissa : mantissas) {
        const std::uint32_t bits = (sign << 31) | (exponent << 23) | mantissa;
        float x;
        std::memcpy(&x, &bits, sizeof(x));
        values.push_back(x);
      }
    }
  }
  std::vector<float> want = values;
  round_to_bf16(want.data(), want.size());
  device_buffer<float> data(values);
  cuda::round_to_bf16(data.data(), data.size(), nullptr);
  synchronize();
  expect_same_bits("round_to_bf16", data.to_host(), want);
  // The staging copy to raw BF16 (what the linear layers read) writes the same bits, NaN included.
  device_buffer<float> staged_in(values);
  device_buffer<std::uint16_t> staged(values.size());
  cuda::to_bf16(staged.data(), staged_in.data(), values.size(), nullptr);
  synchronize();
  CHECK(staged.to_host() == bf16_bits_of(want));
  // And the CPU rounding itself is the library's (as test_fp8_gemm checks on the host).
  for (std::size_t i = 0; i < values.size(); i += 97) {
    if (!std::isnan(values[i])) CHECK(bits_of(want[i]) == bits_of(float(fp8::bfloat16(values[i]))));
  }
}

TEST_CASE("embedding forward and backward equal the CPU layer bit for bit") {
  // 700 tokens: three shared-memory tiles of 256, the last one partial; 300 channels: two blocks of
  // 256 in x, the second partial.
  const int n = 700, c = 300, v = 256;
  const std::vector<float> table = random_values(std::size_t(v) * c, 1);
  const std::vector<std::int32_t> tokens = random_tokens(std::size_t(n), v, 2);
  const std::vector<float> dout = random_values(std::size_t(n) * c, 3);
  const std::vector<float> dtable_start = random_values(std::size_t(v) * c, 4);

  std::vector<float> out(std::size_t(n) * c);
  embedding_forward(out.data(), table.data(), tokens.data(), n, c);
  std::vector<float> dtable = dtable_start;
  embedding_backward(dtable.data(), dout.data(), tokens.data(), n, c);

  device_buffer<float> table_d(table), out_d(out.size()), dout_d(dout), dtable_d(dtable_start);
  device_buffer<std::int32_t> tokens_d(tokens);
  cuda::embedding_forward(out_d.data(), table_d.data(), tokens_d.data(), n, c, v, nullptr);
  cuda::embedding_backward(dtable_d.data(), dout_d.data(), tokens_d.data(), n, c, v, nullptr);
  synchronize();
  expect_same_bits("embedding out", out_d.to_host(), out);
  expect_same_bits("embedding dtable", dtable_d.to_host(), dtable);

  SUBCASE("a row that holds most tokens: whole tiles of matches, listed in token order") {
    // 9 tokens in 10 are byte 32 (as spaces are in text), so whole warps and tiles match, and the
    // sums over those rows run hundreds of additions long in the CPU's order.
    std::vector<std::int32_t> skewed = tokens;
    for (std::size_t i = 0; i < skewed.size(); ++i) {
      if (i % 10 != 3) skewed[i] = 32;
    }
    std::vector<float> want = dtable_start;
    embedding_backward(want.data(), dout.data(), skewed.data(), n, c);
    device_buffer<std::int32_t> skewed_d(skewed);
    device_buffer<float> got(dtable_start);
    cuda::embedding_backward(got.data(), dout_d.data(), skewed_d.data(), n, c, v, nullptr);
    synchronize();
    expect_same_bits("embedding dtable, skewed tokens", got.to_host(), want);
  }

  SUBCASE("a token outside the table gives a NaN row and adds nothing") {
    std::vector<std::int32_t> bad = tokens;
    bad[5] = v;
    bad[6] = -1;
    device_buffer<std::int32_t> bad_d(bad);
    device_buffer<float> dtable_bad(dtable_start);
    cuda::embedding_forward(out_d.data(), table_d.data(), bad_d.data(), n, c, v, nullptr);
    cuda::embedding_backward(dtable_bad.data(), dout_d.data(), bad_d.data(), n, c, v, nullptr);
    synchronize();
    const std::vector<float> got = out_d.to_host();
    CHECK(std::isnan(got[std::size_t(5) * c]));
    CHECK(std::isnan(got[std::size_t(6) * c + c - 1]));
    CHECK(got[std::size_t(7) * c] == table[std::size_t(tokens[7]) * c]);
    // The reference without tokens 5 and 6: their rows of dout zeroed.
    std::vector<float> dout_without = dout;
    std::fill(dout_without.begin() + 5 * c, dout_without.begin() + 7 * c, 0.0f);
    std::vector<float> want = dtable_start;
    embedding_backward(want.data(), dout_without.data(), tokens.data(), n, c);
    // Adding +0.0 leaves every value's bits unchanged except -0.0; the table has no zeros.
    expect_same_bits("embedding dtable without the bad tokens", dtable_bad.to_host(), want);
  }
}

TEST_CASE("the residual add equals the CPU's bit for bit") {
  // One IEEE addition and one rounding per element on both devices.
  for (storage stored : {storage::fp32, storage::bf16}) {
    CAPTURE(name_of(stored));
    const std::size_t count = 100003;
    const std::vector<float> a = random_values(count, 70, 1.0f, stored),
                             b = random_values(count, 71, 0.1f, stored);
    std::vector<float> want(count);
    for (std::size_t i = 0; i < count; ++i) want[i] = a[i] + b[i];
    store(stored, want.data(), count);
    device_buffer<float> a_d(a), b_d(b), out_d(count);
    cuda::residual_forward(out_d.data(), a_d.data(), b_d.data(), count, stored, nullptr);
    cuda::residual_forward(a_d.data(), a_d.data(), b_d.data(), count, stored, nullptr);  // in place
    synchronize();
    expect_same_bits("residual", out_d.to_host(), want);
    expect_same_bits("residual in place", a_d.to_host(), want);
    if (stored == storage::bf16) {
      // b as the BF16 bits a linear layer writes (b holds BF16 values): the same sums, bit for bit.
      device_buffer<float> a16_d(a), out16_d(count);
      device_buffer<std::uint16_t> b16_d(bf16_bits_of(b));
      cuda::residual_forward(out16_d.data(), a16_d.data(), b16_d.data(), count, stored, nullptr);
      cuda::residual_forward(a16_d.data(), a16_d.data(), b16_d.data(), count, stored, nullptr);  // in place
      synchronize();
      expect_same_bits("residual with BF16 b", out16_d.to_host(), want);
      expect_same_bits("residual with BF16 b in place", a16_d.to_host(), want);
    }
  }
}

TEST_CASE("rmsnorm forward and backward match the CPU layer") {
  set_thread_count(1);
  // 3000 rows: more than the grid's cap of blocks on any current GPU, so blocks loop over rows, and
  // 47 partial weight-gradient rows, the last one partial; 200 channels: not a multiple of the block,
  // and 600: each thread strides over three channels of a row (the last round partial), and the
  // weight gradient spans three blocks of columns.
  const int n = 3000;
  for (const int c : {200, 600}) {
    CAPTURE(c);
    for (storage stored : {storage::fp32, storage::bf16}) {
      CAPTURE(name_of(stored));
      const std::vector<float> inp = random_values(std::size_t(n) * c, 10, 2.0f, stored);
      const std::vector<float> weight = random_values(std::size_t(c), 11, 1.0f, stored);
      const std::vector<float> dout = random_values(std::size_t(n) * c, 12, 1.0f, stored);
      const std::vector<float> dinp_start = random_values(std::size_t(n) * c, 13, 1.0f, stored);
      const std::vector<float> dweight_start = random_values(std::size_t(c), 14);

      std::vector<float> out(inp.size()), rstd(static_cast<std::size_t>(n)), dinp = dinp_start,
                                                                             dweight = dweight_start;
      rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), n, c, stored);
      rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(), rstd.data(), n, c,
                       stored);

      device_buffer<float> inp_d(inp), weight_d(weight), dout_d(dout), dinp_d(dinp_start),
          dweight_d(dweight_start);
      device_buffer<float> out_d(out.size()), rstd_d(rstd.size());
      device_buffer<float> workspace(cuda::rmsnorm_backward_workspace_size(n, c));
      cuda::rmsnorm_forward(out_d.data(), rstd_d.data(), inp_d.data(), weight_d.data(), n, c, stored,
                            nullptr);
      // The backward pass reads the CPU's rstd, so that it is checked on its own.
      device_buffer<float> cpu_rstd(rstd);
      cuda::rmsnorm_backward(dinp_d.data(), dweight_d.data(), dout_d.data(), inp_d.data(), weight_d.data(),
                             cpu_rstd.data(), n, c, stored, workspace.data(), nullptr);
      synchronize();
      expect_close("rmsnorm rstd", rstd_d.to_host(), rstd, reduction_fp32);
      expect_close("rmsnorm out", out_d.to_host(), out, for_storage(stored, reduction_fp32));
      expect_close("rmsnorm dinp", dinp_d.to_host(), dinp, for_storage(stored, reduction_fp32));
      expect_close("rmsnorm dweight", dweight_d.to_host(), dweight, long_sum_fp32);
      // Reproducible: the same inputs give the same bits (fixed reduction orders, no atomics).
      device_buffer<float> dinp_again(dinp_start), dweight_again(dweight_start);
      cuda::rmsnorm_backward(dinp_again.data(), dweight_again.data(), dout_d.data(), inp_d.data(),
                             weight_d.data(), cpu_rstd.data(), n, c, stored, workspace.data(), nullptr);
      synchronize();
      expect_same_bits("rmsnorm dinp, second run", dinp_again.to_host(), dinp_d.to_host());
      expect_same_bits("rmsnorm dweight, second run", dweight_again.to_host(), dweight_d.to_host());
    }
  }
}

TEST_CASE("rope forward and backward match the CPU rotation of every vector") {
  const int groups = 6, context = 40, head_dim = 16;
  const rope_table table = make_rope_table(context, head_dim);
  const cuda::device_rope_table device_table(table);
  for (storage stored : {storage::fp32, storage::bf16}) {
    CAPTURE(name_of(stored));
    const std::vector<float> x = random_values(std::size_t(groups) * context * head_dim, 20, 1.0f, stored);
    std::vector<float> forward = x, backward = x;
    for (int g = 0; g < groups; ++g) {
      for (int t = 0; t < context; ++t) {
        const std::size_t at = (std::size_t(g) * context + std::size_t(t)) * head_dim;
        rope_forward(forward.data() + at, table, t);
        rope_backward(backward.data() + at, table, t);
      }
    }
    store(stored, forward.data(), forward.size());
    store(stored, backward.data(), backward.size());
    device_buffer<float> forward_d(x), backward_d(x);
    cuda::rope_forward(forward_d.data(), device_table, groups, stored, nullptr);
    cuda::rope_backward(backward_d.data(), device_table, groups, stored, nullptr);
    synchronize();
    expect_close("rope forward", forward_d.to_host(), forward, for_storage(stored, elementwise_fp32));
    expect_close("rope backward", backward_d.to_host(), backward, for_storage(stored, elementwise_fp32));
  }
}

namespace {

// What the materialised attention at `shape` runs with: the RoPE table (host and device), its
// workspace and a cuBLAS handle.
struct materialized_attention {
  explicit materialized_attention(const attention_shape& shape)
      : table(make_rope_table(shape.context, shape.head_dim())), device_table(table), workspace(shape) {}
  const rope_table table;
  const cuda::device_rope_table device_table;
  cuda::attention_workspace workspace;
  cuda::cublas_handle handle;
};

// The materialised attention at `shape` against the CPU layer, in fp32 and in bf16, forward and
// backward, plus reproducibility and causality.
void check_attention_against_cpu(const attention_shape& shape) {
  CAPTURE(shape.context);
  CAPTURE(shape.heads);
  const int B = shape.batch, T = shape.context, C = shape.channels, H = shape.heads;
  materialized_attention attention(shape);
  const rope_table& table = attention.table;
  const cuda::device_rope_table& device_table = attention.device_table;
  cuda::attention_workspace& workspace = attention.workspace;
  cuda::cublas_handle& handle = attention.handle;
  const std::size_t tokens = std::size_t(B) * T;
  struct run {
    gemm_mode mode;
    storage stored;
    const tolerance* allowed;
  };
  for (const run& r : {run{gemm_mode::fp32, storage::fp32, &attention_fp32},
                       run{gemm_mode::bf16, storage::bf16, &attention_bf16}}) {
    CAPTURE(to_string(r.mode));
    const std::vector<float> inp = random_values(tokens * 3 * C, 30, 1.0f, r.stored);
    const std::vector<float> dout = random_values(tokens * C, 31, 1.0f, r.stored);
    std::vector<float> out(tokens * C), qkvr(tokens * 3 * C), att(std::size_t(B) * H * T * T),
        dinp(tokens * 3 * C);
    attention_forward(out.data(), qkvr.data(), att.data(), inp.data(), table, shape, r.mode, r.stored);
    attention_backward(dinp.data(), dout.data(), qkvr.data(), att.data(), table, shape, r.mode, r.stored);

    device_buffer<float> inp_d(inp), dout_d(dout), out_d(out.size()), qkvr_d(qkvr.size()), att_d(att.size()),
        dinp_d(dinp.size());
    cuda::attention_forward(out_d.data(), qkvr_d.data(), att_d.data(), inp_d.data(), device_table, shape,
                            r.mode, r.stored, workspace, handle.get(), nullptr);
    synchronize();
    expect_close("attention qkvr", qkvr_d.to_host(), qkvr, for_storage(r.stored, elementwise_fp32));
    expect_close("attention att", att_d.to_host(), att, *r.allowed);
    expect_close("attention out", out_d.to_host(), out, *r.allowed);
    // The backward pass reads the CPU's saved tensors, so that it is checked on its own.
    device_buffer<float> cpu_qkvr(qkvr), cpu_att(att);
    cuda::attention_backward(dinp_d.data(), dout_d.data(), cpu_qkvr.data(), cpu_att.data(), device_table,
                             shape, r.mode, r.stored, workspace, handle.get(), nullptr);
    synchronize();
    expect_close("attention dinp", dinp_d.to_host(), dinp, *r.allowed);
    device_buffer<float> dinp_again(dinp.size());
    cuda::attention_backward(dinp_again.data(), dout_d.data(), cpu_qkvr.data(), cpu_att.data(), device_table,
                             shape, r.mode, r.stored, workspace, handle.get(), nullptr);
    synchronize();
    expect_same_bits("attention dinp, second run", dinp_again.to_host(), dinp_d.to_host());
    // Causality: every probability above the diagonal is exactly zero.
    const std::vector<float> probabilities = att_d.to_host();
    std::size_t above = 0;
    for (std::size_t row = 0; row < std::size_t(B) * H * T; ++row) {
      const std::size_t i = row % std::size_t(T);
      for (std::size_t j = i + 1; j < std::size_t(T); ++j) above += probabilities[row * T + j] != 0.0f;
    }
    CHECK(above == 0);
  }
}

}  // namespace

TEST_CASE("attention forward and backward match the CPU layer") {
  set_thread_count(1);
  // T = 37: more than a warp's 32 lanes per score row, with a partial last round; D = 16.
  const attention_shape shape{2, 37, 48, 3};
  check_attention_against_cpu(shape);
  // B * H * T = 10656 score rows: more warps than the softmax kernels' grid holds on any current GPU
  // (8 warps per block, 8 blocks per SM: 8448 on an H100), so warps loop over rows; T = 333 ends each
  // row with a partial round of lanes.
  check_attention_against_cpu(attention_shape{1, 333, 128, 32});
  const int B = shape.batch, T = shape.context, C = shape.channels, H = shape.heads;
  materialized_attention attention(shape);
  const std::size_t tokens = std::size_t(B) * T;
  SUBCASE("FP8 products are refused before anything runs") {
    device_buffer<float> buffer(tokens * 3 * C), qkvr_d(tokens * 3 * C), att_d(std::size_t(B) * H * T * T);
    CHECK_THROWS_AS(cuda::attention_forward(buffer.data(), qkvr_d.data(), att_d.data(), buffer.data(),
                                            attention.device_table, shape, gemm_mode::fp8, storage::bf16,
                                            attention.workspace, attention.handle.get(), nullptr),
                    fp8::invalid_argument);
  }
}

TEST_CASE("fused attention (cuDNN) forward and backward match the CPU layer") {
  REQUIRE_MESSAGE(cuda::cudnn_attention_built(), "this build has no cuDNN: the fused path is not built");
  set_thread_count(1);
  // The default model's head dimension (32) at its context, D = 64 with T = 80: a last tile of
  // queries and keys that is not full, and C = 512 (D = 128): more channels than a block's threads,
  // so that the rotations' threads take more than one pair each, as at the speed shape.
  for (const attention_shape& shape :
       {attention_shape{2, 128, 128, 4}, attention_shape{1, 80, 256, 4}, attention_shape{1, 64, 512, 4}}) {
    const int B = shape.batch, T = shape.context, C = shape.channels, H = shape.heads, D = shape.head_dim();
    CAPTURE(T);
    CAPTURE(D);
    const rope_table table = make_rope_table(T, D);
    const cuda::device_rope_table device_table(table);
    cuda::cudnn_attention kernels(shape);
    const std::size_t tokens = std::size_t(B) * T, rows = std::size_t(B) * H * T;
    const std::vector<float> inp = random_values(tokens * 3 * C, 32, 1.0f, storage::bf16);
    const std::vector<float> dout = random_values(tokens * C, 33, 1.0f, storage::bf16);
    std::vector<float> out(tokens * C), qkvr(tokens * 3 * C), att(rows * T), dinp(tokens * 3 * C);
    attention_forward(out.data(), qkvr.data(), att.data(), inp.data(), table, shape, gemm_mode::bf16,
                      storage::bf16);
    attention_backward(dinp.data(), dout.data(), qkvr.data(), att.data(), table, shape, gemm_mode::bf16,
                       storage::bf16);

    // The fused path's tensors are BF16, as the linear layers around it write and read them: qkv16
    // is wqkv's output on entry (q and k are rotated in place), dout16 wo's dx, dinp16 wqkv's dy.
    const std::vector<std::uint16_t> inp16 = bf16_bits_of(inp);
    device_buffer<std::uint16_t> qkv16_d(inp16), out16_d(tokens * C), dout16_d(bf16_bits_of(dout)),
        dinp16_d(dinp.size()), dinp16_again(dinp.size());
    device_buffer<float> stats_d(rows);
    cuda::fused_attention_forward(out16_d.data(), stats_d.data(), qkv16_d.data(), device_table, shape,
                                  &kernels, nullptr);
    synchronize();
    // The rotated q, k and v in the token layout [B, T, 3C], against the CPU's per-head [3, B, H, T, D].
    const std::vector<std::uint16_t> qkv16 = qkv16_d.to_host();
    std::vector<float> qkv_as_heads(qkv16.size());
    for (std::size_t n = 0; n < tokens; ++n) {
      const std::size_t b = n / std::size_t(T), t = n % std::size_t(T);
      for (std::size_t c = 0; c < 3 * std::size_t(C); ++c) {
        const std::size_t tensor = c / std::size_t(C), h = c % std::size_t(C) / std::size_t(D),
                          d = c % std::size_t(D);
        const std::size_t at = (((tensor * B + b) * H + h) * T + t) * std::size_t(D) + d;
        const std::uint32_t bits = std::uint32_t(qkv16[n * 3 * C + c]) << 16;
        std::memcpy(&qkv_as_heads[at], &bits, sizeof(float));
      }
    }
    expect_close("fused attention q, k, v", qkv_as_heads, qkvr, for_storage(storage::bf16, elementwise_fp32));
    // Bit for bit the device's materialised rotation of the same values (one pair rotation, one
    // rounding): what the float form of qkv gave the fused path before it was BF16.
    {
      cuda::attention_workspace materialized(shape);
      cuda::cublas_handle handle;
      device_buffer<float> inp_d(inp), out_m(out.size()), qkvr_m(qkvr.size()), att_m(att.size());
      cuda::attention_forward(out_m.data(), qkvr_m.data(), att_m.data(), inp_d.data(), device_table, shape,
                              gemm_mode::bf16, storage::bf16, materialized, handle.get(), nullptr);
      synchronize();
      expect_same_bits("fused attention q, k, v against the materialised path's", qkv_as_heads,
                       qkvr_m.to_host());
    }
    expect_close("fused attention out", floats_of_bf16(out16_d.to_host()), out, attention_fused);
    // The statistics are each row's log-sum-exp of the scaled scores (from the CPU's rotated q and k,
    // [3, B, H, T, D]): between the row's largest scaled score and that plus log(row length), with
    // 2^-6 of slack for the BF16 operands.
    const std::vector<float> stats = stats_d.to_host();
    const std::size_t head_block = rows * std::size_t(D);
    const double scale = 1.0 / std::sqrt(double(D));
    std::size_t outside = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t i = r % std::size_t(T), first = r - i;  // query position, row of position 0
      double largest = -INFINITY;
      for (std::size_t j = 0; j <= i; ++j) {
        double dot = 0.0;
        for (int d = 0; d < D; ++d) {
          dot += double(qkvr[r * D + std::size_t(d)]) *
                 double(qkvr[head_block + (first + j) * D + std::size_t(d)]);
        }
        largest = std::max(largest, dot * scale);
      }
      const double slack = 0.015625 * (1.0 + std::fabs(largest));
      outside += !(double(stats[r]) >= largest - slack &&
                   double(stats[r]) <= largest + std::log(double(i + 1)) + slack);
    }
    CHECK(outside == 0);
    cuda::fused_attention_backward(dinp16_d.data(), dout16_d.data(), qkv16_d.data(), out16_d.data(),
                                   stats_d.data(), device_table, shape, &kernels, nullptr);
    cuda::fused_attention_backward(dinp16_again.data(), dout16_d.data(), qkv16_d.data(), out16_d.data(),
                                   stats_d.data(), device_table, shape, &kernels, nullptr);
    synchronize();
    expect_close("fused attention dinp", floats_of_bf16(dinp16_d.to_host()), dinp, attention_fused);
    // Deterministic: resumed and data-parallel runs rely on it.
    expect_same_bits("fused attention dinp, second run", floats_of_bf16(dinp16_again.to_host()),
                     floats_of_bf16(dinp16_d.to_host()));
    // With the grid capped at 3 blocks the rotations' blocks loop over the tokens (at these shapes
    // they otherwise take one each): the same rotated q and k, output and gradients, bit for bit.
    {
      const cuda::scoped_grid_cap cap(3);
      device_buffer<std::uint16_t> qkv16_capped(inp16), out16_capped(tokens * C), dinp16_capped(dinp.size());
      device_buffer<float> stats_capped(rows);
      cuda::fused_attention_forward(out16_capped.data(), stats_capped.data(), qkv16_capped.data(),
                                    device_table, shape, &kernels, nullptr);
      cuda::fused_attention_backward(dinp16_capped.data(), dout16_d.data(), qkv16_capped.data(),
                                     out16_capped.data(), stats_capped.data(), device_table, shape, &kernels,
                                     nullptr);
      synchronize();
      CHECK(qkv16_capped.to_host() == qkv16);
      CHECK(out16_capped.to_host() == out16_d.to_host());
      CHECK(dinp16_capped.to_host() == dinp16_d.to_host());
    }

    // Causality: changing the last token's q, k and v changes no earlier token's output, bit for bit.
    std::vector<float> changed = inp;
    for (int b = 0; b < B; ++b) {
      float* last = changed.data() + (std::size_t(b) * T + std::size_t(T - 1)) * 3 * C;
      for (int i = 0; i < 3 * C; ++i) last[i] = -2.0f * last[i] + 1.0f;
    }
    device_buffer<std::uint16_t> changed16_d(bf16_bits_of(changed)), out16_changed(out.size());
    cuda::fused_attention_forward(out16_changed.data(), stats_d.data(), changed16_d.data(), device_table,
                                  shape, &kernels, nullptr);
    synchronize();
    const std::vector<std::uint16_t> before = out16_d.to_host(), after = out16_changed.to_host();
    std::size_t earlier_changed = 0, last_changed = 0;
    for (std::size_t token = 0; token < tokens; ++token) {
      const bool last = token % std::size_t(T) == std::size_t(T - 1);
      for (int c = 0; c < C; ++c) {
        const std::size_t i = token * C + std::size_t(c);
        const bool differs = before[i] != after[i];
        (last ? last_changed : earlier_changed) += differs;
      }
    }
    CHECK(earlier_changed == 0);
    CHECK(last_changed > 0);
  }
  SUBCASE("graphs of another shape, or the fused path's workspace on the materialised path, are refused") {
    const attention_shape shape{2, 128, 128, 4};
    const rope_table table = make_rope_table(shape.context, shape.head_dim());
    const cuda::device_rope_table device_table(table);
    cuda::attention_workspace fused(shape, attention_kernel::fused);
    cuda::cudnn_attention other(attention_shape{1, 128, 128, 4});
    const std::size_t tokens = std::size_t(shape.batch) * shape.context;
    device_buffer<float> buffer(tokens * 3 * shape.channels), stats(std::size_t(shape.batch) * 4 * 128);
    device_buffer<std::uint16_t> qkv16(tokens * 3 * shape.channels), heads16(tokens * shape.channels);
    CHECK_THROWS_WITH_AS(cuda::fused_attention_forward(heads16.data(), stats.data(), qkv16.data(),
                                                       device_table, shape, &other, nullptr),
                         doctest::Contains("the cuDNN graphs were built for another shape"),
                         fp8::invalid_argument);
    CHECK_THROWS_WITH_AS(
        cuda::fused_attention_backward(qkv16.data(), heads16.data(), qkv16.data(), heads16.data(),
                                       stats.data(), device_table, shape, &other, nullptr),
        doctest::Contains("the cuDNN graphs were built for another shape"), fp8::invalid_argument);
    // The fused path's workspace is empty: the materialised path refuses it.
    CHECK(fused.heads_bf16.size() == 0);
    CHECK(fused.square.size() == 0);
    CHECK_THROWS_WITH_AS(
        cuda::attention_backward(buffer.data(), buffer.data(), buffer.data(), buffer.data(), device_table,
                                 shape, gemm_mode::bf16, storage::bf16, fused, cuda::cublas_handle().get(),
                                 nullptr),
        doctest::Contains("the workspace was made for the fused path, not the materialized one"),
        fp8::invalid_argument);
  }
}

namespace {

// `values` one element into a fresh device buffer: a start 4 bytes past the allocation's 16-byte
// alignment, on which SwiGLU's kernels must take their one-element path.
template <class T>
device_buffer<T> one_element_in(const std::vector<T>& values) {
  std::vector<T> shifted(values.size() + 1);
  std::copy(values.begin(), values.end(), shifted.begin() + 1);
  return device_buffer<T>(shifted);
}

}  // namespace

TEST_CASE("swiglu forward and backward match the CPU layer") {
  // f = 150 takes the kernels' one-element path, f = 152 their 16-byte chunks (rows stay aligned);
  // f = 302 (one element at a time) and 2056 (257 BF16 chunks, 514 float chunks) give a thread more
  // than one round of its row, as the speed shape's 14336 does. Each also with its buffers one
  // element past their alignment (the one-element path), which must give the same bits.
  const int n = 301;
  for (const int f : {150, 152, 302, 2056}) {
    for (storage stored : {storage::fp32, storage::bf16}) {
      CAPTURE(f);
      CAPTURE(name_of(stored));
      const std::vector<float> inp = random_values(std::size_t(n) * 2 * f, 40, 2.0f, stored);
      const std::vector<float> dout = random_values(std::size_t(n) * f, 41, 1.0f, stored);
      std::vector<float> out(std::size_t(n) * f), dinp(inp.size());
      swiglu_forward(out.data(), inp.data(), n, f, stored);
      swiglu_backward(dinp.data(), dout.data(), inp.data(), n, f, stored);
      device_buffer<float> inp_d(inp), dout_d(dout), out_d(out.size()), dinp_d(dinp.size());
      cuda::swiglu_forward(out_d.data(), inp_d.data(), n, f, stored, nullptr);
      cuda::swiglu_backward(dinp_d.data(), dout_d.data(), inp_d.data(), n, f, stored, nullptr);
      // The outputs zero-filled: element 0, before the kernels' start, is copied back too (and
      // checked to stay 0), so it must be initialised for compute-sanitizer's initcheck.
      device_buffer<float> inp_off = one_element_in(inp), dout_off = one_element_in(dout),
                           out_off(std::vector<float>(out.size() + 1, 0.0f)),
                           dinp_off(std::vector<float>(dinp.size() + 1, 0.0f));
      cuda::swiglu_forward(out_off.data() + 1, inp_off.data() + 1, n, f, stored, nullptr);
      cuda::swiglu_backward(dinp_off.data() + 1, dout_off.data() + 1, inp_off.data() + 1, n, f, stored,
                            nullptr);
      synchronize();
      expect_close("swiglu out", out_d.to_host(), out, for_storage(stored, elementwise_fp32));
      expect_close("swiglu dinp", dinp_d.to_host(), dinp, for_storage(stored, elementwise_fp32));
      std::vector<float> out_shifted = out_off.to_host(), dinp_shifted = dinp_off.to_host();
      CHECK(out_shifted.front() == 0.0f);
      CHECK(dinp_shifted.front() == 0.0f);
      out_shifted.erase(out_shifted.begin());
      dinp_shifted.erase(dinp_shifted.begin());
      expect_same_bits("swiglu out, buffers unaligned", out_shifted, out_d.to_host());
      expect_same_bits("swiglu dinp, buffers unaligned", dinp_shifted, dinp_d.to_host());
    }
  }
}

namespace {

// The BF16 form's elements against the float form's (storage::bf16): as bits, against what the
// float form's staging copy (to_bf16) gives a linear layer; as values, widened, against the float
// form's values (NaN where it has NaN; a NaN's payload is the conversion's).
void expect_same_as_float_form(const char* what, const device_buffer<std::uint16_t>& bf16_form,
                               const device_buffer<float>& float_form) {
  device_buffer<std::uint16_t> staged(float_form.size());
  cuda::to_bf16(staged.data(), float_form.data(), float_form.size(), nullptr);
  synchronize();
  const std::vector<std::uint16_t> got = bf16_form.to_host(), want = staged.to_host();
  const std::vector<float> values = float_form.to_host();
  REQUIRE(got.size() == want.size());
  std::size_t differing_bits = 0, differing_values = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) ++differing_bits;
    const std::uint32_t widened_bits = std::uint32_t(got[i]) << 16;
    float widened;
    std::memcpy(&widened, &widened_bits, sizeof(widened));
    const bool same = std::isnan(values[i]) ? std::isnan(widened) : bits_of(widened) == bits_of(values[i]);
    if (!same) ++differing_values;
  }
  INFO(what << ": " << differing_bits << " of " << got.size() << " BF16 codes and " << differing_values
            << " values differ from the float form's");
  CHECK(differing_bits == 0);
  CHECK(differing_values == 0);
}

}  // namespace

TEST_CASE("swiglu's BF16 forms equal the float forms with BF16 storage, bit for bit") {
  // The transformer's MLP half keeps these tensors as BF16 in bf16 and fp8 runs: the values must be
  // the float forms' (which the test above holds to the CPU layer), including overflow, infinities,
  // NaN, signed zeros and subnormals (in the first row); f = 150 through the kernels' one-element
  // path, f = 152 through their 16-byte chunks, f = 302 and 2056 with more than one round per thread,
  // and each again with its buffers one element (2 bytes) past their alignment.
  const int n = 301;
  for (const int f : {150, 152, 302, 2056}) {
    CAPTURE(f);
    std::vector<float> inp = random_values(std::size_t(n) * 2 * f, 42, 2.0f, storage::bf16);
    std::vector<float> dout = random_values(std::size_t(n) * f, 43, 1.0f, storage::bf16);
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const float gates[] = {inf, -inf, nan, 0.0f, -0.0f, 3.0e38f, -3.0e38f, 1.0e-39f, 90.0f, -90.0f, 2.0f};
    const float ups[] = {2.0f, 3.0f, 1.0f, nan, inf, 3.0e38f, 1.0f, -1.0e-39f, 3.0e38f, 5.0f, -0.0f};
    const float douts[] = {1.0f, -1.0f, 1.0f, 2.0f, inf, 3.0e38f, 0.5f, 3.0e38f, 1.0f, nan, -0.0f};
    for (std::size_t j = 0; j < std::size(gates); ++j) {
      inp[j] = gates[j];
      inp[std::size_t(f) + j] = ups[j];
      dout[j] = douts[j];
    }
    store(storage::bf16, inp.data(), inp.size());
    store(storage::bf16, dout.data(), dout.size());

    device_buffer<float> inp_d(inp), dout_d(dout), out_d(dout.size()), dinp_d(inp.size());
    cuda::swiglu_forward(out_d.data(), inp_d.data(), n, f, storage::bf16, nullptr);
    cuda::swiglu_backward(dinp_d.data(), dout_d.data(), inp_d.data(), n, f, storage::bf16, nullptr);
    device_buffer<std::uint16_t> inp16(bf16_bits_of(inp)), dout16(bf16_bits_of(dout)), out16(dout.size()),
        dinp16(inp.size());
    cuda::swiglu_forward(out16.data(), inp16.data(), n, f, nullptr);
    cuda::swiglu_backward(dinp16.data(), dout16.data(), inp16.data(), n, f, nullptr);
    device_buffer<std::uint16_t> inp16_off = one_element_in(bf16_bits_of(inp)),
                                 dout16_off = one_element_in(bf16_bits_of(dout)),
                                 out16_off(std::vector<std::uint16_t>(dout.size() + 1, 0)),
                                 dinp16_off(std::vector<std::uint16_t>(inp.size() + 1, 0));  // as above
    cuda::swiglu_forward(out16_off.data() + 1, inp16_off.data() + 1, n, f, nullptr);
    cuda::swiglu_backward(dinp16_off.data() + 1, dout16_off.data() + 1, inp16_off.data() + 1, n, f, nullptr);
    synchronize();
    expect_same_as_float_form("swiglu out", out16, out_d);
    expect_same_as_float_form("swiglu dinp", dinp16, dinp_d);
    std::vector<std::uint16_t> out_shifted = out16_off.to_host(), dinp_shifted = dinp16_off.to_host();
    CHECK(out_shifted.front() == 0);
    CHECK(dinp_shifted.front() == 0);
    out_shifted.erase(out_shifted.begin());
    dinp_shifted.erase(dinp_shifted.begin());
    CHECK(out_shifted == out16.to_host());
    CHECK(dinp_shifted == dinp16.to_host());
  }
}

TEST_CASE("rmsnorm's BF16 form equals the float form with BF16 storage, bit for bit") {
  // The transformer's norms that feed linear layers (ln1, ln2, lnf) write BF16 in bf16 and fp8 runs:
  // the codes must be what the float form's staging copy gave the layer (the test above holds the
  // float form to the CPU layer), and rstd the same bits. The shape of that test (blocks loop over
  // rows, channels not a multiple of the block), plus rows with specials: NaN and infinity in the
  // input (a NaN row), squares that overflow (rstd 0), a zero row, signed zeros, subnormals, and a
  // weight that takes outputs past BF16's largest finite value.
  const int n = 3000, c = 200;
  std::vector<float> inp = random_values(std::size_t(n) * c, 20, 2.0f, storage::bf16);
  std::vector<float> weight = random_values(std::size_t(c), 21, 1.0f, storage::bf16);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const auto row = [&](int r) { return inp.begin() + std::ptrdiff_t(r) * c; };
  row(0)[3] = nan;
  row(1)[7] = inf;
  row(2)[5] = -inf;
  std::fill(row(3), row(3) + c / 2, 3.0e38f);
  std::fill(row(4), row(5), 0.0f);
  std::fill(row(5), row(6), -0.0f);
  for (int j = 0; j < c; j += 2) row(6)[j] = j % 4 == 0 ? 1.0e-39f : -1.0e-40f;  // subnormals and zeros
  row(7)[11] = -0.0f;
  row(8)[9] = 20.0f;    // |x * rstd| > 1 at the large weight below: an infinity in the float form too
  weight[9] = 3.0e38f;  // |x * rstd| near 1 in most rows: past BF16's range, rounded to infinity
  weight[13] = -0.0f;
  store(storage::bf16, inp.data(), inp.size());
  store(storage::bf16, weight.data(), weight.size());

  const std::size_t rows = std::size_t(n);
  device_buffer<float> inp_d(inp), weight_d(weight), out_d(inp.size()), rstd_d(rows), rstd16_d(rows);
  device_buffer<std::uint16_t> out16(inp.size());
  cuda::rmsnorm_forward(out_d.data(), rstd_d.data(), inp_d.data(), weight_d.data(), n, c, storage::bf16,
                        nullptr);
  cuda::rmsnorm_forward(out16.data(), rstd16_d.data(), inp_d.data(), weight_d.data(), n, c, nullptr);
  synchronize();
  expect_same_as_float_form("rmsnorm out", out16, out_d);
  expect_same_bits("rmsnorm rstd of the BF16 form", rstd16_d.to_host(), rstd_d.to_host());
  // The specials reach the outputs (else the rows above test nothing special).
  const std::vector<float> out = out_d.to_host();
  const auto out_row = [&](int r) { return out.begin() + std::ptrdiff_t(r) * c; };
  CHECK(std::all_of(out_row(0), out_row(1), [](float x) { return std::isnan(x); }));
  CHECK(std::isinf(out[std::size_t(8) * c + 9]));
  CHECK(std::count_if(out_row(3), out_row(4), [](float x) { return x == 0.0f; }) > c / 2);
}

TEST_CASE("the producers of linear-layer operands record the amax of what they write, bit for bit") {
  // RMSNorm's and SwiGLU's BF16 forms and the staging copy record max |out| as they write out, for a
  // linear layer to take instead of reading out (its x_amax, dy_amax): the amax of the values
  // written, as fp8::compute_amax gives it, max-accumulated into what the slot held (0.5 here), with
  // a NaN on top where one is written. The staging copy's input is not BF16-valued: the amax is of
  // the rounded copy, not of its input.
  const auto expected = [](const std::vector<std::uint16_t>& written) {
    std::vector<float> values = floats_of_bf16(written);
    values.push_back(0.5f);
    return fp8::compute_amax(values.data(), values.size());
  };
  const auto recorded = [](const device_buffer<float>& slot) { return slot.to_host().at(0); };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const bool with_nan : {false, true}) {
    CAPTURE(with_nan);
    {
      const int n = 3000, c = 200;
      std::vector<float> inp = random_values(std::size_t(n) * c, 30, 2.0f, storage::bf16);
      if (with_nan) inp[std::size_t(7) * c + 3] = nan;
      const std::vector<float> weight = random_values(std::size_t(c), 31, 1.0f, storage::bf16);
      device_buffer<float> inp_d(inp), weight_d(weight), rstd_d(static_cast<std::size_t>(n)),
          slot(std::vector<float>{0.5f});
      device_buffer<std::uint16_t> out16(inp.size());
      cuda::rmsnorm_forward(out16.data(), rstd_d.data(), inp_d.data(), weight_d.data(), n, c, nullptr,
                            slot.data());
      synchronize();
      CHECK(bits_of(recorded(slot)) == bits_of(expected(out16.to_host())));
      CHECK(std::isnan(recorded(slot)) == with_nan);
    }
    for (const int f : {150, 152}) {  // SwiGLU's one-element and 16-byte paths
      CAPTURE(f);
      const int n = 301;
      std::vector<float> inp = random_values(std::size_t(n) * 2 * f, 32, 2.0f, storage::bf16);
      if (with_nan) inp[5] = nan;
      const std::vector<float> dout = random_values(std::size_t(n) * f, 33, 1.0f, storage::bf16);
      device_buffer<std::uint16_t> inp16(bf16_bits_of(inp)), dout16(bf16_bits_of(dout)), out16(dout.size()),
          dinp16(inp.size());
      device_buffer<float> out_slot(std::vector<float>{0.5f}), dinp_slot(std::vector<float>{0.5f});
      cuda::swiglu_forward(out16.data(), inp16.data(), n, f, nullptr, out_slot.data());
      cuda::swiglu_backward(dinp16.data(), dout16.data(), inp16.data(), n, f, nullptr, dinp_slot.data());
      synchronize();
      CHECK(bits_of(recorded(out_slot)) == bits_of(expected(out16.to_host())));
      CHECK(bits_of(recorded(dinp_slot)) == bits_of(expected(dinp16.to_host())));
      CHECK(std::isnan(recorded(dinp_slot)) == with_nan);
    }
    {
      std::vector<float> values = random_values(100003, 34, 3.0f);  // floats, rounded by the copy
      if (with_nan) values[99999] = nan;
      device_buffer<float> in(values), slot(std::vector<float>{0.5f});
      device_buffer<std::uint16_t> out16(values.size());
      cuda::to_bf16(out16.data(), in.data(), values.size(), nullptr, slot.data());
      synchronize();
      CHECK(bits_of(recorded(slot)) == bits_of(expected(out16.to_host())));
    }
  }
}

namespace {

// The codes the linear layer's delayed cast makes of BF16 values: each value times the scale,
// converted rounding to nearest even and saturating (the CPU's conversion).
std::vector<std::uint8_t> layer_codes_of(const std::vector<std::uint16_t>& bf16, float scale,
                                         fp8::fp8_format format) {
  const std::vector<float> values = floats_of_bf16(bf16);
  std::vector<std::uint8_t> codes(values.size());
  fp8::visit_format(format, [&](auto descriptor) {
    using format_type = decltype(descriptor);
    for (std::size_t i = 0; i < values.size(); ++i) {
      codes[i] = fp8::convert_bits<format_type, fp8::rounding::nearest_even, fp8::overflow::saturate>(
          values[i] * scale);
    }
  });
  return codes;
}

// A producer's FP8 form against its BF16 form: the codes equal the layer's cast of the BF16 form's
// values.
void expect_layer_codes(const char* what, const device_buffer<std::uint8_t>& codes,
                        const device_buffer<std::uint16_t>& bf16_form, float scale, fp8::fp8_format format) {
  const std::vector<std::uint8_t> got = codes.to_host(),
                                  want = layer_codes_of(bf16_form.to_host(), scale, format);
  REQUIRE(got.size() == want.size());
  std::size_t differing = 0;
  for (std::size_t i = 0; i < got.size(); ++i) differing += got[i] != want[i] ? 1 : 0;
  INFO(what << " (" << fp8::format_name(format) << ", scale " << scale << "): " << differing << " of "
            << got.size() << " codes differ from the layer's cast of the BF16 form");
  CHECK(differing == 0);
}

// ... and the amaxes the two forms recorded into slots that held the same value are the same bits.
void expect_codes_of(const char* what, const device_buffer<std::uint8_t>& codes,
                     const device_buffer<float>& amax, const device_buffer<std::uint16_t>& bf16_form,
                     const device_buffer<float>& bf16_amax, float scale, fp8::fp8_format format) {
  expect_layer_codes(what, codes, bf16_form, scale, format);
  CHECK(bits_of(amax.to_host().at(0)) == bits_of(bf16_amax.to_host().at(0)));
}

}  // namespace

TEST_CASE("the FP8 forms of RMSNorm, SwiGLU and the staging copy write the layer's codes of the BF16 forms") {
  // Where a linear layer takes its X or dY as FP8 codes from the producer (the transformer's fp8
  // runs under delayed scaling), the codes must be those the layer's own cast of the BF16 form's
  // output makes, bit for bit, and the amax the BF16 form's: else the written and the cast runs
  // differ. Both formats; a scale of 1, one that is not a power of two, and one that saturates most
  // values (E4M3's largest is 448, E5M2's 57344); specials (NaN, infinities, signed zeros,
  // subnormals) in the inputs; SwiGLU through its one-element (f = 150) and chunked (f = 152) paths.
  // (NaNs are positive: the device's multiplication makes any NaN positive, the host's keeps the
  // sign, so a negative NaN would differ in the host reference only.)
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<fp8::fp8_format, float>> targets = {
      {fp8::fp8_format::e4m3, 1.0f}, {fp8::fp8_format::e4m3, 37.3f}, {fp8::fp8_format::e4m3, 400.0f},
      {fp8::fp8_format::e5m2, 1.0f}, {fp8::fp8_format::e5m2, 0.37f}, {fp8::fp8_format::e5m2, 60000.0f}};
  for (const auto& [format, scale] : targets) {
    CAPTURE(fp8::format_name(format));
    CAPTURE(scale);
    const device_buffer<float> scale_d(std::vector<float>{scale});
    {
      const int n = 300, c = 200;
      std::vector<float> inp = random_values(std::size_t(n) * c, 40, 2.0f, storage::bf16);
      inp[3] = nan;
      inp[std::size_t(c) + 7] = inf;
      inp[std::size_t(2 * c) + 5] = -0.0f;
      for (int j = 0; j < c; j += 2) inp[std::size_t(3 * c + j)] = j % 4 == 0 ? 1.0e-39f : -1.0e-40f;
      std::vector<float> weight = random_values(std::size_t(c), 41, 1.0f, storage::bf16);
      weight[13] = -0.0f;
      store(storage::bf16, inp.data(), inp.size());
      const std::size_t rows = std::size_t(n);
      device_buffer<float> inp_d(inp), weight_d(weight), rstd16(rows), rstd8(rows),
          amax16(std::vector<float>{0.5f}), amax8(std::vector<float>{0.5f});
      device_buffer<std::uint16_t> out16(inp.size());
      device_buffer<std::uint8_t> out8(inp.size());
      cuda::rmsnorm_forward(out16.data(), rstd16.data(), inp_d.data(), weight_d.data(), n, c, nullptr,
                            amax16.data());
      cuda::rmsnorm_forward(cuda::fp8_output{out8.data(), scale_d.data(), amax8.data(), format, n, c},
                            rstd8.data(), inp_d.data(), weight_d.data(), n, c, nullptr);
      synchronize();
      expect_codes_of("rmsnorm out", out8, amax8, out16, amax16, scale, format);
      expect_same_bits("rmsnorm rstd of the FP8 form", rstd8.to_host(), rstd16.to_host());
    }
    for (const int f : {150, 152}) {
      CAPTURE(f);
      const int n = 301;
      std::vector<float> inp = random_values(std::size_t(n) * 2 * f, 42, 3.0f, storage::bf16);
      std::vector<float> dout = random_values(std::size_t(n) * f, 43, 1.0f, storage::bf16);
      const float gates[] = {inf, -inf, nan, 0.0f, -0.0f, 1.0e-39f, 90.0f};
      const float ups[] = {2.0f, 3.0f, 1.0f, nan, inf, -1.0e-39f, 5.0f};
      for (std::size_t j = 0; j < std::size(gates); ++j) {
        inp[j] = gates[j];
        inp[std::size_t(f) + j] = ups[j];
      }
      store(storage::bf16, inp.data(), inp.size());
      device_buffer<std::uint16_t> inp16(bf16_bits_of(inp)), dout16(bf16_bits_of(dout)), out16(dout.size()),
          dinp16(inp.size());
      device_buffer<std::uint8_t> out8(dout.size()), dinp8(inp.size());
      device_buffer<float> out_amax16(std::vector<float>{0.5f}), out_amax8(std::vector<float>{0.5f}),
          dinp_amax16(std::vector<float>{0.5f}), dinp_amax8(std::vector<float>{0.5f});
      cuda::swiglu_forward(out16.data(), inp16.data(), n, f, nullptr, out_amax16.data());
      cuda::swiglu_backward(dinp16.data(), dout16.data(), inp16.data(), n, f, nullptr, dinp_amax16.data());
      cuda::swiglu_forward(cuda::fp8_output{out8.data(), scale_d.data(), out_amax8.data(), format, n, f},
                           inp16.data(), n, f, nullptr);
      cuda::swiglu_backward(
          cuda::fp8_output{dinp8.data(), scale_d.data(), dinp_amax8.data(), format, n, 2 * f}, dout16.data(),
          inp16.data(), n, f, nullptr);
      synchronize();
      expect_codes_of("swiglu out", out8, out_amax8, out16, out_amax16, scale, format);
      expect_codes_of("swiglu dinp", dinp8, dinp_amax8, dinp16, dinp_amax16, scale, format);
    }
    {
      // The staging copy: floats that are not BF16 values (the copy rounds them), specials.
      std::vector<float> values = random_values(100003, 45, 3.0f);
      const float specials[] = {nan, inf, -inf, -0.0f, 1.0e-39f, 3.0e38f, -3.0e38f, 448.5f, 1.0e-6f};
      std::copy(std::begin(specials), std::end(specials), values.begin() + 1000);
      device_buffer<float> in(values), amax16(std::vector<float>{0.5f}), amax8(std::vector<float>{0.5f});
      device_buffer<std::uint16_t> copy16(values.size());
      device_buffer<std::uint8_t> copy8(values.size());
      cuda::to_bf16(copy16.data(), in.data(), values.size(), nullptr, amax16.data());
      cuda::to_fp8(cuda::fp8_output{copy8.data(), scale_d.data(), amax8.data(), format, 1,
                                    std::int64_t(values.size())},
                   in.data(), values.size(), nullptr);
      synchronize();
      expect_codes_of("staging copy", copy8, amax8, copy16, amax16, scale, format);
    }
  }
  // Without an amax slot (evaluation passes), the codes alone.
  const int n = 4, f = 8;
  const std::vector<float> inp = random_values(std::size_t(n) * 2 * f, 44, 1.0f, storage::bf16);
  device_buffer<std::uint16_t> inp16(bf16_bits_of(inp)), out16(std::size_t(n) * f);
  device_buffer<std::uint8_t> out8(std::size_t(n) * f);
  const device_buffer<float> one(std::vector<float>{1.0f});
  cuda::swiglu_forward(out16.data(), inp16.data(), n, f, nullptr);
  cuda::swiglu_forward(cuda::fp8_output{out8.data(), one.data(), nullptr, fp8::fp8_format::e4m3, n, f},
                       inp16.data(), n, f, nullptr);
  synchronize();
  expect_layer_codes("swiglu out without an amax", out8, out16, 1.0f, fp8::fp8_format::e4m3);
}

TEST_CASE("with the grid capped at 3 blocks, the row and element kernels give the same bits") {
  // The test shapes above stay under the grid's cap on an H100 (SMs x 8 = 1056 blocks, 270336
  // threads), so SwiGLU and the embedding lookup run one row per block and the staging copy one
  // element per thread: the loops in which a block takes its next row, or a thread its next element
  // (with the amax of what it wrote carried from one to the next), only run at the speed shape. The
  // two-axis grids (the scatter-add's chunks by table rows, RMSNorm's weight partials' column blocks
  // by row chunks) loop only past 65535 along an axis.
  // Capped at 3 blocks, every block loops; the results must be the uncapped run's, bit for bit (the
  // uncapped ones are held to the CPU layers above). So must the FP8 forms' (RMSNorm's among them).
  const int n = 301, c = 200, v = 256;
  const std::vector<std::int32_t> tokens = random_tokens(std::size_t(n), v, 50);
  const std::vector<float> table = random_values(std::size_t(v) * c, 51);
  const std::vector<float> staged = random_values(100003, 52, 3.0f);
  const int scatter_width = 3 * 256 + 8;
  const std::vector<float> scatter_start = random_values(std::size_t(v) * scatter_width, 56);
  const std::vector<float> scatter_dout_values = random_values(std::size_t(n) * scatter_width, 57);
  struct outputs {
    std::vector<float> floats;
    std::vector<std::uint16_t> bf16;
    std::vector<std::uint8_t> codes;  // the FP8 forms'
  };
  const auto run = [&](int f) {
    outputs o;
    const auto keep = [](auto& into, const auto& buffer) {  // a buffer's elements onto o.floats or o.bf16
      const auto host = buffer.to_host();
      into.insert(into.end(), host.begin(), host.end());
    };
    const std::vector<float> inp = random_values(std::size_t(n) * 2 * f, 53, 2.0f, storage::bf16);
    const std::vector<float> dout = random_values(std::size_t(n) * f, 54, 1.0f, storage::bf16);
    for (storage stored : {storage::fp32, storage::bf16}) {
      device_buffer<float> inp_d(inp), dout_d(dout), out_d(dout.size()), dinp_d(inp.size());
      cuda::swiglu_forward(out_d.data(), inp_d.data(), n, f, stored, nullptr);
      cuda::swiglu_backward(dinp_d.data(), dout_d.data(), inp_d.data(), n, f, stored, nullptr);
      synchronize();
      keep(o.floats, out_d);
      keep(o.floats, dinp_d);
    }
    device_buffer<std::uint16_t> inp16(bf16_bits_of(inp)), dout16(bf16_bits_of(dout)), out16(dout.size()),
        dinp16(inp.size());
    device_buffer<float> amaxes(std::vector<float>(3, 0.0f));
    cuda::swiglu_forward(out16.data(), inp16.data(), n, f, nullptr, amaxes.data());
    cuda::swiglu_backward(dinp16.data(), dout16.data(), inp16.data(), n, f, nullptr, amaxes.data() + 1);
    device_buffer<float> table_d(table), looked_up(std::size_t(n) * c);
    device_buffer<std::int32_t> tokens_d(tokens);
    cuda::embedding_forward(looked_up.data(), table_d.data(), tokens_d.data(), n, c, v, nullptr);
    // The scatter-add 4 channel chunks wide: capped, 3 blocks take the 4 chunks and the 256 rows.
    device_buffer<float> scattered(scatter_start), scatter_dout(scatter_dout_values);
    cuda::embedding_backward(scattered.data(), scatter_dout.data(), tokens_d.data(), n, scatter_width, v,
                             nullptr);
    device_buffer<float> staged_d(staged);
    device_buffer<std::uint16_t> staged16(staged.size());
    cuda::to_bf16(staged16.data(), staged_d.data(), staged.size(), nullptr, amaxes.data() + 2);
    // The FP8 forms (SwiGLU's both ways, the staging copy, RMSNorm's), with their amaxes.
    const device_buffer<float> scale(std::vector<float>{37.3f});
    const std::size_t rows = std::size_t(n);
    device_buffer<float> fp8_amaxes(std::vector<float>(4, 0.0f)), rstd(rows);
    // Each target shaped as what its launcher writes: [rows, cols].
    const auto target = [&](device_buffer<std::uint8_t>& codes, int slot, std::size_t copy_rows,
                            std::size_t copy_cols) {
      cuda::fp8_output out{codes.data(), scale.data(), fp8_amaxes.data() + slot, fp8::fp8_format::e4m3};
      out.rows = std::int64_t(copy_rows);
      out.cols = std::int64_t(copy_cols);
      return out;
    };
    device_buffer<std::uint8_t> out8(dout.size()), dinp8(inp.size()), staged8(staged.size()),
        normed8(std::size_t(n) * c);
    cuda::swiglu_forward(target(out8, 0, n, f), inp16.data(), n, f, nullptr);
    cuda::swiglu_backward(target(dinp8, 1, n, 2 * f), dout16.data(), inp16.data(), n, f, nullptr);
    cuda::to_fp8(target(staged8, 2, 1, staged.size()), staged_d.data(), staged.size(), nullptr);
    const device_buffer<float> gains(random_values(std::size_t(c), 55, 1.0f, storage::bf16));
    cuda::rmsnorm_forward(target(normed8, 3, n, c), rstd.data(), looked_up.data(), gains.data(), n, c,
                          nullptr);
    // RMSNorm's backward from a BF16 dout: capped, its weight partials' one column block takes
    // the 5 partials of 64 rows 3 at a time.
    const std::vector<float> norm_dout = random_values(std::size_t(n) * c, 58, 1.0f, storage::bf16);
    device_buffer<std::uint16_t> norm_dout16(bf16_bits_of(norm_dout));
    device_buffer<float> norm_dinp(std::vector<float>(norm_dout.size(), 0.25f)),
        norm_dweight(std::vector<float>(std::size_t(c), 0.5f)),
        norm_workspace(cuda::rmsnorm_backward_workspace_size(n, c));
    cuda::rmsnorm_backward(norm_dinp.data(), norm_dweight.data(), norm_dout16.data(), looked_up.data(),
                           gains.data(), rstd.data(), n, c, storage::bf16, norm_workspace.data(), nullptr);
    synchronize();
    keep(o.bf16, out16);
    keep(o.bf16, dinp16);
    keep(o.floats, looked_up);
    keep(o.floats, scattered);
    keep(o.bf16, staged16);
    keep(o.floats, amaxes);
    for (const auto* codes : {&out8, &dinp8, &staged8, &normed8}) keep(o.codes, *codes);
    keep(o.floats, fp8_amaxes);
    keep(o.floats, rstd);
    keep(o.floats, norm_dinp);
    keep(o.floats, norm_dweight);
    return o;
  };
  for (const int f : {150, 152}) {  // SwiGLU's one-element and 16-byte paths
    CAPTURE(f);
    const outputs uncapped = run(f);
    const outputs capped = [&] {
      const cuda::scoped_grid_cap cap(3);
      return run(f);
    }();
    expect_same_bits("floats (SwiGLU float forms, embedding lookup and scatter-add, amaxes, RMSNorm)",
                     capped.floats, uncapped.floats);
    CHECK(capped.bf16 == uncapped.bf16);    // SwiGLU's BF16 forms, the staging copy
    CHECK(capped.codes == uncapped.codes);  // the FP8 forms
  }
}

TEST_CASE("rmsnorm's backward from a BF16 dout equals the float form, bit for bit") {
  // The norms' output gradients are the BF16 dx of linear layers in bf16 and fp8 runs, read as they
  // are: the input and weight gradients must be the float form's given dout's widened values. The
  // first test's shape (channels not a multiple of the block, rows past one partial), accumulating
  // into nonzero dinp and dweight as the transformer's backward does.
  const int n = 301, c = 200;
  const std::vector<float> inp = random_values(std::size_t(n) * c, 22, 2.0f, storage::bf16);
  const std::vector<float> weight = random_values(std::size_t(c), 23, 1.0f, storage::bf16);
  const std::vector<float> dout = random_values(std::size_t(n) * c, 24, 1.0f, storage::bf16);
  const std::vector<float> dinp0 = random_values(std::size_t(n) * c, 25, 0.5f, storage::bf16);
  const std::vector<float> dweight0 = random_values(std::size_t(c), 26, 0.5f);
  const std::size_t rows = std::size_t(n);
  device_buffer<float> inp_d(inp), weight_d(weight), out_d(inp.size()), rstd_d(rows);
  cuda::rmsnorm_forward(out_d.data(), rstd_d.data(), inp_d.data(), weight_d.data(), n, c, storage::bf16,
                        nullptr);
  device_buffer<float> workspace(cuda::rmsnorm_backward_workspace_size(n, c));
  device_buffer<float> dout_d(dout), dinp_d(dinp0), dweight_d(dweight0);
  cuda::rmsnorm_backward(dinp_d.data(), dweight_d.data(), dout_d.data(), inp_d.data(), weight_d.data(),
                         rstd_d.data(), n, c, storage::bf16, workspace.data(), nullptr);
  device_buffer<std::uint16_t> dout16_d(bf16_bits_of(dout));
  device_buffer<float> dinp16_d(dinp0), dweight16_d(dweight0);
  cuda::rmsnorm_backward(dinp16_d.data(), dweight16_d.data(), dout16_d.data(), inp_d.data(), weight_d.data(),
                         rstd_d.data(), n, c, storage::bf16, workspace.data(), nullptr);
  synchronize();
  expect_same_bits("rmsnorm dinp from BF16 dout", dinp16_d.to_host(), dinp_d.to_host());
  expect_same_bits("rmsnorm dweight from BF16 dout", dweight16_d.to_host(), dweight_d.to_host());
}

TEST_CASE("gelu forward and backward match the CPU layer") {
  const std::size_t count = 3001;  // more than one block, not a multiple of 32
  for (storage stored : {storage::fp32, storage::bf16}) {
    CAPTURE(name_of(stored));
    const std::vector<float> inp = random_values(count, 42, 4.0f, stored);
    const std::vector<float> dout = random_values(count, 43, 1.0f, stored);
    std::vector<float> out(count), dinp(count);
    gelu_forward(out.data(), inp.data(), count, stored);
    gelu_backward(dinp.data(), dout.data(), inp.data(), count, stored);
    device_buffer<float> inp_d(inp), dout_d(dout), out_d(count), dinp_d(count);
    cuda::gelu_forward(out_d.data(), inp_d.data(), count, stored, nullptr);
    cuda::gelu_backward(dinp_d.data(), dout_d.data(), inp_d.data(), count, stored, nullptr);
    synchronize();
    expect_close("gelu out", out_d.to_host(), out, for_storage(stored, gelu_fp32));
    expect_close("gelu dinp", dinp_d.to_host(), dinp, for_storage(stored, gelu_fp32));
  }
}

TEST_CASE("cross-entropy forward, backward and the fused pass match the CPU layer") {
  // The byte vocabulary, and a row length that is not a multiple of 32; 20011 rows: more warps than
  // the grid holds on any current GPU (8448 on an H100), so warps loop over rows.
  for (const std::pair<int, int>& shape : {std::pair{256, 333}, std::pair{77, 333}, std::pair{77, 20011}}) {
    const int v = shape.first, n = shape.second;
    CAPTURE(v);
    CAPTURE(n);
    const std::vector<float> logits = random_values(std::size_t(n) * v, 50, 3.0f, storage::bf16);
    const std::vector<std::int32_t> targets = random_tokens(std::size_t(n), v, 51);
    std::vector<float> losses(static_cast<std::size_t>(n)), probs(logits.size());
    const double mean =
        cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), n, v);

    device_buffer<float> logits_d(logits), losses_d(losses.size()), probs_d(probs.size());
    device_buffer<std::int32_t> targets_d(targets);
    device_buffer<double> scratch(1);
    const double mean_d = cuda::cross_entropy_forward(losses_d.data(), probs_d.data(), logits_d.data(),
                                                      targets_d.data(), n, v, scratch.data(), nullptr);
    CHECK(std::fabs(mean_d - mean) <= 1e-6 * mean);
    expect_close("cross-entropy losses", losses_d.to_host(), losses, elementwise_fp32);
    expect_close("cross-entropy probs", probs_d.to_host(), probs, elementwise_fp32);

    for (storage stored : {storage::fp32, storage::bf16}) {
      CAPTURE(name_of(stored));
      std::vector<float> dlogits(logits.size());
      cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), n, v, stored);
      device_buffer<float> dlogits_d(dlogits.size()), fused_d(dlogits.size()), fused_losses(losses.size());
      device_buffer<float> cpu_probs(probs);
      cuda::cross_entropy_backward(dlogits_d.data(), cpu_probs.data(), targets_d.data(), n, v, stored,
                                   nullptr);
      synchronize();
      // From the same probabilities the gradient is two rounded operations: bit for bit.
      expect_same_bits("cross-entropy dlogits from the CPU's probs", dlogits_d.to_host(), dlogits);

      // The fused pass equals the device's own forward + backward exactly.
      cuda::cross_entropy_backward(dlogits_d.data(), probs_d.data(), targets_d.data(), n, v, stored, nullptr);
      const double fused_mean =
          cuda::cross_entropy_forward_backward(fused_losses.data(), fused_d.data(), logits_d.data(),
                                               targets_d.data(), n, v, stored, scratch.data(), nullptr);
      CHECK(fused_mean == mean_d);
      expect_same_bits("fused dlogits", fused_d.to_host(), dlogits_d.to_host());
      expect_same_bits("fused losses", fused_losses.to_host(), losses_d.to_host());
      expect_close("fused dlogits vs the CPU", fused_d.to_host(), dlogits,
                   for_storage(stored, elementwise_fp32));
    }
  }
}

TEST_CASE("AdamW, the gradient norm, clipping and the compute copy match the CPU optimizer") {
  // w3: 300000 elements, more than the element-wise grids hold on any current GPU (270336 threads on
  // an H100) and than the norm's 1024 blocks of 256 threads, so the update, the clipping, the compute
  // copy and the squares loop over elements, in the last launch of the update (a range that starts
  // well inside the buffer).
  parameter_set host({{"w1", {40, 33}, true},
                      {"gain", {33}, false},
                      {"bias_like", {7}, false},
                      {"w2", {9, 33}, true},
                      {"norm", {33}, false},
                      {"w3", {600, 500}, true}});
  host.master = random_values(host.size(), 60, 0.02f);
  adamw_options options;
  cuda::device_parameters device(host);
  // The optimizer step's one pass (clipping, the update, the compute copy and its BF16 copy
  // fused) from the same state: bit-identical to the separate passes.
  cuda::device_parameters fused(host);
  cuda::device_buffer<std::uint16_t> weights16(host.size());
  for (long step = 0; step < 3; ++step) {
    CAPTURE(step);
    host.grad = random_values(host.size(), 61 + std::uint32_t(step), 0.5f);
    device.grad.upload(host.grad);
    fused.grad.upload(host.grad);
    const std::vector<float> unclipped = host.grad;
    const double norm = gradient_norm(host);
    const double norm_d = cuda::gradient_norm(device, nullptr);
    CHECK(std::fabs(norm_d - norm) <= 1e-12 * norm);
    // Clip to a third of the norm, both sides from the CPU's norm: the same factor, so the same bits.
    clip_gradients(host, norm, norm / 3);
    cuda::clip_gradients(device, norm, norm / 3, nullptr);
    synchronize();
    expect_same_bits("clipped gradients", device.grad.to_host(), host.grad);
    const float lr = 1e-3f;
    adamw_update(host, options, lr, step);
    cuda::adamw_update(device, options, lr, step, nullptr);
    host.refresh_compute(storage::bf16);
    device.refresh_compute(storage::bf16, nullptr);
    synchronize();
    expect_close("adam_m", device.adam_m.to_host(), host.adam_m, optimizer);
    expect_close("adam_v", device.adam_v.to_host(), host.adam_v, optimizer);
    expect_close("master", device.master.to_host(), host.master, optimizer);
    // The compute copy of the device's own master weights, rounded as the CPU rounds.
    std::vector<float> rounded = device.master.to_host();
    round_to_bf16(rounded.data(), rounded.size());
    expect_same_bits("compute", device.compute.to_host(), rounded);

    cuda::adamw_fusion fusion{clip_factor(norm, norm / 3), true, storage::bf16, weights16.data()};
    CHECK(fusion.clip_factor.has_value());
    cuda::adamw_update(fused, options, lr, step, nullptr, fusion);
    cuda::device_buffer<std::uint16_t> separate16(host.size());
    cuda::to_bf16(separate16.data(), device.compute.data(), device.size(), nullptr);
    synchronize();
    expect_same_bits("fused adam_m", fused.adam_m.to_host(), device.adam_m.to_host());
    expect_same_bits("fused adam_v", fused.adam_v.to_host(), device.adam_v.to_host());
    expect_same_bits("fused master", fused.master.to_host(), device.master.to_host());
    expect_same_bits("fused compute", fused.compute.to_host(), device.compute.to_host());
    CHECK(weights16.to_host() == separate16.to_host());
    expect_same_bits("gradients left unclipped", fused.grad.to_host(), unclipped);
  }
  SUBCASE("without clipping, and an fp32 compute copy") {
    cuda::device_parameters plain(host), fused_plain(host);
    host.grad = random_values(host.size(), 70, 0.5f);
    plain.grad.upload(host.grad);
    fused_plain.grad.upload(host.grad);
    CHECK_FALSE(clip_factor(gradient_norm(host), 0.0).has_value());
    cuda::adamw_update(plain, options, 1e-3f, 3, nullptr);
    plain.refresh_compute(storage::fp32, nullptr);
    cuda::adamw_update(fused_plain, options, 1e-3f, 3, nullptr,
                       cuda::adamw_fusion{std::nullopt, true, storage::fp32, nullptr});
    synchronize();
    expect_same_bits("fused master (no clipping)", fused_plain.master.to_host(), plain.master.to_host());
    expect_same_bits("fused compute (fp32)", fused_plain.compute.to_host(), plain.compute.to_host());
  }
  SUBCASE("the BF16 copy alone, as bf16 and fp8 runs update") {
    // device_model::weights_fusion in bf16 and fp8 runs: the BF16 copy written, the float compute
    // copy left as it was (weights_updated widens the few tensors read as floats afterwards).
    cuda::device_parameters separate(host), only16(host);
    const std::vector<float> compute_before = only16.compute.to_host();
    host.grad = random_values(host.size(), 71, 0.5f);
    // NaN gradients of both signs make NaN weights, whose BF16 copy must hold the canonical NaN
    // (0x7FC0) as to_bf16 writes it, not the hardware conversion's 0x7FFF.
    const std::size_t nan_positions[] = {5, host.size() - 3};
    host.grad[nan_positions[0]] = std::numeric_limits<float>::quiet_NaN();
    host.grad[nan_positions[1]] = -std::numeric_limits<float>::quiet_NaN();
    separate.grad.upload(host.grad);
    only16.grad.upload(host.grad);
    cuda::adamw_update(separate, options, 1e-3f, 3, nullptr);
    separate.refresh_compute(storage::bf16, nullptr);
    cuda::device_buffer<std::uint16_t> expected16(host.size()), written16(host.size());
    cuda::to_bf16(expected16.data(), separate.compute.data(), separate.size(), nullptr);
    cuda::adamw_update(only16, options, 1e-3f, 3, nullptr,
                       cuda::adamw_fusion{std::nullopt, false, storage::bf16, written16.data()});
    synchronize();
    expect_same_bits("master (BF16 copy only)", only16.master.to_host(), separate.master.to_host());
    const std::vector<std::uint16_t> written = written16.to_host();
    CHECK(written == expected16.to_host());
    for (const std::size_t i : nan_positions) {
      CAPTURE(i);
      CHECK(written[i] == fp8::bf16_format::canonical_nan);
    }
    expect_same_bits("compute copy left as it was", only16.compute.to_host(), compute_before);
  }
  SUBCASE("a round trip through the host keeps every buffer") {
    parameter_set copy(host.specs());
    device.download(copy);
    device.upload(copy);
    parameter_set again(host.specs());
    device.download(again);
    expect_same_bits("master round trip", again.master, copy.master);
    expect_same_bits("adam_v round trip", again.adam_v, copy.adam_v);
    parameter_set other({{"w1", {40, 34}, true}});
    CHECK_THROWS_AS(device.download(other), fp8::invalid_argument);
    // A checkpoint's download (master weights and moments) leaves the host's other buffers as they were.
    parameter_set partial(host.specs());
    std::fill(partial.compute.begin(), partial.compute.end(), 7.0f);
    std::fill(partial.grad.begin(), partial.grad.end(), -7.0f);
    device.download(partial, {true, false, false, true});
    expect_same_bits("master downloaded", partial.master, copy.master);
    expect_same_bits("adam_m downloaded", partial.adam_m, copy.adam_m);
    expect_same_bits("adam_v downloaded", partial.adam_v, copy.adam_v);
    expect_same_bits("compute left", partial.compute, std::vector<float>(copy.size(), 7.0f));
    expect_same_bits("grad left", partial.grad, std::vector<float>(copy.size(), -7.0f));
  }
}

TEST_CASE("an allocation the device cannot serve names the request, the buffers held and the device") {
  const cuda::device_buffer<float> held(std::size_t(1) << 20);  // 4 MiB held by this process
  const std::size_t before = cuda::buffer_bytes_held().load();
  CHECK(before >= held.size() * sizeof(float));
  try {
    // Far more than any GPU has: cudaMalloc fails with cudaErrorMemoryAllocation.
    const cuda::device_buffer<float> huge(std::size_t(1) << 50);
    FAIL("a 4 PiB allocation succeeded");
  } catch (const fp8::cuda_error& e) {
    CHECK(e.status() == cudaErrorMemoryAllocation);
    const std::string message = e.what();
    CAPTURE(message);
    const std::string reason =
        "4194304.00 GiB asked while the trainer's buffers hold " + cuda::binary_size(before);
    CHECK(message.find(reason) != std::string::npos);
    CHECK(message.find(" free of ") != std::string::npos);
  }
  CHECK(cuda::buffer_bytes_held().load() == before);  // the failed buffer holds nothing
  CHECK(cudaGetLastError() == cudaSuccess);           // and left no error behind
}

// The argument checks of the CUDA layers' launchers: bad shapes, null buffers and FP8 attention
// products are refused with fp8::invalid_argument naming the function and the problem, before any
// CUDA call, so these run without a GPU. Empty work is a no-op that also needs no device.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include <fp8/error.hpp>

#include "cuda/attention.hpp"
#include "cuda/batched_gemm.hpp"
#include "cuda/cross_entropy.hpp"
#include "cuda/embedding.hpp"
#include "cuda/gelu.hpp"
#include "cuda/residual.hpp"
#include "cuda/rmsnorm.hpp"
#include "cuda/rope.hpp"
#include "cuda/storage.hpp"
#include "cuda/swiglu.hpp"

using namespace trainer;

namespace {
// Stand-ins for device pointers: never dereferenced, because every call below fails its checks first.
float placeholder[4];
std::int32_t placeholder_tokens[4];
float* const some = placeholder;
std::uint16_t placeholder_bf16[4];
std::uint16_t* const bf16 = placeholder_bf16;  // raw __nv_bfloat16 bits
const std::int32_t* const tokens = placeholder_tokens;
double placeholder_double[1];
double* const some_double = placeholder_double;

// Runs `call`, which must throw fp8::invalid_argument whose message contains `expected`.
template <class Call>
void expect_refusal(Call&& call, const std::string& expected) {
  try {
    call();
    FAIL("no exception; expected one mentioning: " << expected);
  } catch (const fp8::invalid_argument& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(expected) != std::string::npos);
  }
}
}  // namespace

TEST_CASE("the CUDA layers refuse bad shapes and null buffers before touching the device") {
  expect_refusal([] { cuda::embedding_forward(some, some, tokens, -1, 4, 256, nullptr); },
                 "trainer::cuda::embedding_forward: needs n >= 0");
  expect_refusal([] { cuda::embedding_backward(some, some, tokens, 4, 4, 0, nullptr); }, "v > 0");
  expect_refusal([] { cuda::embedding_forward(nullptr, some, tokens, 2, 2, 256, nullptr); },
                 "the [N, C] buffer is null");
  expect_refusal([] { cuda::rmsnorm_forward(some, some, some, some, 3, 0, storage::fp32, nullptr); },
                 "trainer::cuda::rmsnorm_forward: needs n >= 0 rows and c > 0 channels");
  expect_refusal(
      [] {
        cuda::rmsnorm_backward(some, some, some, some, some, some, 3, 4, storage::bf16, nullptr, nullptr);
      },
      "workspace");
  expect_refusal([] { cuda::swiglu_backward(some, nullptr, some, 2, 2, storage::fp32, nullptr); },
                 "the [N, F] buffer");
  // RMSNorm's BF16-output form checks as the float form, and names itself.
  expect_refusal(
      [] { cuda::rmsnorm_forward(bf16, some, some, some, 3, 0, nullptr); },
      "trainer::cuda::rmsnorm_forward (BF16): needs n >= 0 rows and c > 0 channels (got n 3, c 0)");
  expect_refusal([] { cuda::rmsnorm_forward(bf16, some, some, some, -2, 4, nullptr); }, "got n -2, c 4");
  expect_refusal(
      [] { cuda::rmsnorm_forward(static_cast<std::uint16_t*>(nullptr), some, some, some, 1, 4, nullptr); },
      "trainer::cuda::rmsnorm_forward (BF16): out is null");
  expect_refusal([] { cuda::rmsnorm_forward(bf16, nullptr, some, some, 1, 4, nullptr); },
                 "trainer::cuda::rmsnorm_forward (BF16): rstd is null");
  expect_refusal([] { cuda::rmsnorm_forward(bf16, some, nullptr, some, 1, 4, nullptr); }, "inp is null");
  expect_refusal([] { cuda::rmsnorm_forward(bf16, some, some, nullptr, 1, 4, nullptr); }, "weight is null");
  // The FP8 forms (codes a linear layer takes from its producer) check their codes, scale, format
  // and shape as well, and name themselves.
  std::uint8_t placeholder_codes[8];
  const cuda::fp8_output codes{placeholder_codes, some, some, fp8::fp8_format::e4m3, 1, 4};
  // The same target shaped as the layer's copy of another call.
  const auto shaped = [](cuda::fp8_output out, std::int64_t rows, std::int64_t cols) {
    out.rows = rows;
    out.cols = cols;
    return out;
  };
  cuda::fp8_output no_codes = codes, no_scale = codes, bad_format = codes;
  no_codes.codes = nullptr;
  no_scale.scale = nullptr;
  bad_format.format = fp8::fp8_format(7);
  expect_refusal([&] { cuda::rmsnorm_forward(no_codes, some, some, some, 1, 4, nullptr); },
                 "trainer::cuda::rmsnorm_forward (FP8 codes): out is null");
  expect_refusal([&] { cuda::rmsnorm_forward(no_scale, some, some, some, 1, 4, nullptr); },
                 "trainer::cuda::rmsnorm_forward (FP8 codes): the FP8 output's scale is null");
  expect_refusal([&] { cuda::rmsnorm_forward(bad_format, some, some, some, 1, 4, nullptr); },
                 "trainer::cuda::rmsnorm_forward (FP8 codes): unknown fp8_format value");
  expect_refusal([&] { cuda::rmsnorm_forward(codes, some, some, some, 3, 0, nullptr); },
                 "trainer::cuda::rmsnorm_forward (FP8 codes): needs n >= 0 rows and c > 0 channels");
  expect_refusal([&] { cuda::swiglu_forward(no_scale, bf16, 2, 2, nullptr); },
                 "trainer::cuda::swiglu_forward (FP8 codes): the FP8 output's scale is null");
  expect_refusal([&] { cuda::swiglu_forward(shaped(no_codes, 2, 2), bf16, 2, 2, nullptr); },
                 "the [N, F] buffer is null");
  expect_refusal([&] { cuda::swiglu_forward(codes, bf16, -1, 2, nullptr); },
                 "trainer::cuda::swiglu_forward (FP8 codes): needs n >= 0 and f >= 0 (got n -1, f 2)");
  expect_refusal([&] { cuda::swiglu_backward(bad_format, bf16, bf16, 2, 2, nullptr); },
                 "trainer::cuda::swiglu_backward (FP8 codes): unknown fp8_format value");
  expect_refusal([&] { cuda::swiglu_backward(shaped(no_codes, 2, 4), bf16, bf16, 2, 2, nullptr); },
                 "trainer::cuda::swiglu_backward (FP8 codes): the [N, 2F] buffer is null");
  expect_refusal([&] { cuda::swiglu_backward(shaped(codes, 2, 4), nullptr, bf16, 2, 2, nullptr); },
                 "the [N, F] buffer is null");
  expect_refusal([&] { cuda::to_fp8(no_codes, some, 4, nullptr); },
                 "trainer::cuda::to_fp8: out.codes is null");
  expect_refusal([&] { cuda::to_fp8(codes, nullptr, 4, nullptr); }, "trainer::cuda::to_fp8: in is null");
  expect_refusal([&] { cuda::to_fp8(no_scale, some, 4, nullptr); },
                 "trainer::cuda::to_fp8: the FP8 output's scale is null");
  expect_refusal([&] { cuda::to_fp8(bad_format, some, 4, nullptr); },
                 "trainer::cuda::to_fp8: unknown fp8_format value");
  // An unknown format is refused even where nothing would be written (it is a caller's bug either
  // way); a missing scale is not needed there.
  expect_refusal([&] { cuda::to_fp8(bad_format, some, 0, nullptr); },
                 "trainer::cuda::to_fp8: unknown fp8_format value");
  expect_refusal([&] { cuda::swiglu_forward(bad_format, bf16, 0, 2, nullptr); },
                 "trainer::cuda::swiglu_forward (FP8 codes): unknown fp8_format value");
  expect_refusal([&] { cuda::rmsnorm_forward(bad_format, some, some, some, 0, 4, nullptr); },
                 "trainer::cuda::rmsnorm_forward (FP8 codes): unknown fp8_format value");
  CHECK_NOTHROW(cuda::to_fp8(no_scale, some, 0, nullptr));
  // A launcher writes exactly the layer's copy: more would write past it, fewer would leave another
  // call's codes in it; nothing is launched.
  expect_refusal([&] { cuda::rmsnorm_forward(codes, some, some, some, 2, 2, nullptr); },
                 "trainer::cuda::rmsnorm_forward (FP8 codes): the FP8 output is a copy of [1, 4] codes, but "
                 "this writes 4 codes in rows of 2");
  expect_refusal([&] { cuda::rmsnorm_forward(codes, some, some, some, 2, 4, nullptr); },
                 "is a copy of [1, 4] codes, but this writes 8 codes in rows of 4");
  expect_refusal([&] { cuda::swiglu_forward(codes, bf16, 2, 2, nullptr); },
                 "trainer::cuda::swiglu_forward (FP8 codes): the FP8 output is a copy of [1, 4] codes, but "
                 "this writes 4 codes in rows of 2");
  expect_refusal([&] { cuda::swiglu_backward(shaped(codes, 2, 2), bf16, bf16, 2, 2, nullptr); },
                 "trainer::cuda::swiglu_backward (FP8 codes): the FP8 output is a copy of [2, 2] codes, but "
                 "this writes 8 codes in rows of 4");
  expect_refusal([&] { cuda::to_fp8(codes, some, 3, nullptr); },
                 "trainer::cuda::to_fp8: the FP8 output is a copy of [1, 4] codes, but this writes 3 codes");
  expect_refusal([&] { cuda::to_fp8(shaped(codes, -1, 4), some, 4, nullptr); }, "is a copy of [-1, 4] codes");
  // The BF16 forms check the same way, and name themselves.
  expect_refusal([] { cuda::swiglu_forward(bf16, nullptr, 2, 2, nullptr); },
                 "trainer::cuda::swiglu_forward (BF16): inp is null");
  expect_refusal([] { cuda::swiglu_forward(nullptr, bf16, 2, 2, nullptr); }, "the [N, F] buffer is null");
  expect_refusal([] { cuda::swiglu_forward(bf16, bf16, -1, 2, nullptr); },
                 "trainer::cuda::swiglu_forward (BF16): needs n >= 0 and f >= 0 (got n -1, f 2)");
  expect_refusal([] { cuda::swiglu_backward(nullptr, bf16, bf16, 2, 2, nullptr); },
                 "trainer::cuda::swiglu_backward (BF16): the [N, 2F] buffer is null");
  expect_refusal([] { cuda::swiglu_backward(bf16, nullptr, bf16, 2, 2, nullptr); },
                 "the [N, F] buffer is null");
  expect_refusal([] { cuda::swiglu_backward(bf16, bf16, nullptr, 2, 2, nullptr); }, "inp is null");
  expect_refusal([] { cuda::swiglu_backward(bf16, bf16, bf16, 3, -4, nullptr); }, "needs n >= 0 and f >= 0");
  expect_refusal([] { cuda::cross_entropy_backward(some, some, tokens, 0, 256, storage::fp32, nullptr); },
                 "needs n > 0 tokens");
  expect_refusal([] { cuda::cross_entropy_forward(some, some, some, tokens, 2, 2, nullptr, nullptr); },
                 "mean_scratch");
  // A null buffer is named as the caller's argument (the backward pass has probs, not logits).
  expect_refusal([] { cuda::cross_entropy_backward(some, nullptr, tokens, 2, 2, storage::fp32, nullptr); },
                 "trainer::cuda::cross_entropy_backward: probs is null");
  expect_refusal([] { cuda::cross_entropy_backward(nullptr, some, tokens, 2, 2, storage::fp32, nullptr); },
                 "dlogits is null");
  expect_refusal(
      [] {
        cuda::cross_entropy_forward_backward(some, nullptr, some, tokens, 2, 2, storage::fp32, some_double,
                                             nullptr);
      },
      "trainer::cuda::cross_entropy_forward_backward: dlogits is null");
  expect_refusal([] { cuda::cross_entropy_forward(nullptr, some, some, tokens, 2, 2, some_double, nullptr); },
                 "losses is null");
  expect_refusal([] { cuda::store(storage::bf16, nullptr, 5, nullptr); }, "out is null");
  expect_refusal([] { cuda::gelu_backward(some, some, nullptr, 3, storage::bf16, nullptr); },
                 "trainer::cuda::gelu_backward: inp is null");
  expect_refusal([] { cuda::to_bf16(nullptr, some, 3, nullptr); }, "trainer::cuda::to_bf16: out is null");
  // RMSNorm's backward from a BF16 dout checks as the float form, and names itself.
  expect_refusal(
      [] {
        cuda::rmsnorm_backward(some, some, static_cast<const std::uint16_t*>(nullptr), some, some, some, 3, 4,
                               storage::bf16, some, nullptr);
      },
      "trainer::cuda::rmsnorm_backward (BF16 dout): dout is null");
  expect_refusal(
      [] { cuda::rmsnorm_backward(some, some, bf16, some, some, some, 3, 0, storage::bf16, some, nullptr); },
      "trainer::cuda::rmsnorm_backward (BF16 dout): needs n >= 0 rows and c > 0 channels");
  // The residual add with a BF16 branch checks as the float form, and names itself.
  expect_refusal(
      [] {
        cuda::residual_forward(some, some, static_cast<const std::uint16_t*>(nullptr), 3, storage::bf16,
                               nullptr);
      },
      "trainer::cuda::residual_forward (BF16 b): b is null");
  expect_refusal([] { cuda::residual_forward(nullptr, some, bf16, 3, storage::bf16, nullptr); },
                 "out is null");
  expect_refusal([] { cuda::residual_forward(some, nullptr, some, 3, storage::fp32, nullptr); },
                 "trainer::cuda::residual_forward: a is null");
}

TEST_CASE("attention's batched products refuse FP8 and mismatched contractions") {
  cuda::batched_operand a{some, 4, 8, false, 32}, b{some, 5, 8, false, 40}, c{some, 5, 7, false, 35};
  expect_refusal([&] { cuda::batched_gemm(nullptr, gemm_mode::fp8, a, b, some, 20, 1, nullptr); }, "not fp8");
  expect_refusal([&] { cuda::batched_gemm(nullptr, gemm_mode::fake_fp8, a, b, some, 20, 1, nullptr); },
                 "not fake");
  expect_refusal([&] { cuda::batched_gemm(nullptr, gemm_mode::bf16, a, c, some, 20, 1, nullptr); },
                 "A reads [4, 8] but B reads [5, 7]");
  cuda::batched_operand transposed = c;
  transposed.transposed = true;  // reads [7, 5]
  expect_refusal([&] { cuda::batched_gemm(nullptr, gemm_mode::fp32, a, transposed, some, 20, 1, nullptr); },
                 "B reads [7, 5]");
  cuda::batched_gemm(nullptr, gemm_mode::fp32, a, b, some, 20, 0, nullptr);  // an empty batch does nothing
}

TEST_CASE("an attention workspace refuses a shape whose channels do not split into heads") {
  expect_refusal(
      [] {
        cuda::attention_workspace workspace(attention_shape{2, 8, 48, 0});
      },
      "trainer::cuda::attention_workspace: needs positive B, T, H, C");
  expect_refusal(
      [] {
        cuda::attention_workspace workspace(attention_shape{2, 8, 50, 4});
      },
      "C a multiple of H");
}

TEST_CASE("the fused attention's workspace is empty: its tensors are the model's BF16 buffers") {
  const cuda::attention_workspace fused(attention_shape{2, 8, 48, 4}, attention_kernel::fused);
  CHECK(fused.qkv_bf16.size() == 0);
  CHECK(fused.square_bf16.size() == 0);
  CHECK(fused.heads.size() == 0);
  CHECK(fused.heads_bf16.size() == 0);
  CHECK(fused.dqkv.size() == 0);
  CHECK(fused.square.size() == 0);
}

TEST_CASE(
    "the fused attention refuses bad shapes, a RoPE table of another shape, null buffers and no graphs") {
  // T 8, D 12 and no device memory: the checks read the table's shape only.
  const cuda::device_rope_table rope(rope_table{8, 12, {}, {}});
  const attention_shape shape{2, 8, 48, 4};
  const char* forward = "trainer::cuda::fused_attention_forward: ";
  const char* backward = "trainer::cuda::fused_attention_backward: ";
  expect_refusal(
      [&] {
        cuda::fused_attention_forward(bf16, some, bf16, rope, attention_shape{2, 8, 50, 4}, nullptr, nullptr);
      },
      std::string(forward) + "needs positive B, T, H, C with C a multiple of H");
  expect_refusal(
      [&] {
        cuda::fused_attention_forward(bf16, some, bf16, rope, attention_shape{2, 16, 48, 4}, nullptr,
                                      nullptr);
      },
      "the RoPE table is for T 8, D 12 but the shape has T 16, D 12");
  expect_refusal([&] { cuda::fused_attention_forward(nullptr, some, bf16, rope, shape, nullptr, nullptr); },
                 std::string(forward) + "out16 is null");
  expect_refusal([&] { cuda::fused_attention_forward(bf16, nullptr, bf16, rope, shape, nullptr, nullptr); },
                 std::string(forward) + "stats is null");
  expect_refusal([&] { cuda::fused_attention_forward(bf16, some, nullptr, rope, shape, nullptr, nullptr); },
                 std::string(forward) + "qkv16 is null");
  expect_refusal([&] { cuda::fused_attention_forward(bf16, some, bf16, rope, shape, nullptr, nullptr); },
                 std::string(forward) + "needs the cuDNN graphs (got null)");

  expect_refusal(
      [&] {
        cuda::fused_attention_backward(bf16, bf16, bf16, bf16, some, rope, attention_shape{0, 8, 48, 4},
                                       nullptr, nullptr);
      },
      std::string(backward) + "needs positive B, T, H, C");
  expect_refusal(
      [&] {
        cuda::fused_attention_backward(bf16, bf16, bf16, bf16, some, rope, attention_shape{2, 8, 96, 4},
                                       nullptr, nullptr);
      },
      "the RoPE table is for T 8, D 12 but the shape has T 8, D 24");
  expect_refusal(
      [&] { cuda::fused_attention_backward(nullptr, bf16, bf16, bf16, some, rope, shape, nullptr, nullptr); },
      std::string(backward) + "dinp16 is null");
  expect_refusal(
      [&] { cuda::fused_attention_backward(bf16, nullptr, bf16, bf16, some, rope, shape, nullptr, nullptr); },
      std::string(backward) + "dout16 is null");
  expect_refusal(
      [&] { cuda::fused_attention_backward(bf16, bf16, nullptr, bf16, some, rope, shape, nullptr, nullptr); },
      std::string(backward) + "qkv16 is null");
  expect_refusal(
      [&] { cuda::fused_attention_backward(bf16, bf16, bf16, nullptr, some, rope, shape, nullptr, nullptr); },
      std::string(backward) + "out16 is null");
  expect_refusal(
      [&] { cuda::fused_attention_backward(bf16, bf16, bf16, bf16, nullptr, rope, shape, nullptr, nullptr); },
      std::string(backward) + "stats is null");
  expect_refusal(
      [&] { cuda::fused_attention_backward(bf16, bf16, bf16, bf16, some, rope, shape, nullptr, nullptr); },
      std::string(backward) + "needs the cuDNN graphs (got null)");
}

TEST_CASE("empty work needs no device") {
  cuda::embedding_forward(nullptr, some, nullptr, 0, 4, 256, nullptr);
  cuda::rmsnorm_forward(nullptr, nullptr, nullptr, some, 0, 4, storage::bf16, nullptr);
  cuda::rmsnorm_forward(static_cast<std::uint16_t*>(nullptr), nullptr, nullptr, some, 0, 4, nullptr);
  cuda::swiglu_forward(nullptr, nullptr, 0, 8, storage::bf16, nullptr);
  cuda::swiglu_forward(static_cast<std::uint16_t*>(nullptr), nullptr, 4, 0, nullptr);
  cuda::swiglu_backward(static_cast<std::uint16_t*>(nullptr), nullptr, nullptr, 0, 8, nullptr);
  cuda::round_to_bf16(nullptr, 0, nullptr);
  cuda::residual_forward(nullptr, nullptr, static_cast<const std::uint16_t*>(nullptr), 0, storage::bf16,
                         nullptr);
  CHECK(true);  // reaching here without a CUDA error is the check
}

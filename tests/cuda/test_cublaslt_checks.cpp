// The cuBLASLt wrapper's checks, run without a GPU: every rejected problem gets the right status and
// a message naming the call, the status, the shapes, the types and the cause; valid problems pass.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include <fp8/cublaslt.hpp>
#include <fp8/scaling/granularity.hpp>

namespace lt = fp8::cublaslt;

namespace {

// Fake device addresses: the checks look at their values, never through them.
const void* address(std::uintptr_t value) { return reinterpret_cast<const void*>(value); }
void* mutable_address(std::uintptr_t value) { return reinterpret_cast<void*>(value); }
const float* float_address(std::uintptr_t value) { return reinterpret_cast<const float*>(value); }

// cuBLASLt 13.1.0 loaded, compiled against the same headers.
constexpr std::size_t cublas_13_1 = 130100;
lt::device_info hopper() { return {1, 0, 9, 0, "NVIDIA H100 80GB HBM3", cublas_13_1, cublas_13_1}; }
lt::device_info ada() { return {1, 0, 8, 9, "NVIDIA L40S", cublas_13_1, cublas_13_1}; }
lt::device_info ampere() { return {1, 0, 8, 0, "NVIDIA A100-SXM4-80GB", cublas_13_1, cublas_13_1}; }
lt::device_info blackwell() { return {1, 0, 10, 0, "NVIDIA B200", cublas_13_1, cublas_13_1}; }
lt::device_info no_device() { return {}; }

// A valid FP8 product: D[256, 128] (bf16) = A^T (e4m3) · B (e4m3), k = 512, tensorwise scales.
lt::gemm_problem valid_fp8() {
  lt::gemm_problem p{};
  p.m = 256;
  p.n = 128;
  p.k = 512;
  p.a = {address(0x10000), lt::data_type::e4m3, 512, lt::scale_mode::tensorwise, float_address(0x90000)};
  p.b = {address(0x20000), lt::data_type::e4m3, 512, lt::scale_mode::tensorwise, float_address(0x90010)};
  p.d = {mutable_address(0x30000), lt::data_type::bf16, 256, nullptr, nullptr};
  return p;
}

// A BF16 product in the layout of a weight gradient with BGRADB (B transposed, the layout
// cuBLASLt's BGRADB needs), into FP32.
lt::gemm_problem bf16_weight_gradient() {
  lt::gemm_problem p = valid_fp8();
  p.op_a = lt::operation::none;
  p.op_b = lt::operation::transpose;
  p.a = {address(0x10000), lt::data_type::bf16, 256};
  p.b = {address(0x20000), lt::data_type::bf16, 128};
  p.d.type = lt::data_type::fp32;
  p.options.purpose = lt::gemm_purpose::gradient;
  return p;
}

lt::gemm_problem with_scales(lt::scale_mode a, lt::scale_mode b) {
  lt::gemm_problem p = valid_fp8();
  p.a.scaling = a;
  p.b.scaling = b;
  return p;
}

// The rejection of `p` on `device`, which must exist.
lt::rejection rejected(const lt::gemm_problem& p, const lt::device_info& device) {
  const auto why = lt::find_rejection(p, device);
  REQUIRE_MESSAGE(why.has_value(), "expected a rejection for " << lt::describe(p));
  return *why;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("valid FP8, BF16 and block-scaled problems pass the checks") {
  CHECK_FALSE(lt::find_rejection(valid_fp8(), hopper()).has_value());
  CHECK_FALSE(lt::find_rejection(valid_fp8(), ada()).has_value());

  lt::gemm_problem mixed = valid_fp8();
  mixed.a.type = lt::data_type::e5m2;  // gradients in E5M2 times E4M3: allowed both ways
  CHECK_FALSE(lt::find_rejection(mixed, hopper()).has_value());
  mixed.d.type = lt::data_type::e5m2;
  CHECK_FALSE(lt::find_rejection(mixed, hopper()).has_value());

  for (const auto& pair : {std::pair{lt::scale_mode::row_wise, lt::scale_mode::row_wise},
                           std::pair{lt::scale_mode::block_1x128, lt::scale_mode::block_1x128},
                           std::pair{lt::scale_mode::block_1x128, lt::scale_mode::block_128x128},
                           std::pair{lt::scale_mode::block_128x128, lt::scale_mode::block_1x128}}) {
    CAPTURE(lt::name(pair.first));
    CAPTURE(lt::name(pair.second));
    CHECK_FALSE(lt::find_rejection(with_scales(pair.first, pair.second), hopper()).has_value());
  }

  lt::gemm_problem bf16{};
  bf16.m = 100;  // non-FP8 products have no multiple-of-16 rule and take any layout
  bf16.n = 30;
  bf16.k = 7;
  bf16.op_a = lt::operation::none;
  bf16.a = {address(0x10002), lt::data_type::bf16, 0};
  bf16.b = {address(0x20002), lt::data_type::bf16, 0};
  bf16.d = {mutable_address(0x30000), lt::data_type::fp32, 0};
  CHECK_FALSE(lt::find_rejection(bf16, ampere()).has_value());

  lt::gemm_problem fp8_output = valid_fp8();
  fp8_output.d.type = lt::data_type::e4m3;
  fp8_output.d.scale = float_address(0x90020);
  fp8_output.d.amax = reinterpret_cast<float*>(0x90030);
  fp8_output.options.epilogue_kind = lt::epilogue::gelu_bias;
  fp8_output.options.bias = address(0x40000);
  fp8_output.options.bias_type = lt::data_type::fp16;  // FP8 outputs take a bf16 or fp16 bias
  CHECK_FALSE(lt::find_rejection(fp8_output, hopper()).has_value());
}

TEST_CASE("no CUDA device") {
  const auto why = rejected(valid_fp8(), no_device());
  CHECK(why.kind == lt::rejection_kind::no_device);
  CHECK(contains(why.cause, "no CUDA device"));
  try {
    lt::validate(valid_fp8(), no_device());
    FAIL("validate accepted a problem without a device");
  } catch (const fp8::cuda_error& e) {
    CHECK(e.status() == cudaErrorNoDevice);
    CHECK(contains(e.what(), "cudaErrorNoDevice"));
    CHECK(contains(e.what(), "no CUDA device"));
    CHECK(contains(e.what(), "fp8::cublaslt::gemm"));
  }
}

TEST_CASE("shape rules are cuBLASLt's: K a multiple of 16, 16-byte leading dimensions; M and N free") {
  // M and N need not be multiples of 16 (cuBLASLt has no such rule; a decode step has 1 token).
  for (const auto& dims :
       {std::array<std::int64_t, 3>{250, 128, 512}, std::array<std::int64_t, 3>{256, 1, 512},
        std::array<std::int64_t, 3>{256, 15, 512}, std::array<std::int64_t, 3>{1, 3, 16}}) {
    lt::gemm_problem p = valid_fp8();
    p.m = dims[0];
    p.n = dims[1];
    p.k = dims[2];
    p.a.ld = p.k;
    p.b.ld = p.k;
    p.d.ld = (p.m + 7) / 8 * 8;  // bf16 D: ldd in elements must be a multiple of 8 (16 bytes)
    CAPTURE(lt::describe(p));
    CHECK_FALSE(lt::find_rejection(p, hopper()).has_value());
  }
  lt::gemm_problem odd_k = valid_fp8();
  odd_k.k = 520;
  odd_k.a.ld = odd_k.b.ld = 520;
  auto why = rejected(odd_k, hopper());
  CHECK(why.kind == lt::rejection_kind::invalid_value);
  CHECK(contains(why.cause, "k = 520 is not a multiple of 16"));

  lt::gemm_problem padded_ld = valid_fp8();
  padded_ld.a.ld = 520;  // FP8: 520 bytes, not a multiple of 16
  why = rejected(padded_ld, hopper());
  CHECK(why.kind == lt::rejection_kind::invalid_value);
  CHECK(contains(why.cause, "lda spans 520 bytes"));

  lt::gemm_problem odd_ldd = valid_fp8();
  odd_ldd.m = 250;
  odd_ldd.d.ld = 250;  // bf16: 500 bytes
  CHECK(contains(rejected(odd_ldd, hopper()).cause, "ldd spans 500 bytes"));
  odd_ldd.d.type = lt::data_type::fp32;
  odd_ldd.d.ld = 252;  // fp32: 1008 bytes, a multiple of 16
  CHECK_FALSE(lt::find_rejection(odd_ldd, hopper()).has_value());
}

TEST_CASE(
    "a decode step of 1 to 15 tokens through linear(): any count with tensorwise and row-wise "
    "scales, multiples of 4 with block scales") {
  for (std::int64_t tokens = 1; tokens <= 15; ++tokens) {
    for (const auto& modes : {std::pair{lt::scale_mode::tensorwise, lt::scale_mode::tensorwise},
                              std::pair{lt::scale_mode::row_wise, lt::scale_mode::row_wise},
                              std::pair{lt::scale_mode::block_1x128, lt::scale_mode::block_128x128},
                              std::pair{lt::scale_mode::block_1x128, lt::scale_mode::block_1x128}}) {
      lt::linear_problem p{};
      p.m = tokens;
      p.n = 4096;
      p.k = 4096;
      p.x = {address(0x10000), lt::data_type::e4m3, 0, modes.first, float_address(0x90000)};
      p.w = {address(0x20000), lt::data_type::e4m3, 0, modes.second, float_address(0x91000)};
      p.y = {mutable_address(0x30000), lt::data_type::bf16, 0};
      CAPTURE(tokens);
      CAPTURE(lt::name(modes.first));
      const auto why = lt::find_rejection(lt::to_gemm(p), hopper());
      // cuBLASLt's 128-element and 128x128 block scale layouts need M and N (here the tokens) to be
      // multiples of 4; the other modes take any count.
      if (modes.first == lt::scale_mode::block_1x128 && tokens % 4 != 0) {
        REQUIRE(why.has_value());
        CHECK(why->kind == lt::rejection_kind::not_supported);
        CHECK(contains(why->cause, "need m and n multiples of 4"));
        CHECK(contains(why->cause, "n = " + std::to_string(tokens)));
      } else {
        CHECK_MESSAGE(!why.has_value(), (why ? why->cause : std::string()));
      }
    }
  }
  // M (the output features in linear()) is held to the same rule.
  lt::gemm_problem p = with_scales(lt::scale_mode::block_128x128, lt::scale_mode::block_1x128);
  p.m = 250;
  p.d.type = lt::data_type::fp32;
  p.d.ld = 252;
  CHECK(contains(rejected(p, hopper()).cause, "m = 250, n = 128"));
  p.m = 252;
  CHECK_FALSE(lt::find_rejection(p, hopper()).has_value());
  p.a.scaling = p.b.scaling = lt::scale_mode::row_wise;  // OUTER_VEC_32F has no such rule
  p.m = 250;
  CHECK_FALSE(lt::find_rejection(p, hopper()).has_value());
}

TEST_CASE("leading dimensions smaller than the matrix, null pointers, empty shapes") {
  lt::gemm_problem p = valid_fp8();
  p.b.ld = 256;  // B is stored k x n = 512 x 128: ldb must be >= 512
  CHECK(contains(rejected(p, hopper()).cause, "ldb >= 512"));
  p = valid_fp8();
  p.d.data = nullptr;
  CHECK(contains(rejected(p, hopper()).cause, "null"));
  p = valid_fp8();
  p.k = 0;
  CHECK(contains(rejected(p, hopper()).cause, "positive"));
}

TEST_CASE("misaligned pointers") {
  lt::gemm_problem p = valid_fp8();
  p.b.data = address(0x20008);
  auto why = rejected(p, hopper());
  CHECK(why.kind == lt::rejection_kind::invalid_value);
  CHECK(contains(why.cause, "misaligned pointers: B is at 0x20008"));

  p = with_scales(lt::scale_mode::row_wise, lt::scale_mode::row_wise);
  p.a.scale_inv = float_address(0x90004);  // a vector of scales needs 16 bytes
  why = rejected(p, hopper());
  CHECK(contains(why.cause, "misaligned pointer: the scale_inv of operand A"));
  CHECK_FALSE(lt::find_rejection(valid_fp8(), hopper()).has_value());
  // One tensorwise scale needs 16 bytes too: cuBLASLt refuses 4 at run time (measured on an H100).
  for (const std::uintptr_t offset : {4, 8, 12}) {
    CAPTURE(offset);
    p = valid_fp8();
    p.b.scale_inv = float_address(0x90010 + offset);
    why = rejected(p, hopper());
    CHECK(why.kind == lt::rejection_kind::invalid_value);
    CHECK(contains(why.cause, "the scale_inv of operand B is at 0x"));
    CHECK(contains(why.cause, "tensorwise scales need 16-byte alignment"));
  }

  p = valid_fp8();
  p.options.epilogue_kind = lt::epilogue::bias;
  p.options.bias = address(0x40002);
  CHECK(contains(rejected(p, hopper()).cause, "the bias is at 0x40002"));
}

TEST_CASE("E5M2xE5M2 and other type combinations cuBLASLt lacks") {
  lt::gemm_problem p = valid_fp8();
  p.a.type = lt::data_type::e5m2;
  p.b.type = lt::data_type::e5m2;
  auto why = rejected(p, hopper());
  CHECK(why.kind == lt::rejection_kind::not_supported);
  CHECK(contains(why.cause, "E5M2xE5M2"));

  p = valid_fp8();
  p.d.type = lt::data_type::e5m2;
  CHECK(contains(rejected(p, hopper()).cause, "E4M3xE4M3 products cannot write an E5M2 output"));

  p = valid_fp8();
  p.b.type = lt::data_type::bf16;
  CHECK(contains(rejected(p, hopper()).cause, "both operands in FP8"));

  lt::gemm_problem bf16 = valid_fp8();
  bf16.a = {address(0x10000), lt::data_type::bf16, 512};
  bf16.b = {address(0x20000), lt::data_type::bf16, 512};
  bf16.d.type = lt::data_type::fp16;
  CHECK(contains(rejected(bf16, hopper()).cause, "bf16 products write bf16 or fp32, not fp16"));
  bf16.d.type = lt::data_type::e4m3;
  CHECK(rejected(bf16, hopper()).kind == lt::rejection_kind::not_supported);

  bf16.d.type = lt::data_type::bf16;
  bf16.a.scale_inv = float_address(0x90000);
  CHECK(contains(rejected(bf16, hopper()).cause, "only FP8 operands take scales"));
}

TEST_CASE("a GPU older than sm_89") {
  const auto why = rejected(valid_fp8(), ampere());
  CHECK(why.kind == lt::rejection_kind::arch_mismatch);
  CHECK(contains(why.cause, "a GPU older than sm_89"));
  CHECK(contains(why.cause, "sm_80 (NVIDIA A100-SXM4-80GB)"));
}

TEST_CASE("FP8 needs the TN layout on Ada and Hopper, not on Blackwell") {
  lt::gemm_problem p = valid_fp8();
  p.op_a = lt::operation::none;
  p.a.ld = p.m;
  const auto why = rejected(p, hopper());
  CHECK(why.kind == lt::rejection_kind::not_supported);
  CHECK(contains(why.cause, "TN layout"));
  CHECK(contains(why.cause, "fp8::cublaslt::linear"));
  CHECK(lt::find_rejection(p, ada()).has_value());
  CHECK_FALSE(lt::find_rejection(p, blackwell()).has_value());
}

TEST_CASE("unsupported scale-mode pairs") {
  using lt::scale_mode;
  const std::pair<scale_mode, scale_mode> bad_pairs[] = {
      {scale_mode::block_128x128, scale_mode::block_128x128},
      {scale_mode::row_wise, scale_mode::tensorwise},
      {scale_mode::tensorwise, scale_mode::block_1x128},
      {scale_mode::row_wise, scale_mode::block_1x128},
      {scale_mode::block_128x128, scale_mode::row_wise}};
  for (const auto& pair : bad_pairs) {
    CAPTURE(lt::name(pair.first));
    CAPTURE(lt::name(pair.second));
    const auto why = rejected(with_scales(pair.first, pair.second), hopper());
    CHECK(why.kind == lt::rejection_kind::not_supported);
    CHECK(contains(why.cause, "an unsupported scale-mode pair"));
  }
  CHECK(contains(rejected(with_scales(scale_mode::block_128x128, scale_mode::block_128x128), hopper()).cause,
                 "2D x 2D"));

  // The modes exist on Hopper only.
  for (const auto& device : {ada(), blackwell()}) {
    CAPTURE(device.name);
    const auto why = rejected(with_scales(scale_mode::row_wise, scale_mode::row_wise), device);
    CHECK(why.kind == lt::rejection_kind::not_supported);
    CHECK(contains(why.cause, "only on Hopper"));
  }

  lt::gemm_problem p = with_scales(scale_mode::row_wise, scale_mode::row_wise);
  p.b.scale_inv = nullptr;
  CHECK(contains(rejected(p, hopper()).cause, "scale_inv pointer is null"));

  p = with_scales(scale_mode::block_1x128, scale_mode::block_128x128);
  p.options.fast_accum = lt::fast_accumulation::on;
  CHECK(contains(rejected(p, hopper()).cause, "fast accumulation must be off with block scaling"));

  p = with_scales(scale_mode::row_wise, scale_mode::row_wise);
  p.d.type = lt::data_type::e4m3;
  CHECK(contains(rejected(p, hopper()).cause, "bf16, fp16 or fp32 outputs"));

  for (const auto kind :
       {lt::epilogue::gelu, lt::epilogue::gelu_aux, lt::epilogue::dgelu, lt::epilogue::bias_gradient_b}) {
    p = with_scales(scale_mode::row_wise, scale_mode::row_wise);
    p.options.epilogue_kind = kind;
    CAPTURE(lt::name(kind));
    CHECK(contains(rejected(p, hopper()).cause, "is available with tensorwise scales only"));
  }
}

TEST_CASE("D scale and amax need an FP8 output; epilogues need a matching bias") {
  lt::gemm_problem p = valid_fp8();
  p.d.amax = reinterpret_cast<float*>(0x90030);
  auto why = rejected(p, hopper());
  CHECK(why.kind == lt::rejection_kind::invalid_value);
  CHECK(contains(why.cause, "amax output need an FP8 output; D is bf16"));

  p = valid_fp8();
  p.options.epilogue_kind = lt::epilogue::bias;
  CHECK(contains(rejected(p, hopper()).cause, "needs a bias pointer"));

  p.options.bias = address(0x40000);
  p.options.bias_type = lt::data_type::fp16;  // bf16 output: bf16 bias
  CHECK(contains(rejected(p, hopper()).cause, "a fp16 bias does not go with a bf16 output (use bf16)"));

  p = valid_fp8();
  p.options.bias = address(0x40000);
  CHECK(contains(rejected(p, hopper()).cause, "adds no bias"));

  p = valid_fp8();
  p.d.type = lt::data_type::fp32;  // FP8 into fp32 takes a bf16 bias
  CHECK(lt::default_bias_type(p) == lt::data_type::bf16);
  p.d.type = lt::data_type::fp16;
  CHECK(lt::default_bias_type(p) == lt::data_type::fp16);
}

TEST_CASE("a bias gradient has C's type: FP32 beside an FP32 output, not bf16") {
  // cublasLt.h: "Bias gradient vector elements are the same type as the output elements (Ctype)";
  // the bf16 exception of FP8 products into FP32 is for a bias that is read. DGELU_BGRAD on an FP8
  // product (the type rule only: no GPU run has taken that epilogue with FP8 operands yet), BGRADB
  // on a BF16 one (cuBLASLt has no FP8 kernel with BGRADB).
  for (const lt::epilogue kind : {lt::epilogue::bias_gradient_b, lt::epilogue::dgelu_bias_gradient}) {
    CAPTURE(lt::name(kind));
    lt::gemm_problem p = kind == lt::epilogue::bias_gradient_b ? bf16_weight_gradient() : valid_fp8();
    p.d.type = lt::data_type::fp32;
    p.options.purpose = lt::gemm_purpose::gradient;
    p.options.bias = address(0x40000);
    p.options.epilogue_kind = kind;
    p.options.aux = kind == lt::epilogue::dgelu_bias_gradient ? mutable_address(0x60000) : nullptr;
    p.options.bias_type.reset();
    CHECK(lt::bias_type_of(p) == lt::data_type::fp32);
    CHECK_FALSE(lt::find_rejection(p, hopper()).has_value());
    p.options.bias_type = lt::data_type::bf16;  // would be written as FP32 or refused by cuBLASLt
    const auto why = rejected(p, hopper());
    CHECK(why.kind == lt::rejection_kind::not_supported);
    CHECK(contains(why.cause, "a bf16 bias gradient does not go with a fp32 output (use fp32"));
  }
  lt::gemm_problem p = valid_fp8();
  p.d.type = lt::data_type::fp32;
  p.options.epilogue_kind = lt::epilogue::bias;  // a bias that is read stays bf16 beside an FP32 output
  p.options.bias = address(0x40000);
  CHECK(lt::bias_type_of(p) == lt::data_type::bf16);
}

TEST_CASE("bias_gradient_b: FP8 operands and an untransposed B are refused with cuBLASLt's rule") {
  // Both measured on an H100 with cuBLASLt 13.1: its heuristic returns nothing and its log says
  // "BGRAD{A,B} supports only F16, BF16, F32, or F64 data types" and "BGRADB only works with
  // transposed B".
  lt::gemm_problem p = valid_fp8();
  p.d.type = lt::data_type::fp32;
  p.options.purpose = lt::gemm_purpose::gradient;
  p.options.epilogue_kind = lt::epilogue::bias_gradient_b;
  p.options.bias = address(0x40000);
  auto why = rejected(p, hopper());
  CHECK(why.kind == lt::rejection_kind::not_supported);
  CHECK(contains(why.cause, "epilogue bias_gradient_b takes f16, bf16 or f32 operands, not FP8"));

  p = bf16_weight_gradient();
  p.options.epilogue_kind = lt::epilogue::bias_gradient_b;
  p.options.bias = address(0x40000);
  CHECK_FALSE(lt::find_rejection(p, hopper()).has_value());
  p.op_a = lt::operation::transpose;  // TN, as FP8 products need
  p.op_b = lt::operation::none;
  p.a.ld = p.b.ld = 512;
  why = rejected(p, hopper());
  CHECK(why.kind == lt::rejection_kind::not_supported);
  CHECK(contains(why.cause, "epilogue bias_gradient_b needs op_b = transpose"));
}

TEST_CASE("beside an FP8 output, C and the bias share one type") {
  lt::gemm_problem p = valid_fp8();
  p.d.type = lt::data_type::e4m3;
  p.options.epilogue_kind = lt::epilogue::bias;
  p.options.bias = address(0x40000);
  CHECK(lt::c_type_of(p) == lt::data_type::bf16);
  CHECK_FALSE(lt::find_rejection(p, hopper()).has_value());
  p.options.bias_type = lt::data_type::fp16;  // C follows the bias when unnamed
  CHECK(lt::c_type_of(p) == lt::data_type::fp16);
  CHECK_FALSE(lt::find_rejection(p, hopper()).has_value());
  p.c.type = lt::data_type::bf16;  // named apart from the bias: no kernel for it
  const auto why = rejected(p, hopper());
  CHECK(why.kind == lt::rejection_kind::not_supported);
  CHECK(contains(why.cause, "a fp16 bias beside a bf16 C"));
}

TEST_CASE("fast accumulation: on for forward, off for gradients and block scaling") {
  lt::gemm_problem p = valid_fp8();
  CHECK(lt::uses_fast_accumulation(p));
  p.options.purpose = lt::gemm_purpose::gradient;
  CHECK_FALSE(lt::uses_fast_accumulation(p));
  p.options.fast_accum = lt::fast_accumulation::on;
  CHECK(lt::uses_fast_accumulation(p));
  p = with_scales(lt::scale_mode::block_1x128, lt::scale_mode::block_1x128);
  CHECK_FALSE(lt::uses_fast_accumulation(p));
  p = with_scales(lt::scale_mode::row_wise, lt::scale_mode::row_wise);
  CHECK(lt::uses_fast_accumulation(p));
}

TEST_CASE("the row-major Y = X·Wᵀ maps onto cuBLASLt's TN form") {
  lt::linear_problem p{};
  p.m = 32;    // tokens
  p.n = 1024;  // output features
  p.k = 4096;  // input features
  p.x = {address(0x10000), lt::data_type::e4m3, 0, lt::scale_mode::row_wise, float_address(0x90000)};
  p.w = {address(0x20000), lt::data_type::e4m3, 0, lt::scale_mode::row_wise, float_address(0x91000)};
  p.y = {mutable_address(0x30000), lt::data_type::bf16, 0};
  const lt::gemm_problem g = lt::to_gemm(p);
  CHECK(g.m == 1024);
  CHECK(g.n == 32);
  CHECK(g.k == 4096);
  CHECK(g.op_a == lt::operation::transpose);
  CHECK(g.op_b == lt::operation::none);
  CHECK(g.a.data == p.w.data);  // W is cuBLAS's A: its row scales are the m-vector of OUTER_VEC_32F
  CHECK(g.a.scale_inv == p.w.scale_inv);
  CHECK(g.b.data == p.x.data);
  CHECK(g.a.ld == 4096);
  CHECK(g.b.ld == 4096);
  CHECK(g.d.ld == 1024);
  CHECK_FALSE(lt::find_rejection(g, hopper()).has_value());
}

TEST_CASE("scale tensor sizes agree with the CPU scaling layouts") {
  for (const std::int64_t rows : {16, 100, 128, 130, 4096}) {
    for (const std::int64_t k : {16, 128, 300, 4096}) {
      CAPTURE(rows);
      CAPTURE(k);
      CHECK(lt::scale_tensor_elements(lt::scale_mode::tensorwise, rows, k) ==
            std::int64_t(fp8::scale_count(fp8::granularity::per_tensor, rows, k)));
      CHECK(lt::scale_tensor_elements(lt::scale_mode::row_wise, rows, k) ==
            std::int64_t(fp8::scale_count(fp8::granularity::per_row, rows, k)));
      CHECK(lt::scale_tensor_elements(lt::scale_mode::block_1x128, rows, k) ==
            std::int64_t(fp8::scale_count(fp8::granularity::tile_1x128, rows, k)));
      CHECK(lt::scale_tensor_elements(lt::scale_mode::block_128x128, rows, k) ==
            std::int64_t(fp8::scale_count(fp8::granularity::block_128x128, rows, k)));
    }
  }
}

TEST_CASE("cublas_error names the call, the status, the shapes, the types and the cause") {
  lt::gemm_problem p = valid_fp8();
  p.a.type = lt::data_type::e5m2;
  p.b.type = lt::data_type::e5m2;
  try {
    lt::validate(p, hopper());
    FAIL("validate accepted E5M2xE5M2");
  } catch (const fp8::cublas_error& e) {
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(e.status() == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(contains(message, "fp8::cublaslt::gemm (checked before cublasLtMatmul)"));
    CHECK(contains(message, "CUBLAS_STATUS_NOT_SUPPORTED"));
    CHECK(contains(message, "D[m=256, n=128]"));
    CHECK(contains(message, "op_T(A)[256 x 512] (e5m2, ld 512, tensorwise)"));
    CHECK(contains(message, "op_N(B)[512 x 128] (e5m2"));
    CHECK(contains(message, "likely cause: E5M2xE5M2"));
    CHECK(contains(message, "CUBLASLT_LOG_LEVEL=5"));
  }
  // Every wrapper error is an fp8::error.
  CHECK_THROWS_AS(lt::validate(p, hopper()), fp8::error);

  CHECK(fp8::cublas_error::status_name(CUBLAS_STATUS_INVALID_VALUE) == "CUBLAS_STATUS_INVALID_VALUE");
  CHECK(fp8::cublas_error::status_name(CUBLAS_STATUS_ARCH_MISMATCH) == "CUBLAS_STATUS_ARCH_MISMATCH");
  CHECK(lt::status_of(lt::rejection_kind::arch_mismatch) == CUBLAS_STATUS_ARCH_MISMATCH);
  CHECK(lt::status_of(lt::rejection_kind::invalid_value) == CUBLAS_STATUS_INVALID_VALUE);
}

TEST_CASE("cuda_error names the call, the status and where") {
  try {
    fp8::detail::check_cuda(cudaErrorMemoryAllocation, "cudaMalloc(&p, 1 << 40)", "file.cpp", 12);
    FAIL("check_cuda accepted a failure");
  } catch (const fp8::cuda_error& e) {
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(e.status() == cudaErrorMemoryAllocation);
    CHECK(e.call() == "cudaMalloc(&p, 1 << 40)");
    CHECK(contains(message, "cudaErrorMemoryAllocation"));
    CHECK(contains(message, "at file.cpp:12"));
    CHECK(contains(message, "out of memory"));
  }
  CHECK_NOTHROW(fp8::detail::check_cuda(cudaSuccess, "cudaFree(nullptr)", "file.cpp", 13));
}

TEST_CASE("a handle needs a device: it reports a missing one, or binds to the current one") {
  const lt::device_info device = lt::query_device();
  if (device.device_count == 0) {
    try {
      lt::handle handle;
      FAIL("a handle was made without a device");
    } catch (const fp8::cuda_error& e) { CHECK(contains(e.what(), "no CUDA device")); }
  } else {
    lt::handle handle(1 << 20);
    CHECK(handle.device().major >= 1);
    CHECK(handle.workspace_bytes() == std::size_t(1) << 20);
    CHECK(handle.cached_plans() == 0);
  }
}

// --attention on the CPU: parsing, the refusals of combinations that cannot run, and how the GPU
// transformer resolves the choice (choose_attention) where no cuDNN graph has to be built. No device
// needed: where this machine has none, automatic must fall back to the materialised path and say why;
// where it has one, automatic must pick the fused path in bf16 mode.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <fp8/error.hpp>

#include "cuda/attention.hpp"
#include "cuda/cudnn_attention.hpp"
#include "option_checks.hpp"

using namespace trainer;
using trainer_tests::contains;
using trainer_tests::device_error;
using trainer_tests::parse;

namespace {

bool device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

const attention_shape shape{2, 64, 128, 4};  // D = 32, the default model's head dimension

// The default model (batch 16, context 128, d_model 128, 4 heads: D = 32), the tests' tiny model
// (D = 16) and layer shapes (D = 32 and 64, T = 80), the parity model (d_model 1024, 16 heads) and
// the speed shape (d_model 4096, 32 heads: D = 128, context 2048).
const attention_shape trainer_shapes[] = {{16, 128, 128, 4}, {4, 32, 32, 2},     {2, 128, 128, 4},
                                          {1, 80, 256, 4},   {8, 512, 1024, 16}, {2, 2048, 4096, 32}};

}  // namespace

TEST_CASE("--attention is auto by default and takes fused or materialized") {
  CHECK(parse({}).attention == attention_kernel::automatic);
  CHECK(parse({"--attention", "fused"}).attention == attention_kernel::fused);
  CHECK(parse({"--attention=materialized"}).attention == attention_kernel::materialized);
  CHECK(parse({"--attention", "auto"}).attention == attention_kernel::automatic);
  try {
    parse({"--attention", "flash"});
    FAIL("--attention flash was accepted");
  } catch (const std::invalid_argument& e) {
    INFO(e.what());
    CHECK(contains(e.what(), "--attention must be one of auto, fused, materialized; got 'flash'"));
  }
}

TEST_CASE("--attention combinations that cannot run are refused, naming the switch") {
  CHECK(device_error({"--device", "cuda", "--attention", "fused"}).empty());
  CHECK(device_error({"--device", "cuda", "--attention", "materialized", "--precision", "fp32"}).empty());
  CHECK(device_error({"--device", "cuda", "--precision", "fp32"}).empty());  // auto: materialized
  CHECK(device_error({"--attention", "materialized"}).empty());              // the CPU's own algorithm
  CHECK(contains(device_error({"--attention", "fused"}), "--attention fused needs --device cuda"));
  const std::string fp32 = device_error({"--device", "cuda", "--attention", "fused", "--precision", "fp32"});
  CHECK(contains(fp32, "--device cuda: --attention fused runs BF16 products"));
  CHECK(contains(device_error({"--model", "mlp", "--device", "cuda", "--attention", "fused"}),
                 "--attention applies to the transformer; the mlp model has no attention"));
  CHECK(device_error({"--model", "mlp", "--device", "cuda"}).empty());
}

TEST_CASE("materialized and fp32 attention resolve without building a cuDNN graph") {
  for (gemm_mode mode : {gemm_mode::fp32, gemm_mode::bf16}) {
    const cuda::attention_path asked = cuda::choose_attention(attention_kernel::materialized, mode, shape);
    CHECK(asked.kernel == attention_kernel::materialized);
    CHECK(asked.fused == nullptr);
    CHECK(asked.description == "materialized");
  }
  const cuda::attention_path fp32 =
      cuda::choose_attention(attention_kernel::automatic, gemm_mode::fp32, shape);
  CHECK(fp32.kernel == attention_kernel::materialized);
  CHECK(fp32.fused == nullptr);
  CHECK(fp32.description == "materialized (fp32 attention products)");
  CHECK_THROWS_WITH_AS(cuda::choose_attention(attention_kernel::fused, gemm_mode::fp32, shape),
                       doctest::Contains("the fused attention runs BF16 products; this run's attention "
                                         "products are fp32"),
                       fp8::invalid_argument);
}

TEST_CASE("automatic attention in bf16 mode takes the fused path exactly where it can be built") {
  const cuda::attention_path path =
      cuda::choose_attention(attention_kernel::automatic, gemm_mode::bf16, shape);
  INFO(path.description);
  if (device_present() && cuda::cudnn_attention_built()) {
    // A GPU with cuDNN: Hopper and newer have the fused kernels for D = 32.
    CHECK(path.kernel == attention_kernel::fused);
    REQUIRE(path.fused != nullptr);
    CHECK(path.fused->shape().context == shape.context);
    CHECK(contains(path.description, "fused (cuDNN "));
    // For the record of the first runs: the deterministic backward's workspace on this device (on
    // Hopper the frontend's dP variant needs about B * H * T * T * 2 bytes).
    MESSAGE("cuDNN attention workspace at B 2, H 4, T 64, D 32: " << path.fused->workspace_bytes()
                                                                  << " bytes");
  } else {
    CHECK(path.kernel == attention_kernel::materialized);
    CHECK(path.fused == nullptr);
    if (cuda::cudnn_attention_built()) {
      // No device: cuDNN's handle cannot be made, and the description carries cuDNN's reason.
      CHECK(contains(path.description, "materialized (no fused kernel: trainer::cuda::cudnn_attention: "));
    } else {
      CHECK(path.description == "materialized (this build has no cuDNN)");
    }
    // Asked for explicitly, the same failure is an error, not a fallback.
    CHECK_THROWS_AS(cuda::choose_attention(attention_kernel::fused, gemm_mode::bf16, shape), fp8::error);
  }
}

TEST_CASE("the cuDNN versions are named") {
  const std::string versions = cuda::cudnn_attention_versions();
  if (cuda::cudnn_attention_built()) {
    CHECK(contains(versions, "cuDNN 9."));
    CHECK(contains(versions, "(frontend 1."));
  } else {
    CHECK(versions == "no cuDNN in this build");
  }
}

// cuDNN from 9.2x loads all its sublibraries for a device description, the runtime-compiled engines'
// among them, and those link the driver library: like the next case, ctest runs this one with the
// toolkit's stub of it on the library path (trainer_test_attention_support); a plain run skips it.
TEST_CASE("cuDNN lowers the fused attention's graphs for an H100 at the trainer's shapes, without a GPU" *
          doctest::skip()) {
  if (!cuda::cudnn_attention_built()) {
    CHECK(cuda::cudnn_attention_lowering_error(shape) == "no cuDNN in this build");
    return;
  }
  // "" also says that each lowered graph's tensors are the variant pack's: its uids, the token-row
  // layouts of the addresses the device path passes, BF16 (the statistics FP32).
  for (const attention_shape& s : trainer_shapes) {
    CAPTURE(s.head_dim());
    CAPTURE(s.context);
    CHECK(cuda::cudnn_attention_lowering_error(s) == "");
  }
  // A head dimension cuDNN has no kernel for (12: not a multiple of 8) fails validation, naming it;
  // --attention auto then keeps the materialised path.
  const std::string refused = cuda::cudnn_attention_lowering_error(attention_shape{2, 64, 48, 4});
  INFO(refused);
  CHECK(contains(refused, "forward graph: validate: "));
  CHECK(contains(refused, "multiple of 8"));
}

// Past the lowering: cuDNN's heuristics list sm_90 engines for both graphs at the same shapes, and its
// support check accepts them (q, k, v, o and the gradients through token-row strides, the deterministic
// backward). The heuristics load the driver library, though no GPU: ctest runs this case alone with the
// toolkit's stub of it on the library path (trainer_test_attention_support); a plain run skips it.
TEST_CASE("cuDNN heuristics offer H100 engines that support the fused attention graphs" * doctest::skip()) {
  if (!cuda::cudnn_attention_built()) {
    CHECK(cuda::cudnn_attention_support_error(shape) == "no cuDNN in this build");
    return;
  }
  for (const attention_shape& s : trainer_shapes) {
    CAPTURE(s.head_dim());
    CAPTURE(s.context);
    CHECK(cuda::cudnn_attention_support_error(s) == "");
  }
}

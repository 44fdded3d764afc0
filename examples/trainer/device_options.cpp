// What --device cuda refuses, with the switch to change named in the message.
#include "device_options.hpp"

#include <stdexcept>
#include <string>

namespace trainer {

namespace {

[[noreturn]] void refuse(const std::string& message) {
  throw std::invalid_argument("--device cuda: " + message + " (see docs/trainer_cuda.md)");
}

}  // namespace

void check_device_options(const run_options& o, bool cuda_built) {
  if (o.attention != attention_kernel::automatic && o.model.kind != "transformer") {
    throw std::invalid_argument("--attention applies to the transformer; the " + o.model.kind +
                                " model has no attention");
  }
  if (o.device != device_kind::cuda) {
    if (o.attention == attention_kernel::fused) {
      throw std::invalid_argument(
          "--attention fused needs --device cuda (the CPU trainer's attention is materialized)");
    }
    if (!o.producer_amaxes) {
      throw std::invalid_argument(
          "--no-producer-amaxes needs --device cuda (the CPU trainer's casts read their tensors' amaxes)");
    }
    if (!o.producer_fp8) {
      throw std::invalid_argument(
          "--no-producer-fp8 needs --device cuda (the CPU trainer's layers cast their BF16 operands)");
    }
    if (o.fast_accumulation != run_options{}.fast_accumulation) {
      throw std::invalid_argument(
          "--fast-accumulation needs --device cuda (the CPU trainer's emulated FP8 products accumulate "
          "exactly in FP32)");
    }
    return;
  }
  if (!cuda_built) {
    refuse(
        "this fp8_trainer was built without CUDA (nvcc was not found when it was configured); rebuild "
        "it with the CUDA toolkit, or use --device cpu");
  }
  if (o.recipe.scale_granularity == fp8::granularity::mx_1x32) {
    refuse(
        "--granularity mx is CPU-only (cuBLASLt's FP8 products take tensor, row and block scales on "
        "Hopper; its MX block scales need Blackwell)");
  }
  if (o.attention == attention_kernel::fused && o.base_precision == precision::fp32) {
    refuse(
        "--attention fused runs BF16 products and an fp32 run keeps attention in FP32; use --attention "
        "materialized or auto, or --precision bf16 or fp8");
  }
}

}  // namespace trainer

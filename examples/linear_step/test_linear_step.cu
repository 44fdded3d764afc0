// The example training step (train.cuh) on a GPU: the loss falls in FP8 and in BF16, and FP8 ends
// where BF16 does.
//
// Tolerances, and why: a CPU emulation of the same run (NumPy, FP32 products of per-tensor FP8
// rounded operands: E4M3 forward, E5M2 gradients) ends at 0.11 of its first step's loss in both
// precisions after 200 steps, the two 0.4% apart. The test asks for less than 0.25 of the first step
// (twice the margin: the device's delayed scales start at 1, and BF16 storage rounds every
// activation) and FP8 within 5% of BF16. A cast with a wrong scale, a lost or doubled micro-batch
// gradient or stale weight copies leave the loss near where it started or far from BF16's.
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "gpu_skip.hpp"
#include "train.cuh"

namespace {

// The mean loss of the last `count` steps (the loss of one fresh batch is noisy).
float final_loss(const std::vector<float>& losses, std::size_t count = 10) {
  REQUIRE(losses.size() >= count);
  return std::accumulate(losses.end() - std::ptrdiff_t(count), losses.end(), 0.0f) / float(count);
}

}  // namespace

TEST_CASE("the example's training step: the loss falls in FP8 and BF16, FP8 ends within 5% of BF16") {
  linear_step::run_options fp8_run, bf16_run;
  bf16_run.fp8 = false;
  const std::vector<float> fp8_losses = linear_step::train(fp8_run);
  const std::vector<float> bf16_losses = linear_step::train(bf16_run);
  REQUIRE(fp8_losses.size() == std::size_t(fp8_run.steps));
  const float fp8_final = final_loss(fp8_losses), bf16_final = final_loss(bf16_losses);
  INFO("first step: fp8 " << fp8_losses.front() << ", bf16 " << bf16_losses.front() << "; last 10 steps: fp8 "
                          << fp8_final << ", bf16 " << bf16_final);
  CHECK(fp8_final < 0.25f * fp8_losses.front());
  CHECK(bf16_final < 0.25f * bf16_losses.front());
  CHECK(std::abs(fp8_final - bf16_final) < 0.05f * bf16_final);
}

// Training-level tests: the loss falls, runs are reproducible, a resumed run equals the uninterrupted
// one bit for bit, FP8 with every GEMM class in BF16 equals the BF16 run, and precisions can continue
// each other's checkpoints.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "run_checks.hpp"
#include "tiny_options.hpp"
#include "trainer.hpp"

using namespace trainer;
using trainer_tests::identical;
using trainer_tests::temporary_path;
using trainer_tests::train_losses;

namespace {

// A small transformer on the test text: a few seconds for dozens of steps.
run_options tiny_options(precision p, long steps) {
  run_options o =
      trainer_tests::tiny_options(FP8_TRAINER_TEST_TEXT, trainer_tests::two_layers_of_32, 4, steps);
  o.base_precision = p;
  o.fp8_head = true;  // every linear layer in FP8: the widest coverage of the FP8 path
  return o;
}

}  // namespace

TEST_CASE("a short run lowers the loss in every precision") {
  for (precision p : {precision::fp32, precision::bf16, precision::fp8}) {
    CAPTURE(to_string(p));
    run_options o = tiny_options(p, 60);
    o.learning_rate = 1e-2f;
    training_run run(o);
    const double before = run.evaluate();
    const std::vector<double> losses = train_losses(run, o.steps);
    const double after = run.evaluate();
    // ln(256) = 5.55 at the start; a byte model that learned the letter frequencies is near the
    // unigram baseline (about 3 nats); 60 steps on this text get clearly below the start.
    CHECK(before > 5.0);
    CHECK(after < before - 1.5);
    CHECK(losses.back() < losses.front() - 1.5);
  }
}

TEST_CASE("the MLP model trains too") {
  run_options o = tiny_options(precision::fp8, 60);
  o.model.kind = "mlp";
  o.model.channels = 16;
  o.model.hidden = 64;
  o.model.layers = 2;
  o.model.window = 4;
  o.learning_rate = 1e-2f;
  training_run run(o);
  const double before = run.evaluate();
  train_losses(run, o.steps);
  CHECK(run.evaluate() < before - 1.5);
}

TEST_CASE("the same seed gives identical losses; another seed does not") {
  run_options o = tiny_options(precision::fp8, 8);
  training_run first(o), second(o);
  const std::vector<double> a = train_losses(first, o.steps), b = train_losses(second, o.steps);
  CHECK(identical(a, b));
  CHECK(identical(first.net().parameters().master, second.net().parameters().master));
  o.seed = 2;
  training_run other(o);
  CHECK_FALSE(identical(a, train_losses(other, o.steps)));
}

TEST_CASE("resuming from a checkpoint reproduces the uninterrupted run bit for bit") {
  struct variant {
    const char* name;
    precision p;
    fp8::scaling_mode recipe;
    fp8::granularity grain;
  };
  const variant variants[] = {
      {"fp8 delayed", precision::fp8, fp8::scaling_mode::delayed, fp8::granularity::per_tensor},
      {"fp8 current block", precision::fp8, fp8::scaling_mode::current, fp8::granularity::tile_1x128},
      {"bf16", precision::bf16, fp8::scaling_mode::delayed, fp8::granularity::per_tensor},
      {"fp32", precision::fp32, fp8::scaling_mode::delayed, fp8::granularity::per_tensor}};
  for (const variant& v : variants) {
    CAPTURE(v.name);
    run_options o = tiny_options(v.p, 12);
    o.recipe.recipe = v.recipe;
    o.recipe.scale_granularity = v.grain;
    o.recipe.amax_history_length = 4;  // short enough that the window rolls over within the run
    if (v.p == precision::fp8) o.shadow_every = 3;
    training_run uninterrupted(o);
    const std::vector<double> expected = train_losses(uninterrupted, o.steps);

    training_run first_half(o);
    train_losses(first_half, 5);
    const std::string path = temporary_path(std::string("resume_") + to_string(v.p) + ".safetensors");
    first_half.save(path);

    run_options resumed_options = o;
    resumed_options.resume_from = path;
    training_run resumed(resumed_options);
    CHECK(resumed.step() == 5);
    std::vector<double> losses(expected.begin(), expected.begin() + 5);
    const std::vector<double> rest = train_losses(resumed, o.steps - 5);
    losses.insert(losses.end(), rest.begin(), rest.end());
    CHECK(identical(losses, expected));
    CHECK(identical(resumed.net().parameters().master, uninterrupted.net().parameters().master));
    CHECK(resumed.evaluate() == uninterrupted.evaluate());
  }
}

TEST_CASE("fp8 with fprop, dgrad and wgrad overridden to BF16 equals the BF16 run exactly") {
  run_options bf16_options = tiny_options(precision::bf16, 10);
  run_options fp8_options = tiny_options(precision::fp8, 10);
  fp8_options.linear_modes = {gemm_mode::bf16, gemm_mode::bf16, gemm_mode::bf16};
  training_run bf16_run(bf16_options), fp8_run(fp8_options);
  CHECK(identical(train_losses(bf16_run, 10), train_losses(fp8_run, 10)));
  CHECK(identical(bf16_run.net().parameters().master, fp8_run.net().parameters().master));
  CHECK(bf16_run.evaluate() == fp8_run.evaluate());

  // So does keeping every layer in BF16 through the per-layer switch.
  run_options all_layers = tiny_options(precision::fp8, 10);
  all_layers.bf16_layers = {"0", "1", "head"};
  all_layers.fp8_head = false;
  training_run layered(all_layers);
  training_run bf16_again(bf16_options);
  CHECK(identical(train_losses(layered, 10), train_losses(bf16_again, 10)));
}

TEST_CASE("the debugging switches change what they claim to change") {
  const auto losses_of = [](run_options o) {
    training_run run(o);
    return train_losses(run, o.steps);
  };
  const std::vector<double> fp8 = losses_of(tiny_options(precision::fp8, 6));
  const std::vector<double> bf16 = losses_of(tiny_options(precision::bf16, 6));
  run_options fake = tiny_options(precision::fp8, 6);
  fake.linear_modes = {gemm_mode::fake_fp8, gemm_mode::fake_fp8, gemm_mode::fake_fp8};
  const std::vector<double> fake_losses = losses_of(fake);
  // Fake quantization rounds like FP8 but multiplies in BF16: close to both, equal to neither.
  CHECK_FALSE(identical(fake_losses, bf16));
  CHECK_FALSE(identical(fake_losses, fp8));
  CHECK(std::abs(fake_losses.back() - fp8.back()) < 0.1);
  // One class back in BF16 differs from all-FP8 and from all-BF16.
  run_options dgrad_bf16 = tiny_options(precision::fp8, 6);
  dgrad_bf16.linear_modes[std::size_t(fp8::gemm_kind::dgrad)] = gemm_mode::bf16;
  const std::vector<double> dgrad_losses = losses_of(dgrad_bf16);
  CHECK_FALSE(identical(dgrad_losses, fp8));
  CHECK_FALSE(identical(dgrad_losses, bf16));
  // Current scaling for dgrad only, and the first/last switch, run and differ from the default.
  run_options current_dgrad = tiny_options(precision::fp8, 6);
  current_dgrad.current_scaling_for = {fp8::gemm_kind::dgrad};
  CHECK_FALSE(identical(losses_of(current_dgrad), fp8));
  run_options first_last = tiny_options(precision::fp8, 6);
  first_last.first_last_bf16 = true;
  training_run first_last_run(first_last);
  CHECK(first_last_run.policy().bf16_units == std::vector<bool>{true, true, false});  // blocks 0 and 1
  // Without --fp8-head the LM head stays in BF16.
  run_options default_head = tiny_options(precision::fp8, 6);
  default_head.fp8_head = false;
  CHECK(training_run(default_head).policy().bf16_units == std::vector<bool>{false, false, true});
  CHECK_FALSE(identical(train_losses(first_last_run, 6), fp8));
}

TEST_CASE("every granularity and format mix trains without error") {
  for (fp8::granularity grain :
       {fp8::granularity::per_row, fp8::granularity::tile_1x128, fp8::granularity::mx_1x32}) {
    for (fp8::format_mix mix : {fp8::format_mix::hybrid, fp8::format_mix::e4m3}) {
      CAPTURE(to_string(grain));
      CAPTURE(to_string(mix));
      run_options o = tiny_options(precision::fp8, 4);
      o.recipe.recipe = fp8::scaling_mode::current;
      o.recipe.scale_granularity = grain;
      o.recipe.formats = mix;
      training_run run(o);
      const std::vector<double> losses = train_losses(run, o.steps);
      CHECK(std::isfinite(losses.back()));
      CHECK(losses.back() < losses.front());
    }
  }
}

TEST_CASE("an FP8 checkpoint continues in BF16, and a BF16 one in FP8") {
  run_options fp8_options = tiny_options(precision::fp8, 10);
  training_run fp8_run(fp8_options);
  train_losses(fp8_run, 5);
  const std::string path = temporary_path("fp8_to_bf16.safetensors");
  fp8_run.save(path);
  const std::vector<double> fp8_rest = train_losses(fp8_run, 5);

  run_options bf16_options = tiny_options(precision::bf16, 10);
  bf16_options.resume_from = path;
  training_run bf16_run(bf16_options);
  CHECK(bf16_run.step() == 5);
  const std::vector<double> bf16_rest = train_losses(bf16_run, 5);
  // Same weights, same batches, other GEMM precision: close losses, not identical ones.
  CHECK_FALSE(identical(bf16_rest, fp8_rest));
  for (std::size_t i = 0; i < bf16_rest.size(); ++i) CHECK(std::abs(bf16_rest[i] - fp8_rest[i]) < 0.1);

  // BF16 runs keep the amax histories warm, so its checkpoint continues in FP8 with real scales.
  const std::string bf16_path = temporary_path("bf16_to_fp8.safetensors");
  bf16_run.save(bf16_path);
  run_options back_to_fp8 = tiny_options(precision::fp8, 12);
  back_to_fp8.resume_from = bf16_path;
  training_run fp8_again(back_to_fp8);
  const auto& delayed = fp8_again.scaling().delayed();
  CHECK(delayed.scale(0) != 1.0f);
  CHECK(std::isfinite(train_losses(fp8_again, 2).back()));
}

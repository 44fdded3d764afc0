// The GPU training loop (--device cuda) against the CPU trainer: the default model follows the CPU
// loss curve, FP8 with every GEMM class in BF16 equals the BF16 run bit for bit, a resumed run equals
// the uninterrupted one bit for bit, checkpoints move between the devices, --micro-batch runs the
// step in passes as the CPU does, fake quantization follows the CPU's, and --stats-every writes the
// CPU's stats.csv rows. Label `gpu`: skipped without a device (gpu_skip.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/trainer_cuda.hpp"
#include "gpu_skip.hpp"
#include "model.hpp"
#include "run_checks.hpp"
#include "tiny_options.hpp"
#include "trainer.hpp"

using namespace trainer;
using trainer_tests::identical;
using trainer_tests::train_losses;

namespace {

// A small transformer on the test text (as test_training.cpp): seconds on the CPU.
run_options tiny_options(precision p, device_kind device) {
  run_options o = trainer_tests::tiny_options(FP8_TRAINER_TEST_TEXT, trainer_tests::two_layers_of_32, 4, 40);
  // The CPU runs these tests compare with on every thread OpenMP offers (the default), not on one.
  o.threads = 0;
  o.base_precision = p;
  o.device = device;
  o.learning_rate = 1e-2f;  // the loss falls clearly within the tests' few dozen steps
  o.fp8_head = true;        // every linear layer in FP8
  return o;
}

// The byte-window MLP at its defaults (window 8, width 32, two hidden layers of 512) on the test text.
run_options tiny_mlp_options(precision p, device_kind device) {
  run_options o = tiny_options(p, device);
  o.model.kind = "mlp";
  o.model.window = 8;
  o.model.channels = 32;
  o.model.layers = 2;
  o.model.hidden = 512;
  return o;
}

std::unique_ptr<training_run> make_run(const run_options& o) {
  if (o.device == device_kind::cuda) return cuda::make_training_run(o);
  return std::make_unique<training_run>(o);
}

// An FP32 run on the CPU and its twin on the GPU, from the same weights and batches: the first
// evaluation and loss agree to 1e-4 nats and 20 steps of losses to 0.01 (the tolerances of the fp32
// test, which says why). Returns the GPU's losses.
std::vector<double> expect_fp32_runs_agree(training_run& cpu, training_run& gpu) {
  CHECK(std::abs(cpu.evaluate() - gpu.evaluate()) < 1e-4);
  const std::vector<double> a = train_losses(cpu, 20), b = train_losses(gpu, 20);
  CHECK(std::abs(a[0] - b[0]) < 1e-4);
  for (std::size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(a[i] - b[i]) < 0.01);
  }
  return b;
}

// Its own scratch folder: the CPU training tests may run at the same time.
std::string temporary_path(const std::string& name) {
  return trainer_tests::temporary_path(name, "fp8_trainer_cuda_tests");
}

// The master weights as a checkpoint stores them (save() brings a GPU run's copies to the host).
std::vector<float> saved_master(training_run& run, const std::string& name) {
  run.save(temporary_path(name));
  return run.net().parameters().master;
}

// A text large enough for the default model's batches: the repository's documentation, concatenated
// in name order (about 200 KB; 10% of it validates).
std::string documentation_text() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(FP8_TRAINER_DOCS_DIR)) {
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  const std::string path = temporary_path("documentation.txt");
  std::ofstream out(path, std::ios::binary);
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    out << in.rdbuf();
  }
  return path;
}

// ||a - b|| / ||b|| over elements [begin, end) (0 when both are zero there).
double relative_difference(const std::vector<float>& a, const std::vector<float>& b, std::size_t begin,
                           std::size_t end) {
  double difference = 0.0, norm = 0.0;
  for (std::size_t i = begin; i < end; ++i) {
    difference += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    norm += double(b[i]) * double(b[i]);
  }
  if (norm == 0.0) return difference == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(difference / norm);
}

double mean(const std::vector<double>& v, std::size_t begin, std::size_t end) {
  double sum = 0.0;
  for (std::size_t i = begin; i < end; ++i) sum += v[i];
  return sum / double(end - begin);
}

// The trainer's default model on the documentation text for 200 steps, evaluated on 8 batches.
run_options default_model_options() {
  run_options o;
  o.data_file = documentation_text();
  o.steps = 200;
  o.eval_batches = 8;
  o.progress_bar = false;
  return o;
}

// Trains `o` (200 steps) on the CPU and on the GPU from the same weights and batches, and checks that
// the GPU follows the CPU's loss curve. `what` labels the printed final losses.
void expect_gpu_follows_cpu(run_options o, const char* what) {
  std::vector<double> losses[2], validation[2];
  for (device_kind device : {device_kind::cpu, device_kind::cuda}) {
    o.device = device;
    const std::unique_ptr<training_run> run = make_run(o);
    const std::size_t d = device == device_kind::cuda ? 1 : 0;
    validation[d].push_back(run->evaluate());
    losses[d] = train_losses(*run, o.steps);
    validation[d].push_back(run->evaluate());
  }
  // The same initial weights and batches: the first evaluation differs by rounding only (BF16
  // activations rounded after other summation orders; a few 1e-3 nats at most).
  CHECK(std::abs(validation[1][0] - validation[0][0]) < 0.01);
  // Training moves both far below the start (ln 256 = 5.5): the comparison is not of two flat lines.
  CHECK(validation[0][1] < validation[0][0] - 2.0);
  // Afterwards the two trajectories drift apart like two runs of different rounding: compare 20-step
  // means of the training loss and the final validation loss, 0.1 nats each. How far rounding alone
  // moves the final validation loss at 200 steps, measured on the CPU: this setup in FP8 against
  // fake quantization (the same casts; only the BF16 rounding of the decoded operands differs),
  // seeds 1 to 7, ended 0.006 to 0.041 nats apart, root mean square 0.025 (docs/trainer_cuda.md);
  // an H100's fake-quantization run ended 0.067 from the CPU's. 0.1 is 4 of those root mean squares;
  // a wiring mistake (a gradient lost or doubled, a wrong transpose) moves the loss by far more.
  for (std::size_t begin = 0; begin + 20 <= losses[0].size(); begin += 20) {
    CAPTURE(begin);
    CHECK(std::abs(mean(losses[1], begin, begin + 20) - mean(losses[0], begin, begin + 20)) < 0.1);
  }
  CHECK(std::abs(validation[1][1] - validation[0][1]) < 0.1);
  std::printf("%sfinal validation loss: cpu %.4f, cuda %.4f\n", what, validation[0][1], validation[1][1]);
}

}  // namespace

TEST_CASE("200 steps of the default model on the GPU follow the CPU loss curve") {
  // The trainer's default model, batch and recipe (FP8 delayed, HYBRID, LM head in BF16).
  expect_gpu_follows_cpu(default_model_options(), "");
}

TEST_CASE("the first step's gradients on the GPU equal the CPU's, tensor by tensor") {
  // One step from the same weights and batch on both devices; then each parameter tensor's gradient
  // as ||gpu - cpu|| / ||cpu||. Clipping is off: the GPU applies its factor inside the AdamW pass and
  // leaves the gradients as computed, while the CPU scales them in place first.
  // A wiring mistake (a gradient missing, added twice or into the wrong tensor, a wrong transpose or
  // scratch buffer) gives about 1, and the message names the tensor. Tolerances, from the CPU
  // trainer at these shapes: moving every FP32 weight by one ulp moves each tensor's gradient by at
  // most 4e-7, so FP32 runs (summation order only) get 1e-4; all of BF16's roundings together
  // (bf16 against fp32) move them by at most 7e-3, and the devices differ only in where summation
  // order flips a BF16 rounding, so BF16 runs get 2e-2. FP8 is left out: at step 0 the delayed scales
  // are 1, and there moving 2% of the BF16 weights by one BF16 ulp already moves the gradients by up
  // to 6e-2 (the FP8 products themselves are the library's test_linear_layer's). The fused attention
  // (cuDNN) rounds other intermediates to BF16 (unnormalised probabilities, dS, dq, dk, dv) than the
  // CPU's, each of the size of those BF16 already makes: 2e-2 still covers twice the 7e-3.
  // With --micro-batch 2 the step's gradient is the mean of two passes: the GPU's first pass
  // overwrites (wgrads with beta 0, the other tensors cleared), the second adds in place (beta 1,
  // the kernels' additions), then one division; the CPU sums pass buffers and divides. Summation
  // order only, the same tolerances; a pass lost, added twice or not divided gives 0.5 or more.
  struct config {
    const char* model;
    precision p;
    attention_kernel attention;
    double allowed;
    int micro_batch;  // 0: one pass of the whole batch
  };
  const attention_kernel materialized = attention_kernel::materialized, fused = attention_kernel::fused,
                         automatic = attention_kernel::automatic;
  for (const config& c : {config{"transformer", precision::fp32, automatic, 1e-4, 0},
                          config{"transformer", precision::bf16, materialized, 2e-2, 0},
                          config{"transformer", precision::bf16, fused, 2e-2, 0},
                          config{"mlp", precision::fp32, automatic, 1e-4, 0},
                          config{"mlp", precision::bf16, automatic, 2e-2, 0},
                          config{"transformer", precision::fp32, automatic, 1e-4, 2},
                          config{"transformer", precision::bf16, materialized, 2e-2, 2},
                          config{"transformer", precision::bf16, fused, 2e-2, 2},
                          config{"mlp", precision::fp32, automatic, 1e-4, 2}}) {
    CAPTURE(c.model);
    CAPTURE(to_string(c.p));
    CAPTURE(to_string(c.attention));
    CAPTURE(c.micro_batch);
    std::unique_ptr<training_run> runs[2];
    for (device_kind device : {device_kind::cpu, device_kind::cuda}) {
      const bool mlp = std::string(c.model) == "mlp";
      std::unique_ptr<training_run>& run = runs[device == device_kind::cuda ? 1 : 0];
      run_options o = mlp ? tiny_mlp_options(c.p, device) : tiny_options(c.p, device);
      if (device == device_kind::cuda) o.attention = c.attention;
      o.clip_norm = 0.0f;
      o.micro_batch = c.micro_batch;
      run = make_run(o);
      if (c.micro_batch != 0) REQUIRE(run->split().passes() == 2);
      if (device == device_kind::cuda && !mlp) {
        // The run names the path it took: the one asked for, or fused where automatic could take it.
        const std::string expected = c.attention == materialized || c.p == precision::fp32
                                         ? "attention: materialized"
                                         : "attention: fused (cuDNN ";
        CHECK(run->describe().find(expected) != std::string::npos);
      }
      run->train_step();
    }
    const parameter_set& params = runs[0]->net().parameters();
    const std::vector<float>& cpu = params.grad;
    const std::vector<float> gpu = cuda::gradients_of(*runs[1]);
    REQUIRE(gpu.size() == cpu.size());
    for (std::size_t t = 0; t < params.tensor_count(); ++t) {
      CAPTURE(params.specs()[t].name);
      const std::size_t begin = params.offset(t), end = begin + params.specs()[t].size();
      CHECK(relative_difference(gpu, cpu, begin, end) <= c.allowed);
    }
  }
}

TEST_CASE("on the GPU, FP8 with every GEMM class in BF16 is the BF16 run, bit for bit") {
  run_options bf16 = tiny_options(precision::bf16, device_kind::cuda);
  run_options fp8_as_bf16 = tiny_options(precision::fp8, device_kind::cuda);
  fp8_as_bf16.linear_modes = {gemm_mode::bf16, gemm_mode::bf16, gemm_mode::bf16};
  const std::unique_ptr<training_run> a = make_run(bf16);
  const std::unique_ptr<training_run> b = make_run(fp8_as_bf16);
  CHECK(identical(train_losses(*a, 20), train_losses(*b, 20)));
  CHECK(a->evaluate() == b->evaluate());
  CHECK(identical(saved_master(*a, "bf16.safetensors"), saved_master(*b, "fp8_as_bf16.safetensors")));
}

// Every amax of every history of the run's scaling state (brought to the host by save()), newest first.
std::vector<float> amax_histories(const training_run& run) {
  const fp8::delayed_scaling_state& state = run.scaling().delayed();
  std::vector<float> out;
  for (std::size_t t = 0; t < state.size(); ++t) {
    for (std::size_t k = 0; k < state.history(t).length(); ++k) out.push_back(state.history(t).at(k));
  }
  return out;
}

TEST_CASE("on the GPU, the producers' amaxes give the layers' own results, bit for bit") {
  // Under current per-tensor scaling the layers take X's and dY's amaxes from the kernels that wrote
  // them (RMSNorm, SwiGLU, the staging copies) instead of reading the tensors for them, and the
  // amax-only passes of BF16 classes do the same. A slot left unzeroed from an earlier pass, or the
  // amax of another tensor, would change a scale or a recorded amax: runs with and without
  // (--no-producer-amaxes), over steps of two passes, agree bit for bit in losses, weights and every
  // amax history. The fp8 cases see a wrong amax in their scales, so in their losses; the bf16 and
  // BF16-head cases only in the histories, which keep each step's maximum over its passes (a slot
  // stale within a step may not show there). Both attention paths: the materialised one stages the
  // tensors around attention (the staging copies' amaxes), the fused one keeps them BF16 (read by the
  // layers). The MLP's operands are all staged.
  struct config {
    const char* what;
    bool mlp;
    precision p;
    fp8::scaling_mode scaling;
    attention_kernel attention;
    bool fp8_head;
  };
  const auto current = fp8::scaling_mode::current, delayed = fp8::scaling_mode::delayed;
  const auto automatic = attention_kernel::automatic, materialized = attention_kernel::materialized;
  for (const config& c :
       {config{"fp8 current, materialised attention", false, precision::fp8, current, materialized, true},
        config{"fp8 current, automatic attention", false, precision::fp8, current, automatic, true},
        config{"bf16", false, precision::bf16, current, automatic, true},
        config{"fp8 delayed, BF16 head", false, precision::fp8, delayed, automatic, false},
        config{"mlp fp8 current", true, precision::fp8, current, automatic, true}}) {
    CAPTURE(c.what);
    run_options with =
        c.mlp ? tiny_mlp_options(c.p, device_kind::cuda) : tiny_options(c.p, device_kind::cuda);
    with.recipe.recipe = c.scaling;
    with.attention = c.attention;
    with.fp8_head = c.fp8_head;
    with.micro_batch = 2;
    run_options without = with;
    without.producer_amaxes = false;
    const std::unique_ptr<training_run> a = make_run(with);
    const std::unique_ptr<training_run> b = make_run(without);
    CHECK(identical(train_losses(*a, 10), train_losses(*b, 10)));
    CHECK(a->evaluate() == b->evaluate());
    CHECK(identical(saved_master(*a, "producer_amaxes.safetensors"),
                    saved_master(*b, "no_producer_amaxes.safetensors")));
    const std::vector<float> histories = amax_histories(*a);
    CHECK(identical(histories, amax_histories(*b)));
    CHECK(std::any_of(histories.begin(), histories.end(), [](float x) { return x > 0.0f; }));  // recorded
    // The path ran (the same results would follow from a slot never handed over), and only with it on.
    CHECK(cuda::producers_of(*a).amaxes > 0);
    CHECK(cuda::producers_of(*b).amaxes == 0);
  }
}

TEST_CASE("on the GPU, producers that write FP8 codes give the layers' own casts' results, bit for bit") {
  // Under delayed scaling the kernels that write a linear layer's X or dY write the layer's FP8
  // codes where it takes them, instead of BF16 for the layer to cast: RMSNorm (wqkv's, w_gate_up's
  // and the head's X), SwiGLU (w_down's X; backward w_gate_up's dY) and the staging copies of float
  // operands (the residual stream's gradient as the dY of wo and w_down, the logits' gradient as
  // the head's; on the materialised attention path the heads' output as wo's X and qkv's gradient
  // as wqkv's dY; every operand of the MLP). Runs with and without --no-producer-fp8, over steps of
  // two passes, agree bit for bit in losses, evaluation, master weights and every amax history; and
  // the path ran in exactly the calls where the layers take codes: none under current scaling (the
  // cast needs the amax first) or with a BF16 wgrad (it reads X and dY as BF16). A code or an amax
  // slot off by one changes the losses or the histories.
  // With block 0 in BF16 (--bf16-layers 0) the model mixes the two ways of holding a layer's X:
  // block 0's BF16 wgrads read X again in the backward, so its norms' and SwiGLU's outputs are kept
  // per block; block 1's FP8 wgrads read the forward's Xᵀ copy, so its X lives in the one buffer per
  // shape that such layers share. Without producer codes block 1's kernels write that buffer as
  // BF16, with them they write the layer's codes instead: were block 0's X that same buffer, the
  // two runs would give block 0's wgrads different X, and the comparison would fail.
  struct config {
    const char* what;
    bool mlp;
    attention_kernel attention;
    fp8::scaling_mode scaling;
    gemm_mode wgrad;
    bool first_block_bf16 = false;
  };
  const auto delayed = fp8::scaling_mode::delayed;
  const auto automatic = attention_kernel::automatic, materialized = attention_kernel::materialized;
  for (const config& c :
       {config{"delayed, automatic attention", false, automatic, delayed, gemm_mode::fp8},
        config{"delayed, materialised attention", false, materialized, delayed, gemm_mode::fp8},
        config{"delayed, wgrad in bf16", false, automatic, delayed, gemm_mode::bf16},
        config{"current scaling", false, automatic, fp8::scaling_mode::current, gemm_mode::fp8},
        config{"mlp, delayed", true, automatic, delayed, gemm_mode::fp8},
        config{"delayed, block 0 in bf16", false, automatic, delayed, gemm_mode::fp8, true}}) {
    CAPTURE(c.what);
    run_options with = c.mlp ? tiny_mlp_options(precision::fp8, device_kind::cuda)
                             : tiny_options(precision::fp8, device_kind::cuda);  // the head in FP8 too
    with.recipe.recipe = c.scaling;
    with.attention = c.attention;
    with.linear_modes = {gemm_mode::fp8, gemm_mode::fp8, c.wgrad};
    with.micro_batch = 2;
    if (c.first_block_bf16) with.bf16_layers = {"0"};
    run_options without = with;
    without.producer_fp8 = false;
    const std::unique_ptr<training_run> a = make_run(with);
    const std::unique_ptr<training_run> b = make_run(without);
    const long steps = 10;
    CHECK(identical(train_losses(*a, steps), train_losses(*b, steps)));
    // Calls per training pass that take codes, where the layers take them. The MLP: X and dY of
    // every layer. The transformer, per block: X of wqkv, w_gate_up, w_down; dY of w_gate_up, wo,
    // w_down; on the materialised path also wo's X and wqkv's dY (cuDNN's BF16 tensors on the fused
    // one); and the head's X and dY. A block in BF16 takes none.
    const std::uint64_t blocks = std::uint64_t(with.model.layers) - (c.first_block_bf16 ? 1 : 0);
    const bool fused = a->describe().find("attention: fused") != std::string::npos;
    const std::uint64_t per_pass = c.mlp
                                       ? 2 * std::uint64_t(make_model(with.model, 1)->linear_layers().size())
                                       : (fused ? 6 : 8) * blocks + 2;
    const bool taken = c.scaling == delayed && c.wgrad == gemm_mode::fp8;
    const std::uint64_t passes = std::uint64_t(steps) * std::uint64_t(with.batch / with.micro_batch);
    CHECK(cuda::producers_of(*a).fp8_codes == (taken ? passes * per_pass : 0));
    CHECK(cuda::producers_of(*b).fp8_codes == 0);
    CHECK(a->evaluate() == b->evaluate());
    CHECK(identical(saved_master(*a, "producer_fp8.safetensors"),
                    saved_master(*b, "no_producer_fp8.safetensors")));
    const std::vector<float> histories = amax_histories(*a);
    CHECK(identical(histories, amax_histories(*b)));
    CHECK(std::any_of(histories.begin(), histories.end(), [](float x) { return x > 0.0f; }));
  }
  // Steps that count the casts (--stats-every: every operand is written as BF16 in their first
  // pass) and shadow passes (all BF16) between steps that take codes, through run(): the same run
  // either way.
  run_options with = tiny_options(precision::fp8, device_kind::cuda);
  with.micro_batch = 2;
  with.steps = 6;
  with.stats_every = 2;
  with.shadow_every = 3;
  with.eval_every = 3;
  with.overwrite = true;
  run_options without = with;
  without.producer_fp8 = false;
  with.out_dir = temporary_path("producer_fp8_run");
  without.out_dir = temporary_path("no_producer_fp8_run");
  const std::unique_ptr<training_run> a = make_run(with);
  const std::unique_ptr<training_run> b = make_run(without);
  const double loss_a = a->run(), loss_b = b->run();
  CHECK(std::memcmp(&loss_a, &loss_b, sizeof(double)) == 0);
  CHECK(cuda::producers_of(*a).fp8_codes > 0);
  CHECK(identical(saved_master(*a, "producer_fp8_run.safetensors"),
                  saved_master(*b, "no_producer_fp8_run.safetensors")));
  CHECK(identical(amax_histories(*a), amax_histories(*b)));
}

TEST_CASE("on the GPU, FP8 differs from BF16 (the FP8 products run)") {
  const std::unique_ptr<training_run> a = make_run(tiny_options(precision::bf16, device_kind::cuda));
  const std::unique_ptr<training_run> b = make_run(tiny_options(precision::fp8, device_kind::cuda));
  const std::vector<double> la = train_losses(*a, 10), lb = train_losses(*b, 10);
  CHECK_FALSE(identical(la, lb));
  // Close, though: the same model and batches.
  CHECK(std::abs(la.back() - lb.back()) < 0.1);
}

TEST_CASE("a GPU run resumed from its checkpoint equals the uninterrupted run, bit for bit") {
  for (const char* config : {"fp8 delayed", "fp8 current", "bf16", "fp32"}) {
    CAPTURE(config);
    const std::string name = config;
    const precision p = name == "fp32" ? precision::fp32 : name == "bf16" ? precision::bf16 : precision::fp8;
    run_options o = tiny_options(p, device_kind::cuda);
    o.recipe.recipe = name == "fp8 current" ? fp8::scaling_mode::current : fp8::scaling_mode::delayed;
    o.recipe.amax_history_length = 4;  // short: the histories roll over within the run
    o.recipe.algorithm = fp8::amax_algorithm::most_recent;
    if (p == precision::fp8) o.shadow_every = 3;
    const std::unique_ptr<training_run> whole = make_run(o);
    const std::vector<double> all = train_losses(*whole, 12);
    const double whole_eval = whole->evaluate();

    const std::unique_ptr<training_run> first = make_run(o);
    train_losses(*first, 5);
    first->evaluate();  // an evaluation before the save must not change what follows
    train_losses(*first, 1);
    const std::string path = temporary_path("resume_" + std::to_string(int(p)) + "_" +
                                            std::to_string(int(o.recipe.recipe)) + ".safetensors");
    first->save(path);
    run_options resumed_options = o;
    resumed_options.resume_from = path;
    const std::unique_ptr<training_run> resumed = make_run(resumed_options);
    CHECK(resumed->step() == 6);
    const std::vector<double> rest = train_losses(*resumed, 6);
    CHECK(identical(rest, std::vector<double>(all.begin() + 6, all.end())));
    CHECK(resumed->evaluate() == whole_eval);
    CHECK(
        identical(saved_master(*resumed, "resumed.safetensors"), saved_master(*whole, "whole.safetensors")));
  }
}

TEST_CASE("an fp32 run on the GPU stays close to the CPU's") {
  // FP32 everywhere (cuBLAS without TF32): the devices differ in summation order only, a few ulp per
  // product, and nothing rounds to BF16 to amplify it. The first loss agrees to 1e-4 nats (5.5 nats
  // of loss: about 2e-5 relative, some 100 ulp); 20 steps later the runs agree to 0.01 nats.
  const std::unique_ptr<training_run> cpu = make_run(tiny_options(precision::fp32, device_kind::cpu));
  const std::unique_ptr<training_run> gpu = make_run(tiny_options(precision::fp32, device_kind::cuda));
  const std::vector<double> b = expect_fp32_runs_agree(*cpu, *gpu);
  CHECK(b.back() < b.front() - 0.5);
}

TEST_CASE("--micro-batch on one GPU runs the step in passes, as the CPU does") {
  // FP32 against the CPU's passes: the same split, sum and mean, so the devices differ in summation
  // order only (the tolerances of the fp32 case above).
  run_options cpu_options = tiny_options(precision::fp32, device_kind::cpu);
  cpu_options.micro_batch = 2;
  run_options gpu_options = cpu_options;
  gpu_options.device = device_kind::cuda;
  const std::unique_ptr<training_run> cpu = make_run(cpu_options);
  const std::unique_ptr<training_run> gpu = make_run(gpu_options);
  CHECK(gpu->split().passes() == 2);
  expect_fp32_runs_agree(*cpu, *gpu);
  // FP8 (delayed, with shadow steps): 2 passes of 2 against one pass of 4 on the GPU. The gradients
  // are summed in another order and the FP8 casts of each pass round differently: the CPU's measured
  // spread for this is 1.1e-3 nats over 10 steps; 0.01 leaves ten times that, and a pass left out of
  // the sum or a wrong division moves the loss by more.
  run_options whole = tiny_options(precision::fp8, device_kind::cuda);
  whole.shadow_every = 3;
  run_options passes = whole;
  passes.micro_batch = 2;
  const std::unique_ptr<training_run> one = make_run(whole);
  const std::unique_ptr<training_run> two = make_run(passes);
  for (int step = 0; step < 10; ++step) {
    CAPTURE(step);
    const step_record x = one->train_step(), y = two->train_step();
    CHECK(std::abs(x.train_loss - y.train_loss) < 0.01);
    // Every third step has a shadow loss, from the same windows on both.
    CHECK(std::isnan(x.shadow_loss) == (step % 3 != 2));
    CHECK(std::isnan(y.shadow_loss) == (step % 3 != 2));
    if (step % 3 == 2) CHECK(std::abs(x.shadow_loss - y.shadow_loss) < 0.01);
  }
  CHECK(std::abs(one->evaluate() - two->evaluate()) < 0.01);
}

TEST_CASE("the MLP on the GPU follows the CPU's, and resumes bit for bit") {
  // FP32: summation order only (1e-4 nats first, 0.01 after 20 steps, as the transformer's). FP8:
  // the same batches and weights; BF16 activations and FP8 casts turn a few ulp into an occasional
  // BF16 or FP8 step (0.01 nats first, 0.05 after 20 steps, as across devices below).
  for (precision p : {precision::fp32, precision::fp8}) {
    CAPTURE(to_string(p));
    const double first = p == precision::fp32 ? 1e-4 : 0.01, later = p == precision::fp32 ? 0.01 : 0.05;
    const std::unique_ptr<training_run> cpu = make_run(tiny_mlp_options(p, device_kind::cpu));
    const std::unique_ptr<training_run> gpu = make_run(tiny_mlp_options(p, device_kind::cuda));
    CHECK(std::abs(cpu->evaluate() - gpu->evaluate()) < first);
    const std::vector<double> a = train_losses(*cpu, 20), b = train_losses(*gpu, 20);
    CHECK(std::abs(a[0] - b[0]) < first);
    for (std::size_t i = 0; i < a.size(); ++i) {
      CAPTURE(i);
      CHECK(std::abs(a[i] - b[i]) < later);
    }
    CHECK(b.back() < b.front() - 0.5);
  }
  // Resume: 10 steps against 5 + save + resume + 5, FP8 delayed with a history that rolls over.
  run_options o = tiny_mlp_options(precision::fp8, device_kind::cuda);
  o.recipe.amax_history_length = 4;
  const std::unique_ptr<training_run> whole = make_run(o);
  const std::vector<double> all = train_losses(*whole, 10);
  const std::unique_ptr<training_run> first = make_run(o);
  train_losses(*first, 5);
  const std::string path = temporary_path("mlp_resume.safetensors");
  first->save(path);
  o.resume_from = path;
  const std::unique_ptr<training_run> resumed = make_run(o);
  CHECK(identical(train_losses(*resumed, 5), std::vector<double>(all.begin() + 5, all.end())));
  CHECK(identical(saved_master(*resumed, "mlp_resumed.safetensors"),
                  saved_master(*whole, "mlp_whole.safetensors")));
}

TEST_CASE("a checkpoint moves between the devices and training continues") {
  // Both directions: trained 20 steps on one device, continued 10 steps on each. The first resumed
  // step sees the same weights and batch on both: its loss differs by rounding only (0.01 nats). The
  // later ones drift apart a little more (0.05 nats over 10 steps).
  for (device_kind from : {device_kind::cuda, device_kind::cpu}) {
    const device_kind to = from == device_kind::cuda ? device_kind::cpu : device_kind::cuda;
    CAPTURE(to_string(from));
    const std::unique_ptr<training_run> source = make_run(tiny_options(precision::fp8, from));
    const double start = source->train_step().train_loss;
    train_losses(*source, 19);
    const std::string path = temporary_path(std::string("from_") + to_string(from) + ".safetensors");
    source->save(path);
    const std::vector<double> same = train_losses(*source, 10);

    run_options o = tiny_options(precision::fp8, to);
    o.resume_from = path;
    const std::unique_ptr<training_run> moved = make_run(o);
    CHECK(moved->step() == 20);
    const std::vector<double> other = train_losses(*moved, 10);
    CHECK(std::abs(other[0] - same[0]) < 0.01);
    for (std::size_t i = 0; i < other.size(); ++i) {
      CAPTURE(i);
      CHECK(std::abs(other[i] - same[i]) < 0.05);
    }
    // The loss keeps falling from where the checkpoint left it, not from a fresh start.
    CHECK(other.back() < start - 0.5);
  }
}

TEST_CASE("the GPU run's run() writes the CPU run's log and a checkpoint the CPU run resumes") {
  run_options o = tiny_options(precision::fp8, device_kind::cuda);
  o.steps = 10;
  o.eval_every = 5;
  o.out_dir = temporary_path("run_dir");
  o.overwrite = true;
  const std::unique_ptr<training_run> run = make_run(o);
  const double final_loss = run->run();
  CHECK(std::isfinite(final_loss));
  std::ifstream log(o.out_dir + "/log.csv");
  std::string header, line;
  std::getline(log, header);
  CHECK(header == csv_log::header);
  int rows = 0;
  while (std::getline(log, line)) ++rows;
  CHECK(rows == 11);  // step 0 (the first evaluation) and 10 steps
  run_options cpu = tiny_options(precision::fp8, device_kind::cpu);
  cpu.resume_from = o.out_dir + "/final.safetensors";
  const std::unique_ptr<training_run> resumed = make_run(cpu);
  CHECK(resumed->step() == 10);
  CHECK(std::abs(resumed->evaluate() - final_loss) < 0.01);
}

TEST_CASE("--fake-quant on the GPU follows the CPU's fake-quant run") {
  // The first test's setup (default model, 200 steps) with every FP8 class fake-quantized on both
  // devices (the LM head stays BF16, as by default), and its tolerances: both devices cast with the
  // library's bit-identical quantize and dequantize, then run BF16 products, so the runs differ as
  // two runs of different rounding order do.
  run_options o = default_model_options();
  o.linear_modes = {gemm_mode::fake_fp8, gemm_mode::fake_fp8, gemm_mode::fake_fp8};
  expect_gpu_follows_cpu(o, "fake quantization, ");
}

namespace {

// stats.csv as (step,layer,operand,format,mode,granularity) -> the five numbers.
std::map<std::string, std::vector<double>> read_stats(const std::string& path, std::string& header) {
  std::ifstream in(path);
  std::getline(in, header);
  std::map<std::string, std::vector<double>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::stringstream split(line);
    for (std::string field; std::getline(split, field, ',');) fields.push_back(field);
    REQUIRE(fields.size() == 11);
    std::string key = fields[0];
    for (std::size_t i = 1; i < 6; ++i) key += "," + fields[i];
    std::vector<double> numbers;
    for (std::size_t i = 6; i < 11; ++i) numbers.push_back(std::stod(fields[i]));
    CHECK_MESSAGE(rows.count(key) == 0, "a second row for " << key);
    rows[key] = numbers;
  }
  return rows;
}

}  // namespace

TEST_CASE("--stats-every on the GPU writes the CPU's stats.csv rows") {
  // Two steps with statistics on each, on both devices: FP8, fake quantization, classes in BF16
  // beside them, the LM head in BF16 (--fp8-head off) and a whole --precision bf16 run. Both devices
  // write a row for each of the six operands of every linear layer and step, those of BF16 classes
  // too (mode bf16: what FP8 would do to them, from a scratch cast). Step 1 starts from the same
  // weights and batch; the devices differ by rounding order only, so amaxes and scales agree to a
  // few BF16 ulps (2e-2 relative) and the fractions to the few elements a rounding flip moves across
  // a threshold (0.01 + 10% of the CPU's fraction). Step 2's rows are compared by key only: AdamW's
  // first update moves every weight by about the learning rate whatever its gradient's size, so a
  // weight whose gradient is near zero moves one way on one device and the other way on the other;
  // on an H100 that put step 2's amaxes up to 20% apart (a weight's amax) while step 1's agreed.
  struct stats_case {
    const char* name;  // also the runs' folder
    precision base;
    std::array<gemm_mode, gemm_kind_count> modes;
    bool fp8_head;
  };
  const gemm_mode fp8 = gemm_mode::fp8, fake = gemm_mode::fake_fp8, bf16 = gemm_mode::bf16;
  for (const stats_case& c : {stats_case{"fp8", precision::fp8, {fp8, fp8, fp8}, true},
                              stats_case{"fake", precision::fp8, {fake, fake, fake}, true},
                              stats_case{"fp8_bf16_fake", precision::fp8, {fp8, bf16, fake}, true},
                              stats_case{"bf16_head", precision::fp8, {fp8, fp8, fp8}, false},
                              stats_case{"bf16", precision::bf16, {fp8, fp8, fp8}, true}}) {
    CAPTURE(c.name);
    std::map<std::string, std::vector<double>> rows[2];
    std::string headers[2];
    std::size_t layers = 0;
    for (device_kind device : {device_kind::cpu, device_kind::cuda}) {
      run_options o = tiny_options(c.base, device);
      o.steps = 2;
      o.stats_every = 1;
      o.eval_every = 2;
      o.linear_modes = c.modes;
      o.fp8_head = c.fp8_head;
      o.out_dir = temporary_path(std::string("stats_") + c.name + "_" +
                                 (device == device_kind::cuda ? "cuda" : "cpu"));
      o.overwrite = true;
      const std::unique_ptr<training_run> run = make_run(o);
      layers = make_model(o.model, 1)->linear_layers().size();
      CHECK(std::isfinite(run->run()));
      const std::size_t d = device == device_kind::cuda ? 1 : 0;
      rows[d] = read_stats(o.out_dir + "/stats.csv", headers[d]);
    }
    CHECK(headers[1] == headers[0]);
    CHECK(rows[0].size() == 2 * fp8::gemm_operand_count * layers);  // every operand of every layer
    CHECK(rows[1].size() == rows[0].size());
    std::size_t bf16_rows = 0;
    for (const auto& [key, cpu] : rows[0]) {
      CAPTURE(key);
      if (key.find(",bf16,") != std::string::npos) ++bf16_rows;
      const auto gpu = rows[1].find(key);
      REQUIRE(gpu != rows[1].end());
      if (key.rfind("1,", 0) != 0) {  // a later step: see above
        for (const double value : gpu->second) CHECK(std::isfinite(value));
        continue;
      }
      for (std::size_t i = 0; i < 3; ++i) CHECK(std::abs(gpu->second[i] - cpu[i]) <= 2e-2 * std::abs(cpu[i]));
      for (std::size_t i = 3; i < 5; ++i) CHECK(std::abs(gpu->second[i] - cpu[i]) <= 0.01 + 0.1 * cpu[i]);
    }
    // The BF16 rows are there: two operands per BF16 class and layer, all six of a BF16 layer.
    const std::size_t per_step = c.base == precision::bf16 ? fp8::gemm_operand_count * layers
                                 : !c.fp8_head             ? fp8::gemm_operand_count
                                 : c.modes[1] == bf16      ? 2 * layers
                                                           : 0;
    CHECK(bf16_rows == 2 * per_step);
  }
}

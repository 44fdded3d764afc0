// --device on the CPU: parsing, the refusals of what the GPU loop lacks (a program built without
// CUDA, MX), and the host planning of the GPU transformer's linear layers (sizes, per-class
// precision, fake quantization, the device scaling recipe) and of its stats.csv rows. No device
// needed.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fp8/error.hpp>

#include "cuda/device_memory.hpp"
#include "cuda/linear_policy.hpp"
#include "cuda/stats_rows.hpp"
#include "option_checks.hpp"
#include "scaling_state.hpp"

using namespace trainer;
using trainer_tests::contains;
using trainer_tests::device_error;
using trainer_tests::parse;

namespace {

// The device model's features of each linear layer (`features_of(shape, i)`) against the host
// model's weight shapes [N, K], for `count` layers; one index past them is refused.
template <class FeaturesOf>
void expect_host_weight_shapes(const model_options& shape, std::size_t count, FeaturesOf features_of) {
  const std::unique_ptr<model> host = make_model(shape, 2);
  const std::vector<linear_layer_info>& linears = host->linear_layers();
  REQUIRE(linears.size() == count);
  const parameter_set& params = host->parameters();
  for (std::size_t i = 0; i < linears.size(); ++i) {
    CAPTURE(linears[i].name);
    const std::vector<int>& w = params.specs()[params.index_of(linears[i].name)].shape;  // [N, K]
    const cuda::linear_features f = features_of(shape, i);
    CHECK(f.out == w[0]);
    CHECK(f.in == w[1]);
  }
  // Past the last layer: refused, naming the layer and how many the model has.
  const std::string past = "linear layer " + std::to_string(linears.size()) + " of ";
  const std::string layers = " with " + std::to_string(linears.size()) + " linear layers";
  CHECK_THROWS_WITH_AS(features_of(shape, linears.size()), doctest::Contains(past.c_str()),
                       fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(features_of(shape, linears.size()), doctest::Contains(layers.c_str()),
                       fp8::invalid_argument);
}

}  // namespace

TEST_CASE("--device is cpu by default and takes cpu or cuda") {
  CHECK(parse({}).device == device_kind::cpu);
  CHECK(parse({"--device", "cuda"}).device == device_kind::cuda);
  CHECK(parse({"--device=cuda", "--device", "cpu"}).device == device_kind::cpu);  // the last one wins
  try {
    parse({"--device", "gpu"});
    FAIL("--device gpu was accepted");
  } catch (const std::invalid_argument& e) {
    CHECK(contains(e.what(), "--device must be one of cpu, cuda; got 'gpu'"));
  }
}

TEST_CASE("a GPU run gets its own default output directory") {
  const std::string cpu = run_name(parse({}));
  const std::string gpu = run_name(parse({"--device", "cuda"}));
  CHECK(cpu != gpu);
  CHECK(contains(gpu, "-cuda-"));
  CHECK_FALSE(contains(cpu, "cuda"));
}

TEST_CASE("--device cpu accepts every switch") {
  CHECK(device_error({"--precision", "fp32"}) == "");
  CHECK(device_error({"--model", "mlp"}) == "");
  CHECK(device_error({"--fake-quant"}) == "");
  CHECK(device_error({"--stats-every", "5"}) == "");
  CHECK(device_error({"--scaling", "current", "--granularity", "mx"}, false) == "");
}

TEST_CASE("--device cuda accepts what the GPU loop supports") {
  for (const std::vector<const char*>& args : std::vector<std::vector<const char*>>{
           {"--device", "cuda"},
           {"--device", "cuda", "--precision", "bf16"},
           {"--device", "cuda", "--precision", "fp32"},
           {"--device", "cuda", "--model", "mlp", "--bf16-layers", "0"},
           {"--device", "cuda", "--fprop", "bf16", "--wgrad", "bf16"},
           {"--device", "cuda", "--bf16-layers", "0,head", "--first-last-bf16"},
           {"--device", "cuda", "--fp8-head", "--shadow-every", "10"},
           {"--device", "cuda", "--scaling", "current", "--granularity", "block"},
           {"--device", "cuda", "--current-scaling-for", "dgrad", "--amax-algo", "most_recent"},
           {"--device", "cuda", "--fake-quant"},
           {"--device", "cuda", "--dgrad", "fake", "--wgrad", "bf16"},
           {"--device", "cuda", "--stats-every", "10"},
           {"--device", "cuda", "--fake-quant", "--stats-every", "1", "--scaling", "current", "--granularity",
            "block"}}) {
    CAPTURE(args.size());
    CHECK(device_error(args) == "");
  }
}

TEST_CASE("--device cuda refuses what the GPU loop lacks, naming the switch") {
  CHECK(contains(device_error({"--device", "cuda"}, /*cuda_built=*/false), "built without CUDA"));
  CHECK(contains(device_error({"--device", "cuda", "--scaling", "current", "--granularity", "mx"}),
                 "--granularity mx"));
  // MX stays refused with fake quantization too (the casts would need MX scales on the device).
  CHECK(contains(
      device_error({"--device", "cuda", "--fake-quant", "--scaling", "current", "--granularity", "mx"}),
      "--granularity mx"));
  // Every refusal starts with the switch that asked for the GPU and points at the documentation.
  const std::string message =
      device_error({"--device", "cuda", "--scaling", "current", "--granularity", "mx"});
  CHECK(message.rfind("--device cuda: ", 0) == 0);
  CHECK(contains(message, "docs/trainer_cuda.md"));
}

TEST_CASE("the GPU transformer's linear layers have the host model's weight shapes") {
  model_options shape;
  shape.context = 16;
  shape.channels = 48;
  shape.layers = 3;
  shape.heads = 4;
  shape.hidden = 80;
  expect_host_weight_shapes(shape, 13, cuda::transformer_linear_features);
}

TEST_CASE("the GPU MLP's linear layers have the host model's weight shapes") {
  model_options shape;
  shape.kind = "mlp";
  shape.context = 8;
  shape.window = 3;
  shape.channels = 16;
  shape.layers = 3;
  shape.hidden = 40;
  expect_host_weight_shapes(shape, 4, cuda::mlp_linear_features);
}

TEST_CASE("each GEMM class of each unit gets the policy's precision on the GPU") {
  using fp8::cuda::gemm_precision;
  run_options o = parse({"--device", "cuda", "--bf16-layers", "1", "--wgrad", "bf16"});
  const std::unique_ptr<model> host = make_model(o.model, 1);
  const precision_policy fp8_policy = make_policy(o, *host);
  // Block 0: fprop and dgrad in FP8, wgrad as --wgrad says.
  const fp8::cuda::linear_precision block0 = cuda::linear_precision_of(fp8_policy, 0);
  CHECK(block0.fprop == gemm_precision::fp8);
  CHECK(block0.dgrad == gemm_precision::fp8);
  CHECK(block0.wgrad == gemm_precision::bf16);
  // Block 1 (--bf16-layers) and the head (BF16 unless --fp8-head): everything BF16.
  for (int unit : {1, host->unit_count() - 1}) {
    const fp8::cuda::linear_precision p = cuda::linear_precision_of(fp8_policy, unit);
    CHECK(p.fprop == gemm_precision::bf16);
    CHECK(p.dgrad == gemm_precision::bf16);
    CHECK(p.wgrad == gemm_precision::bf16);
  }
  // A bf16 run: BF16 everywhere. The fast-accumulation defaults are the layer's.
  o.base_precision = precision::bf16;
  const fp8::cuda::linear_precision bf16 = cuda::linear_precision_of(make_policy(o, *host), 0);
  CHECK(bf16.fprop == gemm_precision::bf16);
  CHECK(bf16.wgrad == gemm_precision::bf16);
  CHECK(bf16.fast_accumulation_fprop == fp8::cuda::linear_precision{}.fast_accumulation_fprop);
  // The FP32 run has no layer form: refused, not mapped silently.
  o.base_precision = precision::fp32;
  CHECK_THROWS_AS(cuda::linear_precision_of(make_policy(o, *host), 0), fp8::invalid_argument);
}

TEST_CASE("fake quantization maps to the layer's fake_fp8 class, per class and unit") {
  using fp8::cuda::gemm_precision;
  const auto unit_precision = [](std::vector<const char*> args, int unit) {
    const run_options o = parse(std::move(args));
    const std::unique_ptr<model> host = make_model(o.model, 1);
    return cuda::linear_precision_of(make_policy(o, *host), unit < 0 ? host->unit_count() - 1 : unit);
  };
  // --fake-quant: every class still in fp8 becomes fake; --wgrad bf16 stays BF16.
  const fp8::cuda::linear_precision all =
      unit_precision({"--device", "cuda", "--fake-quant", "--wgrad", "bf16"}, 0);
  CHECK(all.fprop == gemm_precision::fake_fp8);
  CHECK(all.dgrad == gemm_precision::fake_fp8);
  CHECK(all.wgrad == gemm_precision::bf16);
  // The LM head stays BF16 (no --fp8-head), as on the CPU.
  const fp8::cuda::linear_precision head = unit_precision({"--device", "cuda", "--fake-quant"}, -1);
  CHECK(head.fprop == gemm_precision::bf16);
  CHECK(head.dgrad == gemm_precision::bf16);
  CHECK(head.wgrad == gemm_precision::bf16);
  // One class fake (the bisection of a divergence), the others FP8.
  const fp8::cuda::linear_precision dgrad = unit_precision({"--device", "cuda", "--dgrad", "fake"}, 0);
  CHECK(dgrad.fprop == gemm_precision::fp8);
  CHECK(dgrad.dgrad == gemm_precision::fake_fp8);
  CHECK(dgrad.wgrad == gemm_precision::fp8);
  // A bf16 run ignores the FP8 switches: BF16 everywhere.
  const fp8::cuda::linear_precision bf16 =
      unit_precision({"--device", "cuda", "--precision", "bf16", "--fake-quant"}, 0);
  CHECK(bf16.fprop == gemm_precision::bf16);
  CHECK(bf16.dgrad == gemm_precision::bf16);
  CHECK(bf16.wgrad == gemm_precision::bf16);
}

TEST_CASE("the tensors beside the linear weights are found as merged ranges of the packed buffers") {
  // The device model clears these gradients before a pass that overwrites (the linear weights'
  // gradients are written by their wgrads) and widens these weights to floats after AdamW.
  const std::vector<tensor_spec> specs = {{"a", {3}, false},    {"w1", {2, 4}, true}, {"b", {5}, false},
                                          {"c", {0}, false},    {"d", {2}, false},    {"w2", {4, 4}, true},
                                          {"w3", {1, 2}, true}, {"e", {1}, false}};
  // Offsets: a 0, w1 3, b 11, c 16 (empty), d 16, w2 18, w3 34, e 36.
  const std::vector<cuda::parameter_range> ranges = cuda::ranges_except(specs, {1, 6, 5});
  REQUIRE(ranges.size() == 3);
  CHECK(ranges[0].offset == 0);
  CHECK(ranges[0].count == 3);
  CHECK(ranges[1].offset == 11);  // b and d, with the empty c between them, merged
  CHECK(ranges[1].count == 7);
  CHECK(ranges[2].offset == 36);
  CHECK(ranges[2].count == 1);
  const std::vector<cuda::parameter_range> all = cuda::ranges_except(specs, {});
  REQUIRE(all.size() == 1);
  CHECK(all[0].count == 37);
  CHECK(cuda::ranges_except(specs, {0, 1, 2, 3, 4, 5, 6, 7}).empty());
  CHECK_THROWS_WITH_AS(cuda::ranges_except(specs, {1, 1}), doctest::Contains("tensor 1 is the weight of two"),
                       std::logic_error);
  CHECK_THROWS_WITH_AS(cuda::ranges_except(specs, {8}),
                       doctest::Contains("tensor 8 does not exist (8 tensors)"), std::logic_error);
  // The transformer's: everything but wqkv, wo, w_gate_up, w_down of each block and the head.
  model_options shape;
  shape.layers = 2;
  const std::unique_ptr<model> host = make_model(shape, 2);
  const parameter_set& params = host->parameters();
  std::vector<std::size_t> weights;
  std::size_t weight_elements = 0;
  for (const linear_layer_info& l : host->linear_layers()) {
    weights.push_back(params.index_of(l.name));
    weight_elements += params.specs()[weights.back()].size();
  }
  std::size_t covered = 0;
  for (const cuda::parameter_range& r : cuda::ranges_except(params.specs(), weights)) {
    covered += r.count;
    for (const std::size_t w : weights) {
      const bool overlaps =
          r.offset < params.offset(w) + params.specs()[w].size() && params.offset(w) < r.offset + r.count;
      CHECK_FALSE(overlaps);
    }
  }
  CHECK(covered + weight_elements == params.size());
}

TEST_CASE("the GPU's statistics become the CPU's stats.csv rows") {
  // Fractions as the CPU computes them: saturated of all elements, flushed of the nonzero ones.
  fp8::cuda::cast_statistics counted;
  counted.counted = true;
  counted.amax = 3.5f;
  counted.scale_min = 16.0f;
  counted.scale_max = 128.0f;
  counted.elements = 1000;
  counted.nonzero = 800;
  counted.saturated = 5;
  counted.flushed = 20;
  const tensor_stats stats = cuda::to_tensor_stats(counted);
  CHECK(stats.amax == 3.5f);
  CHECK(stats.scale_min == 16.0f);
  CHECK(stats.scale_max == 128.0f);
  CHECK(stats.saturated == doctest::Approx(0.005).epsilon(1e-12));
  CHECK(stats.flushed == doctest::Approx(0.025).epsilon(1e-12));
  fp8::cuda::cast_statistics zeros = counted;  // an all-zero tensor: nothing flushed, no division by 0
  zeros.nonzero = 0;
  zeros.flushed = 0;
  CHECK(cuda::to_tensor_stats(zeros).flushed == 0.0);

  // Rows: one per counted operand, layers in order, operands in fp8::gemm_operand order, with the
  // recipe's format and granularity and the policy's mode (the CPU's names).
  const run_options o = parse({"--device", "cuda", "--dgrad", "fake", "--layers", "1"});
  const std::unique_ptr<model> host = make_model(o.model, 1);
  const precision_policy policy = make_policy(o, *host);
  const recipe_switches switches{o.recipe, o.power_of_two_scales, o.current_scaling_for};
  std::vector<std::string> names;
  for (const linear_layer_info& info : host->linear_layers()) names.push_back(info.name);
  const scaling_state scaling(switches, names);
  std::vector<fp8::cuda::linear_statistics> layers(2);
  layers[0][std::size_t(fp8::gemm_operand::fprop_input)] = counted;
  layers[0][std::size_t(fp8::gemm_operand::dgrad_grad_output)] = counted;
  layers[1][std::size_t(fp8::gemm_operand::wgrad_input)] = counted;
  const std::string path =
      (std::filesystem::temp_directory_path() / "fp8_trainer_cuda_stats_rows.csv").string();
  {
    tensor_stats_log log(path, 0);
    log.set_step(7);
    cuda::log_statistics(log, scaling, policy, host->linear_layers(), layers);
    log.flush();
  }
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::remove(path.c_str());
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "step,layer,operand,format,mode,granularity,amax,scale_min,scale_max,saturated,flushed");
  CHECK(lines[1] == "7," + names[0] + ",fprop_input,e4m3,fp8,per_tensor,3.5,16,128,0.005,0.025");
  CHECK(lines[2] == "7," + names[0] + ",dgrad_grad_output,e5m2,fake,per_tensor,3.5,16,128,0.005,0.025");
  CHECK(lines[3] == "7," + names[1] + ",wgrad_input,e4m3,fp8,per_tensor,3.5,16,128,0.005,0.025");
  // More layers of statistics than the model has is a programming error, named.
  layers.resize(host->linear_layers().size() + 1);
  tensor_stats_log log(path, 0);
  const std::string named = "statistics of " + std::to_string(layers.size()) + " layers for a model with " +
                            std::to_string(layers.size() - 1) + " linear layers";
  CHECK_THROWS_WITH_AS(cuda::log_statistics(log, scaling, policy, host->linear_layers(), layers),
                       doctest::Contains(named.c_str()), fp8::invalid_argument);
  std::remove(path.c_str());
}

TEST_CASE("the device recipe keeps every operand and takes the host state's delayed configuration") {
  for (const std::vector<const char*>& args : std::vector<std::vector<const char*>>{
           {"--device", "cuda"},
           {"--device", "cuda", "--amax-history", "16", "--amax-algo", "most_recent", "--margin", "2"},
           {"--device", "cuda", "--scaling", "current", "--margin", "1", "--format", "e4m3"},
           {"--device", "cuda", "--scaling", "current", "--granularity", "block"},
           {"--device", "cuda", "--current-scaling-for", "fprop,wgrad", "--pow2-scales"}}) {
    const run_options o = parse(args);
    const recipe_switches switches{o.recipe, o.power_of_two_scales, o.current_scaling_for};
    const scaling_state host(switches, {"a", "b"});
    const fp8::gemm_recipe device = cuda::device_recipe(host.recipe(), delayed_config(switches));
    // The configuration the device state is built with is the host state's: uploads and downloads
    // of a checkpoint's state need it.
    CHECK(device.delayed() == host.delayed().config());
    for (std::size_t op = 0; op < fp8::gemm_operand_count; ++op) {
      const fp8::operand_recipe& a = device[fp8::gemm_operand(op)];
      const fp8::operand_recipe& b = host.recipe()[fp8::gemm_operand(op)];
      CHECK(a.mode == b.mode);
      CHECK(a.quant.format == b.quant.format);
      CHECK(a.quant.granularity == b.quant.granularity);
      CHECK(a.quant.margin == b.quant.margin);
      CHECK(a.quant.power_of_two_scales == b.quant.power_of_two_scales);
      // The host state's slot of this operand holds the format the layer casts a delayed operand to.
      CHECK(host.delayed()[host.tensor_index(1, fp8::gemm_operand(op))].format == a.quant.format);
    }
  }
}

TEST_CASE("every linear layer's weight and gradient sit 16-byte aligned in the packed parameter buffers") {
  // device_linears hands the layer pointers into the packed buffers: W's BF16 copy at the tensor's
  // offset (read by BF16 products and by the casts, whose fastest kernels need 16 bytes) and the FP32
  // gradient there (the C and D of an FP8 wgrad product, which cuBLASLt refuses below 16 bytes).
  // Offsets are sums of tensor sizes, so one odd-sized tensor (a bias, a gain) before a matrix would
  // break this; the shapes below are the tests', the defaults, the loss-parity run's (one block: the
  // offsets repeat per block) and an MLP with an odd embedding width.
  std::vector<model_options> shapes;
  model_options tiny;
  tiny.context = 32;
  tiny.channels = 32;
  tiny.layers = 2;
  tiny.heads = 2;
  tiny.hidden = 64;
  shapes.push_back(tiny);
  shapes.push_back(model_options{});
  model_options parity;
  parity.context = 16;
  parity.channels = 1024;
  parity.layers = 1;
  parity.heads = 16;
  parity.hidden = 2816;
  shapes.push_back(parity);
  model_options mlp;
  mlp.kind = "mlp";
  mlp.context = 8;
  mlp.window = 5;
  mlp.channels = 3;
  mlp.layers = 3;
  mlp.hidden = 48;
  shapes.push_back(mlp);
  model_options mlp_default;
  mlp_default.kind = "mlp";
  mlp_default.hidden = 512;
  mlp_default.channels = 32;
  shapes.push_back(mlp_default);
  for (const model_options& shape : shapes) {
    CAPTURE(shape.kind);
    CAPTURE(shape.channels);
    const std::unique_ptr<model> host = make_model(shape, 1);
    const parameter_set& params = host->parameters();
    for (const linear_layer_info& info : host->linear_layers()) {
      CAPTURE(info.name);
      const std::size_t offset = params.offset(params.index_of(info.name));
      CHECK(offset * sizeof(std::uint16_t) % 16 == 0);  // the BF16 copy of W
      CHECK(offset * sizeof(float) % 16 == 0);          // the FP32 gradient
    }
  }
}

TEST_CASE("device memory: sizes in binary units, the out-of-memory reason and the run's summary") {
  CHECK(cuda::binary_size(0) == "0.0 MiB");
  CHECK(cuda::binary_size(std::size_t(512) << 20) == "512.0 MiB");
  CHECK(cuda::binary_size((std::size_t(3) << 30) / 2) == "1.50 GiB");
  const std::size_t gib = std::size_t(1) << 30;
  CHECK(cuda::out_of_memory_reason(2 * gib, 70 * gib, gib, 80 * gib) ==
        "the GPU is out of memory: 2.00 GiB asked while the trainer's buffers hold 70.00 GiB and the "
        "device has 1.00 GiB free of 80.00 GiB");
  // cudaMemGetInfo failed too: no device figures rather than zeros.
  CHECK(cuda::out_of_memory_reason(gib, 0, 0, 0) ==
        "the GPU is out of memory: 1.00 GiB asked while the trainer's buffers hold 0.0 MiB");
  CHECK(cuda::memory_summary(10 * gib, {}, 60 * gib, 80 * gib) ==
        "10.00 GiB in the trainer's buffers; 20.00 GiB of 80.00 GiB in use on the device");
  // With linear layers (bf16 and fp8 runs): their own copies and the shared ones, summed, then the
  // shared part.
  CHECK(cuda::memory_summary(10 * gib, {true, 2 * gib, gib / 4}, 60 * gib, 80 * gib) ==
        "10.00 GiB in the trainer's buffers; 2.25 GiB in the linear layers' FP8 copies (256.0 MiB of "
        "them shared); 20.00 GiB of 80.00 GiB in use on the device");
}

TEST_CASE("--no-producer-amaxes: on the GPU it turns the producers' amaxes off; the CPU refuses it") {
  CHECK(parse({}).producer_amaxes);
  CHECK_FALSE(parse({"--device", "cuda", "--no-producer-amaxes"}).producer_amaxes);
  CHECK(device_error({"--device", "cuda", "--no-producer-amaxes"}).empty());
  CHECK(contains(device_error({"--no-producer-amaxes"}), "--no-producer-amaxes needs --device cuda"));
}

TEST_CASE("--no-producer-fp8: on the GPU it turns the producers' FP8 codes off; the CPU refuses it") {
  CHECK(parse({}).producer_fp8);
  CHECK_FALSE(parse({"--device", "cuda", "--no-producer-fp8"}).producer_fp8);
  CHECK(parse({"--device", "cuda", "--no-producer-amaxes"}).producer_fp8);  // one switch, one field
  CHECK(device_error({"--device", "cuda", "--no-producer-fp8"}).empty());
  CHECK(contains(device_error({"--no-producer-fp8"}), "--no-producer-fp8 needs --device cuda"));
}

TEST_CASE(
    "--fast-accumulation: the GEMM classes whose GPU FP8 products accumulate fast; the CPU refuses it") {
  using fast = std::array<bool, trainer::gemm_kind_count>;         // fprop, dgrad, wgrad
  CHECK(parse({}).fast_accumulation == fast{true, false, false});  // Transformer Engine's default
  CHECK(parse({"--device", "cuda", "--fast-accumulation", "none"}).fast_accumulation == fast{});
  CHECK(parse({"--device", "cuda", "--fast-accumulation", "wgrad,fprop"}).fast_accumulation ==
        fast{true, false, true});
  CHECK(parse({"--device", "cuda", "--fast-accumulation=dgrad"}).fast_accumulation ==
        fast{false, true, false});
  const auto parse_error = [](std::vector<const char*> args) {
    try {
      (void)parse(std::move(args));
    } catch (const std::invalid_argument& e) { return std::string(e.what()); }
    return std::string();
  };
  CHECK(contains(parse_error({"--fast-accumulation", "attention"}),
                 "--fast-accumulation must be one of fprop, dgrad, wgrad; got 'attention'"));
  CHECK(contains(parse_error({"--fast-accumulation", "none,fprop"}), "got 'none'"));
  CHECK(contains(parse_error({"--fast-accumulation", ","}), "--fast-accumulation needs none, or some of"));
  // The GPU takes any choice; the CPU accumulates exactly and refuses all but the default.
  CHECK(device_error({"--device", "cuda", "--fast-accumulation", "none"}).empty());
  CHECK(device_error({"--fast-accumulation", "fprop"}).empty());
  CHECK(contains(device_error({"--fast-accumulation", "none"}), "--fast-accumulation needs --device cuda"));
  // Each layer's products get the choice; a run's name says it where it is not the default.
  run_options o = parse({"--device", "cuda", "--fast-accumulation", "none"});
  const std::unique_ptr<model> host = make_model(o.model, 1);
  const fp8::cuda::linear_precision p = cuda::linear_precision_of(make_policy(o, *host), 0);
  CHECK_FALSE(p.fast_accumulation_fprop);
  CHECK_FALSE(p.fast_accumulation_dgrad);
  CHECK_FALSE(p.fast_accumulation_wgrad);
  CHECK(contains(trainer::run_name(o), "-fastacc_none"));
  o = parse({"--device", "cuda", "--fast-accumulation", "fprop,wgrad"});
  CHECK(cuda::linear_precision_of(make_policy(o, *host), 0).fast_accumulation_wgrad);
  CHECK(contains(trainer::run_name(o), "-fastacc_fprop_wgrad"));
  CHECK_FALSE(contains(trainer::run_name(parse({"--device", "cuda"})), "fastacc"));
}

// Training speed of the trainer's GPU transformer (examples/trainer/cuda) at a given shape, BF16 and
// FP8 in the same run: tokens/s, model TFLOP/s and where the step's GPU time goes (linear layers with
// their FP8 casts, float <-> BF16 staging, attention, other layers, optimizer), then kernel by kernel.
//
//   bench_trainer [--d-model 4096] [--hidden 14336] [--heads 32] [--context 2048] [--layers 4]
//                 [--batch 2] [--passes 1] [--warmup 3] [--steps 10] [--profile-steps 3]
//                 [--trace-steps 1] [--precisions bf16,fp8] [--attention auto|fused|materialized]
//                 [--producer-fp8 on|off] [--gemm-tuning on|off] [--out DIR]
//
// The default shape is the issue's speed table: d_model 4096, SwiGLU 14336, 32 heads, context 2048,
// byte vocabulary, 4 blocks (0.975 B parameters, about the issue's 1 B). Attention as fp8_trainer's
// --attention (auto: cuDNN's fused attention where this build has it; the line printed per precision
// says which ran). The BF16 run is plain BF16 (no amaxes recorded for a later FP8 switch, unlike the
// trainer's bf16 runs); the FP8 run is the trainer's. Random tokens; weights drawn once, the same for
// both precisions.
//
// --producer-fp8 off: the FP8 run's RMSNorm and SwiGLU write BF16 for the linear layers to cast, as
// the trainer's --no-producer-fp8, instead of the layers' FP8 codes (on, the trainer's default). The
// line printed per precision says how many operands per pass the producers wrote as codes.
//
// --gemm-tuning on: every cuBLASLt product of the linear layers, BF16 and FP8 alike, is tuned on its
// first call (its candidate algorithms timed, the fastest kept; fp8::cublaslt::handle::set_tuning),
// in the first warm-up step. Off (the default, as the trainer runs): the heuristic's pick.
//
// --passes P: gradient accumulation, as the trainer's --micro-batch takes it: every optimizer step
// runs P forward/backward passes of --batch sequences, each on its own tokens (the first pass writes
// the gradients, the others add theirs), divides the sum by P and updates the weights once, so that
// the optimizer's fixed cost is spread over P times the tokens, as in a real run. Steps (--warmup,
// --steps, --profile-steps) are optimizer steps; tokens/s and model TFLOP/s count the tokens of all P
// passes; the profile is per optimizer step (the division by P in its optimizer phase).
//
// --trace-steps N (0: none): once every precision is timed and profiled and speed.csv and profile.csv
// are written, each precision again on a fresh model: one untraced step, then N optimizer steps
// traced through CUPTI (kernel_trace.hpp): every kernel, copy and memset with its GPU time per step,
// and the time in which anything ran at all (a step's time less that is time the GPU waited for the
// host). The phases say which layer costs; the kernels say which of its kernels, and how often they
// run. Where CMake found no CUPTI, or the driver refuses it (asked once, before any model is built
// for a trace), a line per precision says so and the tables stand.
//
// Writes DIR/speed.csv (each row with the pass count and the tokens per optimizer step),
// DIR/profile.csv, DIR/kernels.csv (the traced kernels of every precision, the longest first) and
// DIR/timeline.csv (every traced execution in the order the GPU ran them: on one stream, the order of
// the launches, by which each GEMM can be told to its layer) with --out, and prints the first three as
// Markdown tables (the kernels: the longest of each precision).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda/device_memory.hpp"
#include "cuda/gradient_sum.hpp"
#include "cuda/phase_profile.hpp"
#include "cuda/transformer.cuh"
#include "kernel_table.hpp"
#include "options.hpp"
#include "rng.hpp"
#include "scaling_state.hpp"
#if FP8_BENCH_CUPTI
#include "kernel_trace.hpp"
#endif

namespace {

struct bench_options {
  trainer::model_options shape;
  int batch = 2;
  int passes = 1;  // forward/backward passes per optimizer step
  int warmup = 3;
  int steps = 10;
  int profile_steps = 3;
  int trace_steps = 1;  // 0: no kernel trace
  std::vector<trainer::precision> precisions{trainer::precision::bf16, trainer::precision::fp8};
  trainer::attention_kernel attention = trainer::attention_kernel::automatic;
  bool producer_fp8 = true;
  bool gemm_tuning = false;
  std::string out;
};

// Tokens of one optimizer step (all passes): far more than any run accumulates, small enough to hold.
constexpr std::int64_t max_step_tokens = std::int64_t(1) << 28;

// Kernels printed per precision (kernels.csv has them all).
constexpr std::size_t printed_kernels = 12;  // as many as the results page shows

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "bench_trainer: %s\n(see the comment at the top of bench/cuda/bench_trainer.cu)\n",
               problem.c_str());
  std::exit(2);
}

int whole_number(const std::string& option, const char* text, long smallest) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < smallest || value > (1L << 20)) {
    usage(option +
          (smallest > 0 ? " expects a positive whole number" : " expects a whole number, 0 or more"));
  }
  return int(value);
}

int positive(const std::string& option, const char* text) { return whole_number(option, text, 1); }

// A switch's value: on or off.
bool on_off(const std::string& option, const std::string& value) {
  if (value != "on" && value != "off") usage(option + " takes on or off; got '" + value + "'");
  return value == "on";
}

bench_options parse(int argc, char** argv) {
  bench_options o;
  o.shape.channels = 4096;
  o.shape.hidden = 14336;
  o.shape.heads = 32;
  o.shape.context = 2048;
  o.shape.layers = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string option = argv[i];
    if (i + 1 >= argc) usage(option + " needs a value");
    const char* value = argv[++i];
    if (option == "--d-model")
      o.shape.channels = positive(option, value);
    else if (option == "--hidden")
      o.shape.hidden = positive(option, value);
    else if (option == "--heads")
      o.shape.heads = positive(option, value);
    else if (option == "--context")
      o.shape.context = positive(option, value);
    else if (option == "--layers")
      o.shape.layers = positive(option, value);
    else if (option == "--batch")
      o.batch = positive(option, value);
    else if (option == "--passes")
      o.passes = positive(option, value);
    else if (option == "--warmup")
      o.warmup = positive(option, value);
    else if (option == "--steps")
      o.steps = positive(option, value);
    else if (option == "--profile-steps")
      o.profile_steps = positive(option, value);
    else if (option == "--trace-steps")
      o.trace_steps = whole_number(option, value, 0);
    else if (option == "--out")
      o.out = value;
    else if (option == "--producer-fp8")
      o.producer_fp8 = on_off(option, value);
    else if (option == "--gemm-tuning")
      o.gemm_tuning = on_off(option, value);
    else if (option == "--attention") {
      const std::string v = value;
      if (v == "auto")
        o.attention = trainer::attention_kernel::automatic;
      else if (v == "fused")
        o.attention = trainer::attention_kernel::fused;
      else if (v == "materialized")
        o.attention = trainer::attention_kernel::materialized;
      else
        usage("--attention takes auto, fused or materialized; got '" + v + "'");
    } else if (option == "--precisions") {
      o.precisions.clear();
      std::stringstream list(value);
      std::string item;
      while (std::getline(list, item, ',')) {
        if (item == "bf16")
          o.precisions.push_back(trainer::precision::bf16);
        else if (item == "fp8")
          o.precisions.push_back(trainer::precision::fp8);
        else
          usage("--precisions takes bf16 and fp8; got '" + item + "'");
      }
    } else
      usage("unknown option '" + option + "'");
  }
  // Every pass's tokens are drawn and uploaded at the start (4 bytes each).
  const double step_tokens = double(o.passes) * double(o.batch) * double(o.shape.context);
  if (step_tokens > double(max_step_tokens)) {
    usage("--passes x --batch x --context is " + std::to_string(std::int64_t(step_tokens)) +
          " tokens per optimizer step; at most " + std::to_string(max_step_tokens));
  }
  return o;
}

// FLOPs of one training token (forward + backward = 3x forward): 6 per parameter of every linear
// layer, plus attention's two T x T products (4 T C per token and layer forward) counted in full, the
// usual convention of model FLOPs (the materialised attention computes them all; the fused one skips
// the masked half, which this count does not credit).
double flops_per_token(const trainer::model_options& s) {
  const double C = s.channels, F = s.hidden, V = s.vocab, T = s.context, L = s.layers;
  const double linear_parameters = L * (4.0 * C * C + 3.0 * C * F) + V * C;
  return 6.0 * linear_parameters + 12.0 * L * T * C;
}

struct result {
  trainer::precision precision;
  double seconds_per_step = 0.0, tokens_per_second = 0.0, tflops = 0.0, loss = 0.0;
  std::vector<double> phase_ms;                    // per step
  std::optional<fp8_bench::kernel_table> kernels;  // of o.trace_steps steps, where the trace ran
};

// One precision's model on the device with its inputs, and the optimizer step the trainer's GPU run
// takes with --micro-batch (trainer_cuda.cu).
class bench_run {
 public:
  bench_run(const bench_options& o, trainer::precision p, const trainer::model& host,
            const std::vector<std::int32_t>& tokens)
      : o_(o),
        model_(o.shape, o.batch, host.parameters(), host.linear_layers(), policy(o, p, host), recipe(host),
               false, nullptr, nullptr, o.attention),
        inputs_(tokens) {
    // The BF16 run is the plain BF16 baseline a user would otherwise run (as PyTorch's): no amaxes
    // recorded for later FP8 use, which the trainer's bf16 runs do by default, as on the CPU.
    if (p == trainer::precision::bf16) model_.record_bf16_amax(false);
    model_.producer_fp8(o.producer_fp8);
    model_.gemm_tuning(o.gemm_tuning);
  }

  std::string attention() const { return model_.attention_description(); }
  std::uint64_t producer_fp8_calls() const { return model_.producer_calls().fp8_codes; }
  trainer::cuda::linear_memory linear_memory() const { return model_.linear_layer_memory(); }
  float loss() const { return loss_; }

  // One optimizer step: o.passes forward/backward passes, the mean of their gradients, the update.
  void step(trainer::cuda::phase_profile* profile) {
    using namespace trainer;
    model_.set_profile(profile);
    const std::size_t pass_tokens = std::size_t(o_.batch) * std::size_t(o_.shape.context);
    for (int pass = 0; pass < o_.passes; ++pass) {
      const std::int32_t* in = inputs_.data() + std::size_t(pass) * pass_tokens;
      const std::int32_t* target = in + 1;  // the next byte; tokens holds one more than the passes
      const float loss = float(model_.forward_device(in, target, cuda::pass_kind::train));
      model_.backward(pass == 0 ? cuda::gradient_mode::overwrite : cuda::gradient_mode::accumulate);
      gradient_sum_.add_pass_losses(pass, loss, 0.0f);
    }
    // The mean over the passes (a division of every gradient; nothing for one pass) is the
    // optimizer's share of accumulation: it is paid once per step, like the update.
    if (profile != nullptr) profile->mark(cuda::phase::optimizer);
    loss_ = gradient_sum_.finish(model_.parameters(), o_.passes, nullptr, model_.stream()).loss;
    cuda::optimizer_step(model_, adamw_, 1e-4f, step_++, 1.0f, profile);
    model_.set_profile(nullptr);
  }

 private:
  // The trainer's defaults but the precision: delayed HYBRID, LM head in BF16.
  static trainer::run_options options_for(const bench_options& o, trainer::precision p) {
    trainer::run_options ro;
    ro.model = o.shape;
    ro.base_precision = p;
    return ro;
  }
  static trainer::precision_policy policy(const bench_options& o, trainer::precision p,
                                          const trainer::model& host) {
    return trainer::make_policy(options_for(o, p), host);
  }
  // The trainer's default recipe as the device layers take it.
  static fp8::gemm_recipe recipe(const trainer::model& host) {
    using namespace trainer;
    const run_options ro;
    const recipe_switches switches{ro.recipe, ro.power_of_two_scales, ro.current_scaling_for};
    std::vector<std::string> names;
    for (const linear_layer_info& info : host.linear_layers()) names.push_back(info.name);
    const scaling_state state(switches, names);
    return cuda::device_recipe(state.recipe(), delayed_config(switches));
  }

  const bench_options& o_;
  trainer::cuda::device_transformer model_;
  trainer::cuda::device_buffer<std::int32_t> inputs_;
  trainer::adamw_options adamw_;
  trainer::cuda::device_gradient_sum gradient_sum_;
  long step_ = 0;
  float loss_ = 0.0f;
};

// Writes text into folder + name; nothing where no folder was given (no --out).
void write_file(const std::string& folder, const char* name, const std::string& text) {
  if (folder.empty()) return;
  std::ofstream file(folder + name);
  file << text;
  if (!file.flush()) throw std::runtime_error("cannot write " + folder + name + " (does --out exist?)");
}

// Warm-up, timed and profiled steps of one precision.
result measure(const bench_options& o, trainer::precision p, const trainer::model& host,
               const std::vector<std::int32_t>& tokens) {
  using namespace trainer;
  bench_run run(o, p, host, tokens);
  std::printf(
      "bench_trainer: %s: attention %s%s; GEMMs %s\n", to_string(p), run.attention().c_str(),
      p == precision::bf16 ? "; no amax recording (plain BF16)" : "",
      o.gemm_tuning ? "tuned on their first call (--gemm-tuning on)" : "through the heuristic's pick");
  result r;
  r.precision = p;
  for (int s = 0; s < o.warmup; ++s) run.step(nullptr);
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("bench_trainer: %s: operands written as FP8 codes by their producers: %.1f per pass%s\n",
              to_string(p), double(run.producer_fp8_calls()) / (double(o.warmup) * double(o.passes)),
              o.producer_fp8 ? "" : " (--producer-fp8 off)");
  // After a step, with every workspace allocated: the room left says how many more blocks fit.
  std::size_t free = 0, total = 0;
  FP8_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  std::printf(
      "bench_trainer: %s: memory %s\n", to_string(p),
      cuda::memory_summary(cuda::buffer_bytes_held().load(), run.linear_memory(), free, total).c_str());
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < o.steps; ++s) run.step(nullptr);
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
  r.seconds_per_step =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / o.steps;
  r.loss = run.loss();
  const double step_tokens = double(o.passes) * double(o.batch) * double(o.shape.context);
  r.tokens_per_second = step_tokens / r.seconds_per_step;
  r.tflops = flops_per_token(o.shape) * r.tokens_per_second / 1e12;
  cuda::phase_profile profile(nullptr);
  for (int s = 0; s < o.profile_steps; ++s) {
    run.step(&profile);
    profile.collect();
  }
  for (std::size_t ph = 0; ph < cuda::phase_count; ++ph) {
    r.phase_ms.push_back(profile.milliseconds(cuda::phase(ph)) / o.profile_steps);
  }
  return r;
}

// Why CUPTI cannot trace on this machine (a driver that refuses the profiling interface), or
// nothing. The refusal is the device's, the same for every precision, so it is asked once, before
// any model is built for a trace: each build costs seconds of a short GPU run.
std::optional<std::string> trace_refusal() {
#if FP8_BENCH_CUPTI
  try {
    const fp8_bench::kernel_trace probe;  // recording on, then off again in its destructor
  } catch (const std::runtime_error& e) { return std::string(e.what()); }
  return std::nullopt;
#else
  return std::string("built without CUPTI (CMake found none beside the toolkit)");
#endif
}

#if FP8_BENCH_CUPTI
// o.trace_steps optimizer steps of r's precision under a kernel trace, into r.kernels, after one
// untraced step (cuBLASLt's plans, cuDNN's graphs and the workspaces are made in the first), on a
// model of its own: every precision is timed before any is traced, and the speed and phase tables
// are on disk by then, so that nothing the trace does can cost them. Prints what the trace found or
// why there is none: a failure here (of the trace or of the traced steps) leaves r.kernels empty
// and is not a failure of the speed run.
void trace_kernels(const bench_options& o, const trainer::model& host,
                   const std::vector<std::int32_t>& tokens, result& r) {
  const char* name = trainer::to_string(r.precision);
  std::optional<fp8_bench::kernel_trace> trace;
  try {
    bench_run run(o, r.precision, host, tokens);
    run.step(nullptr);
    FP8_CUDA_CHECK(cudaDeviceSynchronize());
    trace.emplace();
    for (int s = 0; s < o.trace_steps; ++s) run.step(nullptr);
    r.kernels = trace->stop();
  } catch (const std::exception& e) {
    r.kernels.reset();
    std::printf("bench_trainer: %s: kernel trace: not run: %s\n", name, e.what());
    return;
  }
  const fp8_bench::kernel_table& k = *r.kernels;
  if (k.calls() == 0 && k.untimed() == 0) {  // an empty table would read as a run cut short
    r.kernels.reset();
    std::printf("bench_trainer: %s: kernel trace: not run: CUPTI recorded no kernel\n", name);
    return;
  }
  // What the table misses, each by its cause; none in a complete trace.
  std::string missing;
  const auto count_missing = [&missing](std::uint64_t count, const char* what) {
    if (count > 0) missing += ", " + std::to_string(count) + " " + what;
  };
  count_missing(trace->dropped(), "records dropped");
  count_missing(std::uint64_t(k.untimed()), "records without times");
  count_missing(trace->buffers_cut_short(), "buffers cut short at an unreadable record");
  if (!missing.empty()) missing += " (undercounted)";
  std::printf(
      "bench_trainer: %s: kernel trace: %.0f executions per optimizer step (%d traced); something ran for "
      "%.1f "
      "ms per step, the executions' times summed %.1f ms%s\n",
      name, double(k.calls()) / o.trace_steps, o.trace_steps, k.busy_nanoseconds() / 1e6 / o.trace_steps,
      k.summed_nanoseconds() / 1e6 / o.trace_steps, missing.c_str());
}
#endif

// speed.csv: a row per precision measured.
std::string speed_csv(const std::vector<result>& results, int passes, std::size_t tokens_per_step) {
  std::ostringstream speed;
  speed << "precision,tokens_per_s,model_tflops,ms_per_step,loss,passes,tokens_per_step\n";
  for (const result& r : results) {
    speed << trainer::to_string(r.precision) << "," << r.tokens_per_second << "," << r.tflops << ","
          << r.seconds_per_step * 1e3 << "," << r.loss << "," << passes << "," << tokens_per_step << "\n";
  }
  return speed.str();
}

// profile.csv: a row per phase, a column per precision measured.
std::string profile_csv(const std::vector<result>& results) {
  std::ostringstream profile;
  profile << "phase";
  for (const result& r : results) profile << "," << trainer::to_string(r.precision) << "_ms";
  profile << "\n";
  for (std::size_t ph = 0; ph < trainer::cuda::phase_count; ++ph) {
    profile << '"' << trainer::cuda::phase_name(trainer::cuda::phase(ph)) << '"';
    for (const result& r : results) profile << "," << r.phase_ms[ph];
    profile << "\n";
  }
  return profile.str();
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered also into a pipe (trainer_tables.sh tees the log): a run cut short keeps every
  // line printed, and an error comes after the lines printed before it.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const bench_options o = parse(argc, argv);
  int failures = 0;
  try {
    int device = 0;
    cudaDeviceProp properties{};
    FP8_CUDA_CHECK(cudaGetDevice(&device));
    FP8_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    // The parameter layout from the CPU model (batch 1: its activations are not used).
    const std::unique_ptr<trainer::model> host = trainer::make_model(o.shape, 1);
    trainer::parameter_set& params = host->parameters();
    // Uniform weights with the trainer's standard deviation (0.02; fast to draw for a billion), gains 1.
    trainer::rng generator(1);
    for (std::size_t t = 0; t < params.tensor_count(); ++t) {
      const bool gain = params.specs()[t].shape.size() == 1;
      float* w = params.master.data() + params.offset(t);
      for (std::size_t i = 0; i < params.specs()[t].size(); ++i) {
        w[i] = gain ? 1.0f : float((generator.uniform() - 0.5) * 0.0693);  // 0.0693 / sqrt(12) = 0.02
      }
    }
    params.refresh_compute(trainer::storage::bf16);
    const std::size_t n = std::size_t(o.passes) * std::size_t(o.batch) * std::size_t(o.shape.context);
    std::vector<std::int32_t> tokens(n + 1);
    for (std::int32_t& t : tokens) t = std::int32_t(generator.below(std::uint64_t(o.shape.vocab)));

    std::printf(
        "bench_trainer: %s; d_model %d, SwiGLU %d, %d heads, context %d, %d blocks, vocab %d, "
        "%zu parameters; batch %d, passes %d (%zu tokens per optimizer step); %d warmup, %d timed, %d "
        "profiled steps\n",
        properties.name, o.shape.channels, o.shape.hidden, o.shape.heads, o.shape.context, o.shape.layers,
        o.shape.vocab, params.size(), o.batch, o.passes, n, o.warmup, o.steps, o.profile_steps);
    // An earlier run's tables must not pass for this one's, nor its kernels (written after the trace).
    if (!o.out.empty()) {
      for (const char* name : {"/speed.csv", "/profile.csv", "/kernels.csv", "/timeline.csv"}) {
        std::remove((o.out + name).c_str());
      }
    }
    // Each precision's failure is its own (the others' rows stay), and the tables are on disk after
    // each precision, so a failure or a time limit in a later one keeps the earlier rows.
    std::vector<result> results;
    for (trainer::precision p : o.precisions) {
      try {
        results.push_back(measure(o, p, *host, tokens));
      } catch (const std::exception& e) {
        std::printf("bench_trainer: %s: error: %s\n", trainer::to_string(p), e.what());
        ++failures;
        continue;
      }
      write_file(o.out, "/speed.csv", speed_csv(results, o.passes, n));
      write_file(o.out, "/profile.csv", profile_csv(results));
    }
    if (results.empty()) {
      std::fprintf(stderr, "bench_trainer: error: no precision could be measured\n");
      return 1;
    }
    std::printf(
        "\n| precision | tokens/s | model TFLOP/s | ms/step | speedup vs %s |\n|---|---|---|---|---|\n",
        trainer::to_string(results.front().precision));
    for (const result& r : results) {
      std::printf("| %s | %.0f | %.1f | %.1f | %.2fx |\n", trainer::to_string(r.precision),
                  r.tokens_per_second, r.tflops, r.seconds_per_step * 1e3,
                  r.tokens_per_second / results.front().tokens_per_second);
    }
    std::printf(
        "\nGPU time per optimizer step by phase (ms, CUDA events; the linear layers' casts and their GEMMs "
        "apart):\n\n"
        "| phase |");
    for (const result& r : results) std::printf(" %s |", trainer::to_string(r.precision));
    std::printf("\n|---|");
    for (std::size_t i = 0; i < results.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (std::size_t ph = 0; ph < trainer::cuda::phase_count; ++ph) {
      std::printf("| %s |", trainer::cuda::phase_name(trainer::cuda::phase(ph)));
      for (const result& r : results) std::printf(" %.1f |", r.phase_ms[ph]);
      std::printf("\n");
    }
    if (o.trace_steps > 0) {
      const std::optional<std::string> refused = trace_refusal();
      for (result& r : results) {
        if (refused) {
          std::printf("bench_trainer: %s: kernel trace: not run: %s\n", trainer::to_string(r.precision),
                      refused->c_str());
        } else {
#if FP8_BENCH_CUPTI
          trace_kernels(o, *host, tokens, r);
#endif
        }
        std::fflush(stdout);
      }
    }
    // The kernels, the longest of each precision printed (all of them in kernels.csv).
    std::ostringstream kernels, timeline;
    kernels << "precision,kernel,calls_per_step,ms_per_step\n";
    timeline << "precision,start_us,duration_us,kernel\n";
    bool traced = false;
    for (const result& r : results) {
      if (!r.kernels) continue;
      traced = true;
      const char* name = trainer::to_string(r.precision);
      kernels << fp8_bench::kernel_csv_lines(name, *r.kernels, o.trace_steps);
      timeline << fp8_bench::timeline_csv_lines(name, *r.kernels);
      const double summed = r.kernels->summed_nanoseconds();
      std::printf(
          "\n%s: the longest kernels per optimizer step (CUPTI trace; share of the executions' summed "
          "time):\n\n"
          "| kernel | calls | ms | share |\n|---|---|---|---|\n",
          name);
      const std::vector<fp8_bench::kernel_time> rows = r.kernels->by_time();
      for (std::size_t i = 0; i < rows.size() && i < printed_kernels; ++i) {
        std::printf("| %s | %.0f | %.2f | %.1f%% |\n", rows[i].name.c_str(),
                    double(rows[i].calls) / o.trace_steps, rows[i].nanoseconds / 1e6 / o.trace_steps,
                    summed > 0 ? 100.0 * rows[i].nanoseconds / summed : 0.0);
      }
    }
    if (traced) {
      write_file(o.out, "/kernels.csv", kernels.str());
      write_file(o.out, "/timeline.csv", timeline.str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_trainer: error: %s\n", e.what());
    return 1;
  }
  return failures > 0 ? 1 : 0;
}

// The command line (CLI11) and the run.
#include "app.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "checkpoint_model.hpp"
#include "data.hpp"
#include "engine.hpp"
#include "export.hpp"
#include "pipeline.hpp"
#include "prompt.hpp"

#ifndef FP8_GENERATE_DEFAULT_DATA_DIR
#define FP8_GENERATE_DEFAULT_DATA_DIR "/usr/share/games/fortunes"
#endif

namespace generate {

namespace {

// An option that takes one of `choices` by name (CLI11 refuses anything else, listing the names).
template <class Enum>
CLI::Option* add_choice(CLI::App& app, const std::string& name, Enum& target,
                        const std::map<std::string, Enum>& choices, const std::string& help) {
  std::vector<std::string> names;
  std::string current;
  for (const auto& [key, value] : choices) {
    names.push_back(key);
    if (value == target) current = key;
  }
  return app
      .add_option_function<std::string>(
          name, [&target, choices](const std::string& v) { target = choices.at(v); }, help)
      ->check(CLI::IsMember(names))
      ->default_str(current);
}

std::string mib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f MiB", double(bytes) / (1024.0 * 1024.0));
  return text;
}

void write_report(const std::string& path, const nlohmann::json& report) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    if (!file) throw std::runtime_error("cannot write the report '" + temporary + "'");
    file << report.dump(2) << "\n";
    if (!file.flush()) throw std::runtime_error("writing the report '" + temporary + "' failed");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw std::runtime_error("cannot rename '" + temporary + "' to '" + path + "'");
  }
}

}  // namespace

int parse_command_line(int argc, const char* const* argv, generate_options& o, bool& run, std::ostream& out,
                       std::ostream& log) {
  CLI::App app{
      "fp8_generate: FP8 post-training quantization, evaluation and text generation for fp8_trainer "
      "checkpoints"};
  app.add_option("--checkpoint,-c", o.checkpoint,
                 "checkpoint written by fp8_trainer (e.g. runs/fp8/final.safetensors)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--data", o.data_file,
                 "text file, or directory of fortune cookie files, for calibration and validation (default: "
                 "the fortunes the trainer uses); read as fp8_trainer --data reads it")
      ->check(CLI::ExistingPath);
  add_choice(app, "--weights", o.quant.weights,
             {{"bf16", weight_mode::bf16},
              {"fp8-tensor", weight_mode::fp8_tensor},
              {"fp8-channel", weight_mode::fp8_channel}},
             "linear weights: bf16, fp8-tensor (one scale) or fp8-channel (one scale per output row)");
  add_choice(app, "--activations", o.quant.activations,
             {{"bf16", activation_mode::bf16},
              {"static", activation_mode::static_scale},
              {"dynamic", activation_mode::dynamic}},
             "linear inputs: bf16, static (calibrated per-tensor scale) or dynamic (per-token scale)");
  add_choice(app, "--kv-cache", o.quant.kv, {{"bf16", kv_mode::bf16}, {"fp8", kv_mode::fp8}},
             "KV cache: bf16 or fp8 (E4M3)");
  add_choice(app, "--kv-scales", o.quant.kv_scales,
             {{"per-head", fp8::inference::kv_scale_granularity::per_head},
              {"per-tensor", fp8::inference::kv_scale_granularity::per_tensor}},
             "FP8 KV cache scales: one per (layer, head) or one per layer");
  add_choice(app, "--calibration", o.quant.method,
             {{"max", fp8::inference::calibration_method::max},
              {"percentile", fp8::inference::calibration_method::percentile},
              {"mse", fp8::inference::calibration_method::mse}},
             "static activation scales from the max, a percentile, or the MSE-optimal clip of |x|");
  app.add_option("--percentile", o.quant.percentile,
                 "fraction of |x| below the clip for --calibration percentile")
      ->check(CLI::Range(0.5, 1.0))
      ->capture_default_str();
  app.add_option("--calibration-batches", o.calibration_batches, "training batches to calibrate on")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--batch", o.batch, "sequences per calibration / validation batch")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--eval-batches", o.eval_batches, "validation batches (0: no evaluation)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--prompt,-p", o.prompt, "generate text after this UTF-8 prompt (streamed to stdout)");
  app.add_option("--tokens,-n", o.tokens, "bytes to generate")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--temperature", o.sampling.temperature, "sampling temperature (0: greedy)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_option("--top-k", o.sampling.top_k, "sample among the k likeliest bytes (0: all)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  app.add_option("--top-p", o.sampling.top_p,
                 "sample among the likeliest bytes holding this probability (1: all)")
      ->check(CLI::Range(1e-6, 1.0))
      ->capture_default_str();
  app.add_option("--seed", o.sampling.seed, "seed of sampling and of the calibration batches")
      ->capture_default_str();
  app.add_option("--save", o.save_path,
                 "write the quantized model here (safetensors, FP8 tensors typed F8_E4M3)");
  app.add_option("--report", o.report_path, "write a JSON summary (losses, memory, speed) here");
  app.add_option("--threads", o.threads, "threads (0: as many as OpenMP offers)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    run = false;
    std::ostringstream message, error;
    const int code = app.exit(e, message, error);
    out << message.str();  // --help
    log << error.str();
    return code;
  }
  o.has_prompt = app.count("--prompt") > 0;
  run = true;
  return 0;
}

void run_generate(const generate_options& o, std::ostream& out, std::ostream& log) {
  o.quant.validate();
#ifdef _OPENMP
  if (o.threads > 0) omp_set_num_threads(o.threads);
#endif
  const checkpoint_model model = load_checkpoint_model(o.checkpoint);
  const model_shape& s = model.shape;
  std::vector<std::int32_t> prompt;
  if (o.has_prompt) prompt = prompt_tokens(o.prompt, s.context);  // before any work or output
  log << "model:      transformer d_model " << s.channels << ", " << s.layers << " layers, " << s.heads
      << " heads, SwiGLU " << s.hidden << ", context " << s.context << " (" << o.checkpoint << ")\n";
  log << "quantized:  " << o.quant.describe() << "; embedding, norms and LM head stay BF16\n";

  const bool needs_text = o.quant.needs_calibration() || o.eval_batches > 0;
  trainer::text_data text;
  if (needs_text) {
    text = o.data_file.empty() ? trainer::load_fortunes(FP8_GENERATE_DEFAULT_DATA_DIR)
                               : trainer::load_text(o.data_file);
    char fingerprint[17];
    std::snprintf(fingerprint, sizeof(fingerprint), "%016llx",
                  static_cast<unsigned long long>(text.fingerprint));
    const auto it = model.metadata.find("data.fingerprint");
    if (it != model.metadata.end() && it->second != fingerprint) {
      log << "warning:    the checkpoint was trained on other text than " << text.description
          << "; calibration and validation use this text anyway\n";
    }
  }
  calibration_scales scales;
  if (o.quant.needs_calibration()) {
    scales = calibrate(model, o.quant, text.train, o.calibration_batches, o.batch, o.sampling.seed);
    log << "calibrated: " << o.calibration_batches << " batches of " << o.batch << " x " << s.context
        << " training bytes\n";
  }
  engine net(model, o.quant, o.quant.needs_calibration() ? &scales : nullptr);
  const std::size_t linear = net.linear_weight_bytes(), other = net.other_weight_bytes(),
                    kv = net.kv_cache_bytes();
  log << "memory:     linear weights " << mib(linear) << ", other weights " << mib(other) << ", KV cache "
      << mib(kv) << " (one sequence of " << s.context << " tokens)\n";

  nlohmann::json report;
  report["checkpoint"] = o.checkpoint;
  report["weights"] = to_string(o.quant.weights);
  report["activations"] = to_string(o.quant.activations);
  report["kv_cache"] = to_string(o.quant.kv);
  report["kv_scales"] = fp8::inference::to_string(o.quant.kv_scales);
  report["calibration"] = fp8::inference::to_string(o.quant.method);
  report["linear_weight_bytes"] = linear;
  report["other_weight_bytes"] = other;
  report["kv_cache_bytes"] = kv;
  if (o.eval_batches > 0) {
    const eval_result r = evaluate(net, text.validation, o.batch, o.eval_batches);
    log << "validation: loss " << r.loss << " nats/byte, perplexity " << std::exp(r.loss) << " over "
        << r.tokens << " bytes (" << double(r.tokens) / r.seconds << " bytes/s)\n";
    report["val_loss"] = r.loss;
    report["perplexity"] = std::exp(r.loss);
    report["eval_tokens"] = r.tokens;
    report["eval_tokens_per_second"] = double(r.tokens) / r.seconds;
  }
  if (o.quant.kv == kv_mode::fp8) report["kv_saturated_appends"] = net.kv_saturated_appends();
  if (!o.save_path.empty()) {
    write_quantized_model(o.save_path, net, model);
    log << "saved:      " << o.save_path << "\n";
  }
  if (o.has_prompt) {
    sampler pick(o.sampling);
    out << o.prompt;
    out.flush();
    const generation_result g = generate_text(net, pick, prompt, o.tokens, &out);
    out << "\n";
    out.flush();
    const double rate = double(g.tokens.size()) / g.seconds;
    log << "generated:  " << g.tokens.size() << " bytes at " << rate << " bytes/s (prompt of "
        << prompt.size() << " bytes in " << g.prompt_seconds << " s)\n";
    report["generated_tokens"] = g.tokens.size();
    report["generate_tokens_per_second"] = rate;
  }
  if (!o.report_path.empty()) write_report(o.report_path, report);
}

int generate_main(int argc, const char* const* argv, std::ostream& out, std::ostream& log) {
  generate_options options;
  bool run = false;
  const int code = parse_command_line(argc, argv, options, run, out, log);
  if (!run) return code;
  try {
    run_generate(options, out, log);
  } catch (const std::exception& e) {
    log << "fp8_generate: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace generate

// fp8_generate's command line and what it runs: load, calibrate, quantize, report memory, evaluate,
// save, generate.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "quant_config.hpp"
#include "sampler.hpp"

namespace generate {

// The command line's default: W8A8 (per-channel FP8 weights, per-token FP8 activations) and an FP8
// KV cache, the configuration servers deploy.
inline quant_config serving_default() {
  quant_config c;
  c.weights = weight_mode::fp8_channel;
  c.activations = activation_mode::dynamic;
  c.kv = kv_mode::fp8;
  return c;
}

struct generate_options {
  std::string checkpoint;
  std::string data_file;  // empty: the default data (Debian's fortunes)
  quant_config quant = serving_default();
  int calibration_batches = 4;
  int batch = 8;
  int eval_batches = 4;  // 0: no evaluation
  std::string prompt;
  bool has_prompt = false;
  int tokens = 200;
  sampling_options sampling;
  std::string save_path;    // quantized safetensors; empty: not written
  std::string report_path;  // JSON summary; empty: not written
  int threads = 0;
};

// Parses the command line (CLI11, with range checks). Returns the exit code and sets `run` false
// when nothing more is to be done (--help, printed to `out`, or an error already printed to `log`).
int parse_command_line(int argc, const char* const* argv, generate_options& options, bool& run,
                       std::ostream& out, std::ostream& log);

// Runs everything the options ask for. Generated text goes to `out`, everything else to `log`.
// Throws (fp8::checkpoint_error, std::invalid_argument, std::runtime_error) with a message for the
// user; it validates the prompt and the output paths' inputs before writing anything.
void run_generate(const generate_options& options, std::ostream& out, std::ostream& log);

// parse_command_line + run_generate with errors printed as "fp8_generate: error: ...": main().
int generate_main(int argc, const char* const* argv, std::ostream& out, std::ostream& log);

}  // namespace generate

// The trainer's command line: every switch, its default, its help text, and the checks that turn a
// bad value into an error message naming the option and what it accepts.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "adamw.hpp"
#include "model.hpp"
#include "precision.hpp"

namespace trainer {

// Where the model trains (--device): the CPU trainer, or the CUDA loop of cuda/trainer_cuda.hpp.
enum class device_kind { cpu, cuda };
inline const char* to_string(device_kind value) { return value == device_kind::cuda ? "cuda" : "cpu"; }

// How attention runs on the GPU (--attention): materialized keeps the T x T probabilities in memory
// (cuBLAS products and a softmax kernel; the CPU trainer's algorithm, and the only one of FP32 runs);
// fused is cuDNN's flash attention (BF16, nothing T x T in memory); automatic takes fused where the
// run's attention is BF16 and this build and device have it, else materialized.
enum class attention_kernel { automatic, materialized, fused };
inline const char* to_string(attention_kernel value) {
  switch (value) {
    case attention_kernel::materialized: return "materialized";
    case attention_kernel::fused: return "fused";
    default: return "auto";
  }
}

struct run_options {
  // What to train.
  model_options model;
  precision base_precision = precision::fp8;
  std::string data_file;  // empty: the default data (Debian's fortunes)
  int batch = 16;         // sequences per optimizer step, over all ranks of a data-parallel run
  int micro_batch = 0;    // sequences per forward/backward pass; 0: --batch / ranks (one pass each)
  long hash_every = 50;   // data parallelism: check every N steps that the ranks' weights agree

  // How long and how fast.
  long steps = 600;
  float learning_rate = 3e-3f;
  long warmup_steps = -1;  // -1: 5% of the steps
  float final_lr_fraction = 0.1f;
  adamw_options adamw;
  float clip_norm = 1.0f;
  unsigned long long seed = 1;
  int threads = 0;  // 0: as many as OpenMP offers
  device_kind device = device_kind::cpu;
  attention_kernel attention = attention_kernel::automatic;  // --device cuda only

  // The FP8 recipe.
  fp8_recipe recipe;
  bool power_of_two_scales = false;
  std::vector<fp8::gemm_kind> current_scaling_for;  // GEMM classes switched to current scaling

  // Debugging switches.
  std::array<gemm_mode, gemm_kind_count> linear_modes{gemm_mode::fp8, gemm_mode::fp8, gemm_mode::fp8};
  std::vector<std::string> bf16_layers;  // unit indices or "head", resolved against the model
  bool first_last_bf16 = false;
  bool fp8_head = false;  // the LM head stays in BF16 unless asked (DeepSeek-V3, Megatron-Core)
  long shadow_every = 0;
  long stats_every = 0;
  // --device cuda: the linear layers take the amaxes of X and dY from the kernels that wrote them
  // where they would otherwise read the tensor for it; --no-producer-amaxes turns that off (the same
  // results, bit for bit: a debugging switch).
  bool producer_amaxes = true;
  // --device cuda: under delayed scaling the kernels that write a linear layer's X or dY (RMSNorm,
  // SwiGLU, the staging copies of float operands) write the layer's FP8 codes where it takes them,
  // instead of BF16 for the layer to cast; --no-producer-fp8 turns that off (the same results, bit
  // for bit: a debugging switch).
  bool producer_fp8 = true;
  // --device cuda: the GEMM classes (index: fp8::gemm_kind) whose FP8 products use Hopper's fast
  // accumulation (--fast-accumulation; Transformer Engine's default: fprop only). The CPU's emulated
  // products accumulate exactly in FP32 and refuse any other choice.
  std::array<bool, gemm_kind_count> fast_accumulation{true, false, false};

  // Evaluation, output, checkpoints.
  long eval_every = 50;
  int eval_batches = 16;
  std::string out_dir;     // empty: runs/<derived name>
  bool overwrite = false;  // replace a run already in out_dir
  long save_every = 0;
  bool save_final = true;
  std::string resume_from;
  bool reset_scaling = false;
  bool progress_bar = true;
  long log_every = 10;  // progress lines when stderr is not a terminal

  bool show_help = false;
  bool show_version = false;
  std::string command_line;  // as given, stored in checkpoints for reference
};

// Parses argv (GNU conventions: --steps 5 or --steps=5; the last of a repeated option wins; -h or
// --help anywhere wins over every error). Checks every value against the range its destination
// holds and the run can use, the options against each other, and the memory the model and batch
// need against the machine's, all before anything large is allocated. Throws std::invalid_argument
// with a message naming the bad option (and ending in a hint to see --help).
run_options parse_options(int argc, const char* const* argv);

// The --help text.
std::string help_text();
// The --version line.
std::string version_text();

// A short name for the run, used for the default output directory, e.g.
// "transformer-fp8-delayed-lr0.003-600steps-fortunes-s1": model, precision, recipe, the debugging
// GEMM modes that differ from fp8, learning rate, steps, data (the file's stem) and seed.
std::string run_name(const run_options& options);

// The precision policy of these options for a model with `unit_count` precision units; resolves
// --bf16-layers and --first-last-bf16 (throws std::invalid_argument on an unknown unit).
precision_policy make_policy(const run_options& options, const model& m);

}  // namespace trainer

// Command-line parsing: a table of options, each with its help text and the code that applies it.
#include "options.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace trainer {

namespace {

// Model shape values given on the command line; the rest take the chosen model's defaults.
struct shape_overrides {
  std::optional<int> context, channels, layers, heads, hidden, window;
};

struct parse_state {
  run_options options;
  shape_overrides shape;
};

struct option_def {
  const char* name;
  const char* value;  // nullptr for a flag
  const char* help;
  std::function<void(parse_state&, const std::string&)> apply;
};

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument(message + " (see --help)"); }

long parse_integer(const std::string& option, const std::string& text, long minimum) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) fail(option + " expects an integer; got '" + text + "'");
  if (value < minimum) fail(option + " must be at least " + std::to_string(minimum) + "; got " + text);
  return value;
}

float parse_float(const std::string& option, const std::string& text, float minimum) {
  char* end = nullptr;
  errno = 0;
  const float value = std::strtof(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !(value == value)) {
    fail(option + " expects a number; got '" + text + "'");
  }
  if (value < minimum) fail(option + " must be at least " + std::to_string(minimum) + "; got " + text);
  return value;
}

template <class Enum>
Enum parse_choice(const std::string& option, const std::string& text,
                  std::initializer_list<std::pair<const char*, Enum>> choices) {
  std::string names;
  for (const auto& choice : choices) {
    if (text == choice.first) return choice.second;
    names += names.empty() ? "" : ", ";
    names += choice.first;
  }
  fail(option + " must be one of " + names + "; got '" + text + "'");
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

gemm_mode parse_class_mode(const std::string& option, const std::string& text) {
  return parse_choice<gemm_mode>(option, text,
                                 {{"fp8", gemm_mode::fp8}, {"fake", gemm_mode::fake_fp8}, {"bf16", gemm_mode::bf16}});
}

const std::vector<option_def>& option_table() {
  static const std::vector<option_def> table = {
      // --- What to train ---
      {"--model", "KIND", "transformer (LLaMA-style, default) or mlp (byte-window MLP)",
       [](parse_state& s, const std::string& v) {
         s.options.model.kind = parse_choice<std::string>("--model", v, {{"transformer", "transformer"}, {"mlp", "mlp"}});
       }},
      {"--precision", "P", "fp32, bf16 (BF16 weights/activations, FP32 master weights) or fp8 (bf16 + FP8 "
                           "linear-layer GEMMs); default fp8",
       [](parse_state& s, const std::string& v) {
         s.options.base_precision = parse_choice<precision>(
             "--precision", v, {{"fp32", precision::fp32}, {"bf16", precision::bf16}, {"fp8", precision::fp8}});
       }},
      {"--data", "FILE", "train on this text file (default: the fortune cookies of Debian's 'fortunes' package); "
                         "the last 10% of each file is validation text",
       [](parse_state& s, const std::string& v) { s.options.data_file = v; }},
      {"--batch", "B", "sequences per step (default 16)",
       [](parse_state& s, const std::string& v) { s.options.batch = int(parse_integer("--batch", v, 1)); }},
      {"--context", "T", "bytes per sequence (default 128)",
       [](parse_state& s, const std::string& v) { s.shape.context = int(parse_integer("--context", v, 2)); }},
      {"--d-model", "C", "transformer width (default 128); MLP byte-embedding width (default 32)",
       [](parse_state& s, const std::string& v) { s.shape.channels = int(parse_integer("--d-model", v, 2)); }},
      {"--layers", "L", "transformer blocks (default 4); MLP hidden layers (default 2)",
       [](parse_state& s, const std::string& v) { s.shape.layers = int(parse_integer("--layers", v, 1)); }},
      {"--heads", "H", "attention heads (default 4)",
       [](parse_state& s, const std::string& v) { s.shape.heads = int(parse_integer("--heads", v, 1)); }},
      {"--hidden", "F", "SwiGLU width (default 384); MLP hidden width (default 512)",
       [](parse_state& s, const std::string& v) { s.shape.hidden = int(parse_integer("--hidden", v, 1)); }},
      {"--window", "W", "MLP: bytes of context per prediction (default 8)",
       [](parse_state& s, const std::string& v) { s.shape.window = int(parse_integer("--window", v, 1)); }},
      // --- Optimisation ---
      {"--steps", "N", "optimizer steps (default 600)",
       [](parse_state& s, const std::string& v) { s.options.steps = parse_integer("--steps", v, 1); }},
      {"--lr", "X", "peak learning rate (default 3e-3)",
       [](parse_state& s, const std::string& v) { s.options.learning_rate = parse_float("--lr", v, 0.0f); }},
      {"--warmup", "N", "warmup steps (default 5% of --steps)",
       [](parse_state& s, const std::string& v) { s.options.warmup_steps = parse_integer("--warmup", v, 0); }},
      {"--final-lr", "F", "learning rate at the last step, as a fraction of the peak (default 0.1)",
       [](parse_state& s, const std::string& v) { s.options.final_lr_fraction = parse_float("--final-lr", v, 0.0f); }},
      {"--weight-decay", "X", "AdamW weight decay of matrices (default 0.1)",
       [](parse_state& s, const std::string& v) { s.options.adamw.weight_decay = parse_float("--weight-decay", v, 0.0f); }},
      {"--clip", "X", "clip the global gradient norm to X; 0 disables (default 1)",
       [](parse_state& s, const std::string& v) { s.options.clip_norm = parse_float("--clip", v, 0.0f); }},
      {"--seed", "S", "seed of the initial weights and the data order (default 1)",
       [](parse_state& s, const std::string& v) { s.options.seed = (unsigned long long)parse_integer("--seed", v, 0); }},
      {"--threads", "N", "threads for GEMMs and attention (default: all cores)",
       [](parse_state& s, const std::string& v) { s.options.threads = int(parse_integer("--threads", v, 1)); }},
      // --- FP8 recipe ---
      {"--scaling", "R", "delayed (scales from an amax history, default) or current (each tensor's own amax)",
       [](parse_state& s, const std::string& v) {
         s.options.recipe.recipe = parse_choice<scaling_recipe>(
             "--scaling", v, {{"delayed", scaling_recipe::delayed}, {"current", scaling_recipe::current}});
       }},
      {"--amax-history", "N", "delayed scaling: amax history length (default 1024)",
       [](parse_state& s, const std::string& v) {
         s.options.recipe.amax_history_length = int(parse_integer("--amax-history", v, 1));
       }},
      {"--amax-algo", "A", "delayed scaling: max (over the history, default) or most_recent",
       [](parse_state& s, const std::string& v) {
         s.options.recipe.algorithm = parse_choice<amax_algorithm>(
             "--amax-algo", v, {{"max", amax_algorithm::max}, {"most_recent", amax_algorithm::most_recent}});
       }},
      {"--margin", "M", "scale = fp8_max / amax / 2^M (default 0)",
       [](parse_state& s, const std::string& v) { s.options.recipe.margin = int(parse_integer("--margin", v, 0)); }},
      {"--format", "F", "hybrid (E4M3 forward, E5M2 gradients; default) or e4m3 (E4M3 everywhere)",
       [](parse_state& s, const std::string& v) {
         s.options.recipe.formats =
             parse_choice<format_mix>("--format", v, {{"hybrid", format_mix::hybrid}, {"e4m3", format_mix::e4m3}});
       }},
      {"--granularity", "G", "tensor (default), row, block (1x128 tiles for activations and gradients, "
                             "128x128 blocks for weights) or mx (1x32 blocks, E8M0 scales); all but tensor "
                             "need --scaling current",
       [](parse_state& s, const std::string& v) {
         s.options.recipe.scale_granularity = parse_choice<granularity>(
             "--granularity", v,
             {{"tensor", granularity::tensor},
              {"row", granularity::row},
              {"block", granularity::block},
              {"mx", granularity::mx}});
       }},
      {"--pow2-scales", nullptr, "round scales down to powers of two (block granularity always does)",
       [](parse_state& s, const std::string&) { s.options.power_of_two_scales = true; }},
      {"--current-scaling-for", "LIST", "current scaling for these GEMM classes only, e.g. dgrad or fprop,wgrad "
                                        "(the rest keep --scaling)",
       [](parse_state& s, const std::string& v) {
         s.options.current_scaling_for.clear();
         for (const std::string& item : split_list(v)) {
           s.options.current_scaling_for.push_back(parse_choice<gemm_class>(
               "--current-scaling-for", item,
               {{"fprop", gemm_class::fprop}, {"dgrad", gemm_class::dgrad}, {"wgrad", gemm_class::wgrad}}));
         }
       }},
      // --- Debugging switches ---
      {"--fprop", "M", "fprop GEMMs of an fp8 run: fp8 (default), fake (quantize and dequantize, GEMM in BF16) or bf16",
       [](parse_state& s, const std::string& v) { s.options.linear_modes[0] = parse_class_mode("--fprop", v); }},
      {"--dgrad", "M", "dgrad GEMMs: fp8, fake or bf16",
       [](parse_state& s, const std::string& v) { s.options.linear_modes[1] = parse_class_mode("--dgrad", v); }},
      {"--wgrad", "M", "wgrad GEMMs: fp8, fake or bf16",
       [](parse_state& s, const std::string& v) { s.options.linear_modes[2] = parse_class_mode("--wgrad", v); }},
      {"--fake-quant", nullptr, "fake quantization for every GEMM class still in fp8 (cast to FP8 and back, GEMM in BF16)",
       [](parse_state& s, const std::string&) {
         for (gemm_mode& mode : s.options.linear_modes) {
           if (mode == gemm_mode::fp8) mode = gemm_mode::fake_fp8;
         }
       }},
      {"--bf16-layers", "LIST", "keep these layers in BF16: transformer block indices or 'head' (e.g. 0,3,head); "
                                "MLP layer indices (the head is the last)",
       [](parse_state& s, const std::string& v) { s.options.bf16_layers = split_list(v); }},
      {"--fp8-head", nullptr, "run the LM head (the last linear layer) in FP8 too; by default it stays in BF16, "
                              "as DeepSeek-V3 and Megatron-Core keep the output layer",
       [](parse_state& s, const std::string&) { s.options.fp8_head = true; }},
      {"--first-last-bf16", nullptr, "keep the first and last transformer blocks (MLP: first and last layers) in BF16",
       [](parse_state& s, const std::string&) { s.options.first_last_bf16 = true; }},
      {"--shadow-every", "N", "every N steps also compute the loss of the same batch in BF16 and log the difference",
       [](parse_state& s, const std::string& v) { s.options.shadow_every = parse_integer("--shadow-every", v, 0); }},
      {"--stats-every", "N", "every N steps log amax, scale, saturated and flushed-to-zero fractions of every GEMM "
                             "operand to stats.csv",
       [](parse_state& s, const std::string& v) { s.options.stats_every = parse_integer("--stats-every", v, 0); }},
      // --- Evaluation, output, checkpoints ---
      {"--eval-every", "N", "validation loss every N steps and at the end (default 50)",
       [](parse_state& s, const std::string& v) { s.options.eval_every = parse_integer("--eval-every", v, 1); }},
      {"--eval-batches", "N", "validation batches (default 16)",
       [](parse_state& s, const std::string& v) { s.options.eval_batches = int(parse_integer("--eval-batches", v, 1)); }},
      {"--out", "DIR", "output directory for log.csv, stats.csv and checkpoints (default runs/<run name>)",
       [](parse_state& s, const std::string& v) { s.options.out_dir = v; }},
      {"--save-every", "N", "write a checkpoint every N steps (DIR/step_<N>.safetensors)",
       [](parse_state& s, const std::string& v) { s.options.save_every = parse_integer("--save-every", v, 0); }},
      {"--no-final-save", nullptr, "do not write DIR/final.safetensors at the end",
       [](parse_state& s, const std::string&) { s.options.save_final = false; }},
      {"--resume", "FILE", "continue from a checkpoint (any precision may continue any other)",
       [](parse_state& s, const std::string& v) { s.options.resume_from = v; }},
      {"--reset-scaling", nullptr, "with --resume: start the FP8 scaling state afresh instead of loading it",
       [](parse_state& s, const std::string&) { s.options.reset_scaling = true; }},
      {"--no-progress", nullptr, "no progress bar; print a line every --log-every steps",
       [](parse_state& s, const std::string&) { s.options.progress_bar = false; }},
      {"--log-every", "N", "steps between progress lines without a progress bar (default 10)",
       [](parse_state& s, const std::string& v) { s.options.log_every = parse_integer("--log-every", v, 1); }},
      {"--help", nullptr, "show this help", [](parse_state& s, const std::string&) { s.options.show_help = true; }},
  };
  return table;
}

void apply_shape_defaults(parse_state& s) {
  model_options& m = s.options.model;
  const bool is_mlp = m.kind == "mlp";
  m.context = s.shape.context.value_or(128);
  m.channels = s.shape.channels.value_or(is_mlp ? 32 : 128);
  m.layers = s.shape.layers.value_or(is_mlp ? 2 : 4);
  m.heads = s.shape.heads.value_or(4);
  m.hidden = s.shape.hidden.value_or(is_mlp ? 512 : 384);
  m.window = s.shape.window.value_or(8);
}

void check_consistency(const run_options& o) {
  if (o.recipe.scale_granularity != granularity::tensor && o.recipe.recipe == scaling_recipe::delayed) {
    fail(std::string("--granularity ") + to_string(o.recipe.scale_granularity) +
         " needs --scaling current: delayed scaling keeps one amax history per tensor");
  }
  if (o.recipe.scale_granularity == granularity::mx && o.recipe.margin != 0) {
    fail("--margin does not apply to --granularity mx: OCP MX scales follow a fixed rule");
  }
  if (o.fp8_head && std::find(o.bf16_layers.begin(), o.bf16_layers.end(), "head") != o.bf16_layers.end()) {
    fail("--fp8-head and --bf16-layers head contradict each other");
  }
  if (o.reset_scaling && o.resume_from.empty()) fail("--reset-scaling only applies together with --resume FILE");
  if (o.warmup_steps >= o.steps) {
    fail("--warmup " + std::to_string(o.warmup_steps) + " must be smaller than --steps " + std::to_string(o.steps));
  }
  if (o.final_lr_fraction > 1.0f) fail("--final-lr is a fraction of the peak rate, at most 1");
}

}  // namespace

run_options parse_options(int argc, const char* const* argv) {
  parse_state state;
  for (int i = 0; i < argc; ++i) state.options.command_line += (i > 0 ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const option_def* match = nullptr;
    for (const option_def& def : option_table()) {
      if (arg == def.name) match = &def;
    }
    if (match == nullptr) fail("unknown option '" + arg + "'");
    std::string value;
    if (match->value != nullptr) {
      if (i + 1 >= argc) fail(std::string("option ") + match->name + " needs a value " + match->value);
      value = argv[++i];
    }
    match->apply(state, value);
  }
  apply_shape_defaults(state);
  if (!state.options.show_help) check_consistency(state.options);
  return state.options;
}

std::string help_text() {
  std::ostringstream out;
  out << "fp8_trainer: trains a byte-level transformer or MLP on the CPU in FP32, BF16 or emulated FP8.\n\n"
         "Usage: fp8_trainer [options]\n"
         "  fp8_trainer                          the FP8 transformer (HYBRID, delayed scaling), default data\n"
         "  fp8_trainer --precision bf16 --out runs/bf16    the BF16 reference\n"
         "  fp8_trainer --resume runs/fp8/final.safetensors --precision bf16 --steps 900\n"
         "                                       continue an FP8 run in BF16\n\n"
         "Options:\n";
  constexpr std::size_t help_column = 28, line_width = 100;
  for (const option_def& def : option_table()) {
    std::string line = std::string("  ") + def.name + (def.value != nullptr ? std::string(" ") + def.value : "");
    if (line.size() + 1 > help_column) {
      out << line << "\n";
      line.clear();
    }
    // Word-wrap the help text into the column.
    std::istringstream words(def.help);
    std::string word;
    bool first = true;
    while (words >> word) {
      if (!first && line.size() + 1 + word.size() > line_width) {
        out << line << "\n";
        line.clear();
        first = true;
      }
      if (line.size() < help_column) line.resize(help_column, ' ');
      line += (first ? "" : " ") + word;
      first = false;
    }
    out << line << "\n";
  }
  out << "\nOutputs: DIR/log.csv (step, training and validation loss, tokens/s, ...), DIR/stats.csv\n"
         "with --stats-every, DIR/final.safetensors. Plot runs with examples/trainer/scripts/plot_loss.py.\n"
         "See docs/trainer.md and docs/debugging.md.\n";
  return out.str();
}

std::string run_name(const run_options& o) {
  std::string name = o.model.kind + "-" + to_string(o.base_precision);
  if (o.base_precision == precision::fp8) {
    name += std::string("-") + to_string(o.recipe.recipe);
    if (o.recipe.scale_granularity != granularity::tensor) name += std::string("-") + to_string(o.recipe.scale_granularity);
    for (int c = 0; c < gemm_class_count; ++c) {
      if (o.linear_modes[std::size_t(c)] != gemm_mode::fp8) {
        name += std::string("-") + to_string(gemm_class(c)) + "_" + to_string(o.linear_modes[std::size_t(c)]);
      }
    }
  }
  return name + "-s" + std::to_string(o.seed);
}

precision_policy make_policy(const run_options& o, const model& m) {
  precision_policy policy;
  policy.base = o.base_precision;
  policy.linear_modes = o.linear_modes;
  policy.recipe = o.recipe;
  policy.bf16_units.assign(std::size_t(m.unit_count()), false);
  const int last_unit = m.unit_count() - 1;
  const bool is_transformer = m.unit_name(last_unit) == "head";
  for (const std::string& item : o.bf16_layers) {
    if (item == "head") {
      policy.bf16_units[std::size_t(last_unit)] = true;
      continue;
    }
    char* end = nullptr;
    const long unit = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || unit < 0 || unit > last_unit) {
      fail("--bf16-layers: '" + item + "' is not a layer of this model (0.." + std::to_string(last_unit) +
           (is_transformer ? " or head" : "") + ")");
    }
    policy.bf16_units[std::size_t(unit)] = true;
  }
  if (!o.fp8_head) policy.bf16_units[std::size_t(last_unit)] = true;
  if (o.first_last_bf16) {
    // Megatron-Core's --first-last-layers-bf16 keeps the first and last transformer blocks; the MLP's
    // layers are its blocks (the last one is the head).
    const int last_block = is_transformer ? last_unit - 1 : last_unit;
    policy.bf16_units[0] = true;
    policy.bf16_units[std::size_t(last_block)] = true;
  }
  return policy;
}

}  // namespace trainer

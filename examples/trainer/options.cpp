// Command-line parsing on CLI11: CLI11 handles the syntax (--steps 5, --steps=5, -h, unknown and
// repeated options); each option is declared once below with its help text and the check of its
// value against the range its destination can hold and the run can use.
#include "options.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <CLI/CLI.hpp>

#include <fp8/version.hpp>

#include "memory_estimate.hpp"

namespace trainer {

namespace {

// Bounds of the model shape: generous for a CPU trainer, small enough that products of two of them
// (rows x columns of a GEMM, batch x context tokens) stay far inside int and size_t.
constexpr long max_extent = 65536;
constexpr long max_layers = 1024;
constexpr long max_hidden = 1L << 20;
constexpr long max_tokens_per_batch = 1L << 26;  // --batch x --context
constexpr long max_steps = 1'000'000'000;        // steps x tokens per batch fits a long
constexpr long max_threads = 4096;
constexpr long max_history = 1L << 20;
constexpr long max_margin = 64;  // 2^-64 scales flush every value to zero already
constexpr long max_period = std::numeric_limits<long>::max();

// Model shape values given on the command line; the rest take the chosen model's defaults.
struct shape_overrides {
  std::optional<int> context, channels, layers, heads, hidden, window;
};

struct parse_state {
  run_options options;
  shape_overrides shape;
  bool fake_quant = false;
  bool no_producer_amaxes = false;
  bool no_producer_fp8 = false;
  std::vector<std::string> current_scaling_for;
  std::vector<std::string> fast_accumulation{"fprop"};
};

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument(message + " (see --help)"); }

// An integer of type T in [minimum, maximum]; text that is not a whole number in T's range, or
// outside the bounds, is an error naming the option.
template <class T>
T parse_integer(const std::string& option, const std::string& text, long long minimum,
                unsigned long long maximum) {
  static_assert(std::is_integral<T>::value, "an integer option needs an integer destination");
  // The declared bounds never exceed what T holds.
  maximum = std::min<unsigned long long>(maximum, (unsigned long long)std::numeric_limits<T>::max());
  minimum =
      std::max<long long>(minimum, std::is_signed<T>::value ? (long long)std::numeric_limits<T>::min() : 0);
  const std::string bounds = " from " + std::to_string(minimum) + " to " + std::to_string(maximum);
  const bool negative = !text.empty() && text[0] == '-';
  char* end = nullptr;
  errno = 0;
  // strtoull would accept "-1" as a huge number: signed text goes through strtoll.
  const long long as_signed = negative ? std::strtoll(text.c_str(), &end, 10) : 0;
  const unsigned long long as_unsigned = negative ? 0 : std::strtoull(text.c_str(), &end, 10);
  const bool whole = !text.empty() && !std::isspace(static_cast<unsigned char>(text[0])) && *end == '\0';
  if (!whole) fail(option + " expects a whole number" + bounds + "; got '" + text + "'");
  const bool in_range =
      errno == 0 &&
      (negative ? as_signed >= minimum
                : as_unsigned <= maximum && (minimum <= 0 || as_unsigned >= (unsigned long long)minimum));
  if (!in_range) fail(option + " must be" + bounds + "; got " + text);
  return negative ? T(as_signed) : T(as_unsigned);
}

// A finite float in [minimum, maximum].
float parse_float(const std::string& option, const std::string& text, float minimum, float maximum) {
  char* end = nullptr;
  errno = 0;
  const float value = std::strtof(text.c_str(), &end);
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || *end != '\0' || errno != 0 ||
      !std::isfinite(value)) {
    fail(option + " expects a finite number; got '" + text + "'");
  }
  if (value < minimum || value > maximum) {
    std::ostringstream bounds;
    bounds << option << " must be from " << minimum << " to " << maximum << "; got " << text;
    fail(bounds.str());
  }
  return value;
}

// One of `values`, named by to_string(value).
template <class Enum>
Enum parse_choice(const std::string& option, const std::string& text, const std::vector<Enum>& values) {
  std::string names;
  for (Enum value : values) {
    if (text == to_string(value)) return value;
    names += names.empty() ? "" : ", ";
    names += to_string(value);
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

// Declares options on a CLI::App, each with the conversion and range check of its value; the
// targets must outlive the parse.
class option_declarations {
 public:
  explicit option_declarations(CLI::App& app) : app_(app) {}

  template <class T>
  void integer(const char* name, const char* value, T& target, long long minimum, unsigned long long maximum,
               const char* help) {
    add(name, value, help, [&target, name, minimum, maximum](const std::string& v) {
      target = parse_integer<T>(name, v, minimum, maximum);
    });
  }
  void shape(const char* name, const char* value, std::optional<int>& target, long minimum, long maximum,
             const char* help) {
    add(name, value, help, [&target, name, minimum, maximum](const std::string& v) {
      target = parse_integer<int>(name, v, minimum, (unsigned long long)maximum);
    });
  }
  void number(const char* name, const char* value, float& target, float minimum, float maximum,
              const char* help) {
    add(name, value, help, [&target, name, minimum, maximum](const std::string& v) {
      target = parse_float(name, v, minimum, maximum);
    });
  }
  template <class Enum>
  void choice(const char* name, const char* value, Enum& target, std::initializer_list<Enum> values,
              const char* help) {
    const std::vector<Enum> list(values);
    add(name, value, help,
        [&target, name, list](const std::string& v) { target = parse_choice(name, v, list); });
  }
  void text(const char* name, const char* value, std::string& target, const char* help) {
    add(name, value, help, [&target](const std::string& v) { target = v; });
  }
  void list(const char* name, const char* value, std::vector<std::string>& target, const char* help) {
    add(name, value, help, [&target](const std::string& v) { target = split_list(v); });
  }
  void flag(const char* name, bool& target, const char* help) {
    app_.add_flag_callback(
        name, [&target] { target = true; }, help);
  }

 private:
  void add(const char* name, const char* value, const char* help,
           std::function<void(const std::string&)> apply) {
    app_.add_option_function<std::string>(name, std::move(apply), help)->type_name(value);
  }

  CLI::App& app_;
};

// Every option of the trainer, in the order --help lists them.
void declare_options(CLI::App& app, parse_state& s) {
  option_declarations o(app);
  run_options& r = s.options;
  // --- What to train ---
  o.text("--model", "KIND", r.model.kind, "transformer (LLaMA-style, default) or mlp (byte-window MLP)");
  o.choice(
      "--precision", "P", r.base_precision, {precision::fp32, precision::bf16, precision::fp8},
      "fp32, bf16 (BF16 weights/activations, FP32 master weights) or fp8 (bf16 + FP8 linear-layer GEMMs); "
      "default fp8");
  o.text("--data", "PATH", r.data_file,
         "train on this text file, or on the fortune cookie files (files with a .dat index beside them) of "
         "this directory, e.g. a copy of the default (default: the fortune cookies of Debian's 'fortunes' "
         "package); the last 10% of each file is validation text");
  o.integer("--batch", "B", r.batch, 1, max_extent,
            "sequences per step (default 16); with mpirun the global batch, split among the ranks");
  o.integer("--micro-batch", "M", r.micro_batch, 0, max_extent,
            "sequences per forward/backward pass; the gradients of a step's passes are summed in order "
            "(default: --batch / ranks, one pass per rank)");
  o.integer("--hash-every", "N", r.hash_every, 0, max_period,
            "with mpirun: check every N steps that all ranks hold the same weights; 0 only at the start "
            "and end (default 50)");
  o.shape("--context", "T", s.shape.context, 2, max_extent, "bytes per sequence (default 128)");
  o.shape("--d-model", "C", s.shape.channels, 2, max_extent,
          "transformer width (default 128); MLP byte-embedding width (default 32)");
  o.shape("--layers", "L", s.shape.layers, 1, max_layers,
          "transformer blocks (default 4); MLP hidden layers (default 2)");
  o.shape("--heads", "H", s.shape.heads, 1, max_extent, "attention heads (default 4)");
  o.shape("--hidden", "F", s.shape.hidden, 1, max_hidden,
          "SwiGLU width (default 384); MLP hidden width (default 512)");
  o.shape("--window", "W", s.shape.window, 1, max_extent, "MLP: bytes of context per prediction (default 8)");
  // --- Optimisation ---
  o.integer("--steps", "N", r.steps, 1, max_steps, "optimizer steps (default 600)");
  o.number("--lr", "X", r.learning_rate, 0.0f, 1e3f, "peak learning rate (default 3e-3)");
  o.integer("--warmup", "N", r.warmup_steps, 0, max_steps, "warmup steps (default 5% of --steps)");
  o.number("--final-lr", "F", r.final_lr_fraction, 0.0f, 1.0f,
           "learning rate at the last step, as a fraction of the peak (default 0.1)");
  o.number("--weight-decay", "X", r.adamw.weight_decay, 0.0f, 1e3f,
           "AdamW weight decay of matrices (default 0.1)");
  o.number("--clip", "X", r.clip_norm, 0.0f, std::numeric_limits<float>::max(),
           "clip the global gradient norm to X; 0 disables (default 1)");
  o.integer("--seed", "S", r.seed, 0, std::numeric_limits<unsigned long long>::max(),
            "seed of the initial weights and the data order (default 1)");
  o.integer("--threads", "N", r.threads, 1, max_threads,
            "threads for GEMMs and attention (default: all cores)");
  o.choice("--device", "D", r.device, {device_kind::cpu, device_kind::cuda},
           "cpu (default) or cuda (bf16 and fp8 transformer runs on the GPU; see docs/trainer_cuda.md)");
  o.choice("--attention", "A", r.attention,
           {attention_kernel::automatic, attention_kernel::fused, attention_kernel::materialized},
           "--device cuda: fused (cuDNN flash attention, bf16 and fp8 runs), materialized (T x T "
           "probabilities in memory) or auto (fused where available; default)");
  // --- FP8 recipe ---
  o.choice("--scaling", "R", r.recipe.recipe, {fp8::scaling_mode::delayed, fp8::scaling_mode::current},
           "delayed (scales from an amax history, default) or current (each tensor's own amax)");
  o.integer("--amax-history", "N", r.recipe.amax_history_length, 1, max_history,
            "delayed scaling: amax history length (default 1024)");
  o.choice("--amax-algo", "A", r.recipe.algorithm,
           {fp8::amax_algorithm::max, fp8::amax_algorithm::most_recent},
           "delayed scaling: max (over the history, default) or most_recent");
  o.integer("--margin", "M", r.recipe.margin, 0, max_margin, "scale = fp8_max / amax / 2^M (default 0)");
  o.choice("--format", "F", r.recipe.formats, {fp8::format_mix::hybrid, fp8::format_mix::e4m3},
           "hybrid (E4M3 forward, E5M2 gradients; default) or e4m3 (E4M3 everywhere)");
  o.choice(
      "--granularity", "G", r.recipe.scale_granularity,
      {fp8::granularity::per_tensor, fp8::granularity::per_row, fp8::granularity::tile_1x128,
       fp8::granularity::mx_1x32},
      "tensor (default), row, block (1x128 tiles for activations and gradients, 128x128 blocks for weights) "
      "or mx (1x32 blocks, E8M0 scales); all but tensor need --scaling current");
  o.flag("--pow2-scales", r.power_of_two_scales,
         "round scales down to powers of two (block granularity always does)");
  o.list("--current-scaling-for", "LIST", s.current_scaling_for,
         "current scaling for these GEMM classes only, e.g. dgrad or fprop,wgrad (the rest keep --scaling)");
  // --- Debugging switches ---
  const std::initializer_list<gemm_mode> modes = {gemm_mode::fp8, gemm_mode::fake_fp8, gemm_mode::bf16};
  o.choice("--fprop", "M", r.linear_modes[0], modes,
           "fprop GEMMs of an fp8 run: fp8 (default), fake (quantize and dequantize, GEMM in BF16) or bf16");
  o.choice("--dgrad", "M", r.linear_modes[1], modes, "dgrad GEMMs: fp8, fake or bf16");
  o.choice("--wgrad", "M", r.linear_modes[2], modes, "wgrad GEMMs: fp8, fake or bf16");
  o.flag("--fake-quant", s.fake_quant,
         "fake quantization for every GEMM class still in fp8 (cast to FP8 and back, GEMM in BF16)");
  o.flag("--no-producer-amaxes", s.no_producer_amaxes,
         "--device cuda: the linear layers read X and dY for their amaxes instead of taking them from the "
         "kernels that wrote them (the same results; for debugging)");
  o.list("--fast-accumulation", "LIST", s.fast_accumulation,
         "--device cuda: the GEMM classes whose FP8 products use Hopper's fast accumulation (the tensor "
         "cores' partial sums not promoted to FP32): none, or some of fprop,dgrad,wgrad (default fprop, as "
         "Transformer Engine)");
  o.flag("--no-producer-fp8", s.no_producer_fp8,
         "--device cuda: the kernels that write a linear layer's X or dY write BF16 for the layer to cast, "
         "instead of the layer's FP8 codes where it takes them (the same results; for debugging)");
  o.list("--bf16-layers", "LIST", r.bf16_layers,
         "keep these layers in BF16: transformer block indices or 'head' (e.g. 0,3,head); MLP layer indices "
         "(the "
         "head is the last)");
  o.flag(
      "--fp8-head", r.fp8_head,
      "run the LM head (the last linear layer) in FP8 too; by default it stays in BF16, as DeepSeek-V3 and "
      "Megatron-Core keep the output layer");
  o.flag("--first-last-bf16", r.first_last_bf16,
         "keep the first and last transformer blocks (MLP: first and last layers) in BF16");
  o.integer("--shadow-every", "N", r.shadow_every, 0, max_period,
            "every N steps also compute the loss of the same batch in BF16 and log the difference");
  o.integer("--stats-every", "N", r.stats_every, 0, max_period,
            "every N steps log amax, scale, saturated and flushed-to-zero fractions of every GEMM operand to "
            "stats.csv");
  // --- Evaluation, output, checkpoints ---
  o.integer("--eval-every", "N", r.eval_every, 1, max_period,
            "validation loss every N steps and at the end (default 50)");
  o.integer("--eval-batches", "N", r.eval_batches, 1, std::numeric_limits<int>::max(),
            "validation batches (default 16)");
  o.text("--out", "DIR", r.out_dir,
         "output directory for log.csv, stats.csv and checkpoints (default runs/<run name>, which names the "
         "model, "
         "precision, recipe, learning rate, steps, data and seed)");
  o.flag("--overwrite", r.overwrite, "replace the run already in the output directory (refused otherwise)");
  o.integer("--save-every", "N", r.save_every, 0, max_period,
            "write a checkpoint every N steps (DIR/step_<N>.safetensors)");
  app.add_flag_callback(
      "--no-final-save", [&r] { r.save_final = false; }, "do not write DIR/final.safetensors at the end");
  o.text("--resume", "FILE", r.resume_from,
         "continue from a checkpoint (any precision may continue any other)");
  o.flag("--reset-scaling", r.reset_scaling,
         "with --resume: start the FP8 scaling state afresh instead of loading it");
  app.add_flag_callback(
      "--no-progress", [&r] { r.progress_bar = false; },
      "no progress bar; print a line every --log-every steps");
  o.integer("--log-every", "N", r.log_every, 1, max_period,
            "steps between progress lines without a progress bar (default 10)");
  o.flag("-h,--help", r.show_help, "show this help and exit");
  o.flag("--version", r.show_version, "show the version and exit");
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

// The units --bf16-layers names, for a model of `unit_count` units (the last one is the head).
std::vector<int> bf16_units_of(const std::vector<std::string>& items, int unit_count, bool is_transformer) {
  std::vector<int> units;
  const int last_unit = unit_count - 1;
  for (const std::string& item : items) {
    if (item == "head") {
      units.push_back(last_unit);
      continue;
    }
    char* end = nullptr;
    errno = 0;
    const long unit = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || unit < 0 || unit > last_unit) {
      fail("--bf16-layers: '" + item + "' is not a layer of this model (0.." + std::to_string(last_unit) +
           (is_transformer ? " or head" : "") + ")");
    }
    units.push_back(int(unit));
  }
  return units;
}

// The switches that are applied after all options are read, whatever their order.
void apply_late_switches(parse_state& s) {
  run_options& o = s.options;
  o.producer_amaxes = !s.no_producer_amaxes;
  o.producer_fp8 = !s.no_producer_fp8;
  if (s.fake_quant) {
    for (gemm_mode& mode : o.linear_modes) {
      if (mode == gemm_mode::fp8) mode = gemm_mode::fake_fp8;
    }
  }
  if (s.fast_accumulation.empty()) fail("--fast-accumulation needs none, or some of fprop,dgrad,wgrad");
  o.fast_accumulation = {false, false, false};
  if (s.fast_accumulation != std::vector<std::string>{"none"}) {
    for (const std::string& item : s.fast_accumulation) {
      const fp8::gemm_kind kind = parse_choice<fp8::gemm_kind>(
          "--fast-accumulation", item, {fp8::gemm_kind::fprop, fp8::gemm_kind::dgrad, fp8::gemm_kind::wgrad});
      o.fast_accumulation[std::size_t(kind)] = true;
    }
  }
  o.current_scaling_for.clear();
  for (const std::string& item : s.current_scaling_for) {
    o.current_scaling_for.push_back(
        parse_choice<fp8::gemm_kind>("--current-scaling-for", item,
                                     {fp8::gemm_kind::fprop, fp8::gemm_kind::dgrad, fp8::gemm_kind::wgrad}));
  }
}

void check_shape(const run_options& o) {
  const model_options& m = o.model;
  if (m.kind != "transformer" && m.kind != "mlp")
    fail("--model must be one of transformer, mlp; got '" + m.kind + "'");
  if (m.kind == "transformer" && (m.channels % m.heads != 0 || (m.channels / m.heads) % 2 != 0)) {
    fail("--d-model " + std::to_string(m.channels) + " must be a multiple of --heads " +
         std::to_string(m.heads) + " with an even head dimension (RoPE rotates pairs)");
  }
  if (long(o.batch) * long(m.context) > max_tokens_per_batch) {
    fail("--batch " + std::to_string(o.batch) + " x --context " + std::to_string(m.context) +
         " is more than " + std::to_string(max_tokens_per_batch) + " tokens per step");
  }
  // A GPU run keeps on the host the parameters (for checkpoints) and the CPU model's activations of
  // one sequence only: its passes run on the device, whose memory CUDA checks as it allocates.
  const bool on_gpu = o.device == device_kind::cuda;
  const double needed = estimated_memory_bytes(m, on_gpu ? 1 : o.batch);
  const double available = physical_memory_bytes();
  if (available > 0.0 && needed > available) {
    char text[200];
    std::snprintf(text, sizeof(text),
                  "the model%s need at least %.1f GiB of memory, more than this machine's %.1f GiB",
                  on_gpu ? "'s host copies" : " and batch", needed / double(1ull << 30),
                  available / double(1ull << 30));
    fail(std::string(text) + ": use a smaller --batch, --context, --d-model, --hidden or --layers");
  }
}

void check_consistency(const run_options& o) {
  check_shape(o);
  if (o.recipe.scale_granularity != fp8::granularity::per_tensor &&
      o.recipe.recipe == fp8::scaling_mode::delayed) {
    fail(std::string("--granularity ") + to_string(o.recipe.scale_granularity) +
         " needs --scaling current: delayed scaling keeps one amax history per tensor");
  }
  if (o.recipe.scale_granularity == fp8::granularity::mx_1x32 && o.recipe.margin != 0) {
    fail("--margin does not apply to --granularity mx: OCP MX scales follow a fixed rule");
  }
  if (o.fp8_head && std::find(o.bf16_layers.begin(), o.bf16_layers.end(), "head") != o.bf16_layers.end()) {
    fail("--fp8-head and --bf16-layers head contradict each other");
  }
  // Both models have one precision unit per layer (transformer block, MLP layer) plus the head.
  bf16_units_of(o.bf16_layers, o.model.layers + 1, o.model.kind == "transformer");
  if (o.shadow_every > 0 && o.base_precision != precision::fp8) {
    fail("--shadow-every compares an fp8 run with BF16: it needs --precision fp8");
  }
  if (o.micro_batch > 0 && o.batch % o.micro_batch != 0) {
    fail("--micro-batch " + std::to_string(o.micro_batch) + " must divide --batch " +
         std::to_string(o.batch));
  }
  if (o.reset_scaling && o.resume_from.empty())
    fail("--reset-scaling only applies together with --resume FILE");
  if (o.warmup_steps >= o.steps) {
    fail("--warmup " + std::to_string(o.warmup_steps) + " must be smaller than --steps " +
         std::to_string(o.steps));
  }
  if (o.overwrite && !o.resume_from.empty()) {
    fail("--overwrite and --resume contradict each other: a resumed run continues the run in its directory");
  }
}

// --help or -h anywhere before "--" wins over every other problem of the command line, as GNU
// programs do: the user asking for help gets it.
bool asks_for_help(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

// Switches (flags) expect no value; every other option exactly one.
bool takes_value(const CLI::Option& option) { return option.get_expected_min() > 0; }

// A switch takes no value: --fp8-head=yes is an error, as in GNU getopt (CLI11 would read it as
// --fp8-head, or as its negation for =false).
void refuse_switch_values(const CLI::App& app, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return;
    const std::size_t equals = arg.find('=');
    if (arg.rfind("--", 0) != 0 || equals == std::string::npos) continue;
    const std::string name = arg.substr(0, equals);
    const CLI::Option* option = app.get_option_no_throw(name);
    if (option != nullptr && !takes_value(*option))
      fail("option " + name + " takes no value; got '" + arg + "'");
  }
}

}  // namespace

run_options parse_options(int argc, const char* const* argv) {
  parse_state state;
  for (int i = 0; i < argc; ++i) state.options.command_line += (i > 0 ? " " : "") + std::string(argv[i]);
  if (asks_for_help(argc, argv)) {
    state.options.show_help = true;
    return state.options;
  }
  CLI::App app("fp8_trainer");
  app.set_help_flag();  // declared as an ordinary flag in declare_options
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // the last one wins
  declare_options(app, state);
  refuse_switch_values(app, argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError&) {
    const std::vector<std::string> rest = app.remaining();
    const std::string first = rest.empty() ? "?" : rest.front();
    fail(first.rfind("-", 0) == 0 ? "unknown option '" + first + "'" : "unexpected argument '" + first + "'");
  } catch (const CLI::ParseError& e) { fail(e.what()); }
  if (state.options.show_version) return state.options;
  apply_late_switches(state);
  apply_shape_defaults(state);
  check_consistency(state.options);
  return state.options;
}

std::string help_text() {
  parse_state state;
  CLI::App app("fp8_trainer");
  app.set_help_flag();
  declare_options(app, state);
  std::ostringstream out;
  out << "fp8_trainer: trains a byte-level transformer or MLP on the CPU in FP32, BF16 or emulated FP8.\n\n"
         "Usage: fp8_trainer [options]        (values as --steps 5 or --steps=5)\n"
         "  fp8_trainer                          the FP8 transformer (HYBRID, delayed scaling), default "
         "data\n"
         "  fp8_trainer --precision bf16 --out runs/bf16    the BF16 reference\n"
         "  fp8_trainer --resume runs/fp8/final.safetensors --out runs/fp8 --precision bf16 --steps 900\n"
         "                                       continue an FP8 run in BF16\n\n"
         "Options:\n";
  constexpr std::size_t help_column = 28, line_width = 100;
  for (const CLI::Option* option : app.get_options()) {
    std::string names;
    for (const std::string& name : option->get_snames()) names += (names.empty() ? "-" : ", -") + name;
    for (const std::string& name : option->get_lnames()) names += (names.empty() ? "--" : ", --") + name;
    std::string line = "  " + names + (takes_value(*option) ? " " + option->get_type_name() : std::string());
    if (line.size() + 1 > help_column) {
      out << line << "\n";
      line.clear();
    }
    // Word-wrap the help text into the column.
    std::istringstream words(option->get_description());
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
         "Exit status: 0 done, 1 a failure while running, 2 a usage error (reported before training "
         "starts).\n"
         "See docs/trainer.md and docs/debugging.md.\n";
  return out.str();
}

std::string version_text() {
  return "fp8_trainer (fp8 " + std::to_string(FP8_VERSION_MAJOR) + "." + std::to_string(FP8_VERSION_MINOR) +
         "." + std::to_string(FP8_VERSION_PATCH) + ")";
}

std::string run_name(const run_options& o) {
  std::string name = o.model.kind + "-" + to_string(o.base_precision);
  if (o.base_precision == precision::fp8) {
    name += std::string("-") + to_string(o.recipe.recipe);
    if (o.recipe.scale_granularity != fp8::granularity::per_tensor) {
      name += std::string("-") + to_string(o.recipe.scale_granularity);
    }
    for (int c = 0; c < gemm_kind_count; ++c) {
      if (o.linear_modes[std::size_t(c)] != gemm_mode::fp8) {
        name +=
            std::string("-") + to_string(fp8::gemm_kind(c)) + "_" + to_string(o.linear_modes[std::size_t(c)]);
      }
    }
    if (o.fast_accumulation != run_options{}.fast_accumulation) {
      name += "-fastacc";
      for (int c = 0; c < gemm_kind_count; ++c) {
        if (o.fast_accumulation[std::size_t(c)]) name += std::string("_") + to_string(fp8::gemm_kind(c));
      }
      if (o.fast_accumulation == std::array<bool, gemm_kind_count>{}) name += "_none";
    }
  }
  // The rate, the length and the data, so that runs differing in them do not share a directory.
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%g", double(o.learning_rate));
  // A directory given with a trailing slash has no file name of its own: it is named by its last part.
  std::filesystem::path data_path(o.data_file);
  if (!data_path.has_filename()) data_path = data_path.parent_path();
  std::string data = o.data_file.empty() ? "fortunes" : data_path.stem().string();
  for (char& c : data) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  }
  if (o.device == device_kind::cuda) name += "-cuda";
  return name + "-lr" + rate + "-" + std::to_string(o.steps) + "steps-" + data + "-s" +
         std::to_string(o.seed);
}

precision_policy make_policy(const run_options& o, const model& m) {
  precision_policy policy;
  policy.base = o.base_precision;
  policy.linear_modes = o.linear_modes;
  policy.fast_accumulation = o.fast_accumulation;
  policy.recipe = o.recipe;
  policy.bf16_units.assign(std::size_t(m.unit_count()), false);
  const int last_unit = m.unit_count() - 1;
  const bool is_transformer = m.unit_name(last_unit) == "head";
  for (int unit : bf16_units_of(o.bf16_layers, m.unit_count(), is_transformer)) {
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

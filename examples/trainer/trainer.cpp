// The training loop and its bookkeeping.
#include "trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "adamw.hpp"
#include "checkpoint.hpp"
#include "file_io.hpp"
#include "parallel.hpp"
#include "progress.hpp"

#ifndef FP8_TRAINER_DEFAULT_DATA_DIR
#define FP8_TRAINER_DEFAULT_DATA_DIR "/usr/share/games/fortunes"
#endif

namespace trainer {

namespace {

// The data order draws from its own stream, so that changing the model does not change the batches.
constexpr std::uint64_t data_seed_offset = 0xD1B54A32D192ED03ull;
constexpr long default_warmup_divisor = 20;  // 5% of the steps

recipe_switches switches_of(const run_options& o) {
  return {o.recipe, o.power_of_two_scales, o.current_scaling_for};
}

std::vector<std::string> linear_names(const model& m) {
  std::vector<std::string> names;
  for (const linear_layer_info& info : m.linear_layers()) names.push_back(info.name);
  return names;
}

std::string policy_text(const precision_policy& p, const run_options& o, const model& m) {
  std::ostringstream out;
  switch (p.base) {
    case precision::fp32: return "fp32";
    case precision::bf16: return "bf16 (BF16 weights and activations, FP32 master weights and AdamW)";
    case precision::fp8: break;
  }
  out << "fp8 (bf16 + FP8 linear GEMMs): "
      << (o.recipe.formats == fp8::format_mix::hybrid ? "HYBRID" : "E4M3") << ", "
      << to_string(o.recipe.recipe) << " scaling";
  if (o.recipe.recipe == fp8::scaling_mode::delayed) {
    out << " (history " << o.recipe.amax_history_length << ", " << to_string(o.recipe.algorithm)
        << ", margin " << o.recipe.margin << ")";
  }
  out << ", granularity " << to_string(o.recipe.scale_granularity);
  for (fp8::gemm_kind c : o.current_scaling_for) out << ", " << to_string(c) << " current";
  out << "\n  GEMMs: fprop " << to_string(p.linear_modes[0]) << ", dgrad " << to_string(p.linear_modes[1])
      << ", wgrad " << to_string(p.linear_modes[2]);
  if (o.device == device_kind::cuda) {
    std::string fast;
    for (int c = 0; c < gemm_kind_count; ++c) {
      if (p.fast_accumulation[std::size_t(c)])
        fast += std::string(fast.empty() ? "" : ",") + to_string(fp8::gemm_kind(c));
    }
    out << "; fast accumulation: " << (fast.empty() ? "none" : fast);
  }
  std::string units;
  for (int u = 0; u < m.unit_count(); ++u) {
    if (p.bf16_units[std::size_t(u)]) units += (units.empty() ? "" : ", ") + m.unit_name(u);
  }
  if (!units.empty()) out << "; kept in BF16: " << units;
  return out.str();
}

// The files of a run in its directory, which --overwrite replaces.
bool is_run_output(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  return name == "log.csv" || name == "stats.csv" || name == "final.safetensors" ||
         (name.rfind("step_", 0) == 0 && file.extension() == ".safetensors");
}

}  // namespace

std::string output_directory(const run_options& o) {
  return o.out_dir.empty() ? "runs/" + run_name(o) : o.out_dir;
}

void check_output_directory(const run_options& o) {
  namespace fs = std::filesystem;
  const std::string dir = output_directory(o);
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_directory(dir, error)) {
    throw std::invalid_argument("the output directory '" + dir +
                                "' exists and is not a directory (--out DIR)");
  }
  // Resuming continues the run (its logs are trimmed to the checkpoint's step); --overwrite replaces it.
  if (o.overwrite || !o.resume_from.empty()) return;
  if (fs::exists(fs::path(dir) / "log.csv", error)) {
    throw std::invalid_argument(
        "'" + dir + "' already holds a run (" + dir +
        "/log.csv): pass --overwrite to replace it, --out DIR for a new directory, or "
        "--resume DIR/final.safetensors to continue it (see --help)");
  }
}

void prepare_output_directory(const run_options& o) {
  namespace fs = std::filesystem;
  const std::string dir = output_directory(o);
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw std::runtime_error("cannot create the output directory '" + dir + "': " + error.message());
  if (!o.overwrite) return;
  // The files of the replaced run go, so that no checkpoint of it is mistaken for one of this run.
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code remove_error;
    if (is_run_output(it->path())) fs::remove(it->path(), remove_error);
  }
}

training_run::training_run(run_options options, process_group* group) : options_(std::move(options)) {
  if (group == nullptr) own_group_ = single_process();
  group_ = group != nullptr ? group : own_group_.get();
  split_ = split_batch(options_, group_->rank(), group_->size());
  set_thread_count(options_.threads);
  // The default directory is read as one even where it is missing, so that its error says to install it.
  data_ = options_.data_file.empty() ? load_fortunes(FP8_TRAINER_DEFAULT_DATA_DIR)
                                     : load_text(options_.data_file);
  // The checks of --batch and --context against the text come before the model is allocated: a
  // batch too large for the text must be a usage error, not an out-of-memory kill.
  // A sharded step draws the global batch window by window (the same order, one batch or several).
  loader_ = std::make_unique<batch_loader>(data_.train, split_.sharded() ? 1 : options_.batch,
                                           options_.model.context, options_.seed ^ data_seed_offset);
  eval_ = std::make_unique<eval_windows>(data_.validation, options_.batch, options_.model.context,
                                         options_.eval_batches);
  // A GPU run's host model holds the parameters (checkpoints, the replica hash) and never runs a
  // pass: activations for one sequence keep it small (the speed shape's attention alone would need
  // GiBs per layer and sequence).
  model_ = make_model(options_.model, options_.device == device_kind::cuda ? 1 : split_.micro);
  policy_ = make_policy(options_, *model_);
  scaling_ = std::make_unique<scaling_state>(switches_of(options_), linear_names(*model_));
  rng weights(options_.seed);
  model_->init_weights(weights);
  model_->parameters().refresh_compute(policy_.activation_storage());
  unigram_ = unigram_baseline(data_);
  schedule_.peak = options_.learning_rate;
  schedule_.total_steps = options_.steps;
  schedule_.warmup_steps =
      options_.warmup_steps >= 0 ? options_.warmup_steps : options_.steps / default_warmup_divisor;
  schedule_.final_fraction = options_.final_lr_fraction;
  const std::size_t tokens = std::size_t(options_.batch) * std::size_t(options_.model.context);
  inputs_.resize(tokens);
  targets_.resize(tokens);
  if (!options_.resume_from.empty()) load(options_.resume_from);
  check_start("at the start (step " + std::to_string(step_) + ")");
}

pass_context training_run::training_pass(tensor_stats_log* stats) {
  pass_context pass;
  pass.policy = &policy_;
  // FP32 runs keep no FP8 statistics; bf16 and fp8 runs record amaxes of every linear GEMM operand.
  pass.scaling = policy_.base == precision::fp32 ? nullptr : scaling_.get();
  pass.record_amax = true;
  pass.stats = pass.scaling != nullptr ? stats : nullptr;
  return pass;
}

double training_run::shadow_forward(const std::int32_t* inputs, const std::int32_t* targets) {
  // The same batch and weights through BF16 GEMMs, forward only; the scaling state is not touched.
  const precision_policy shadow = bf16_policy_like(policy_);
  pass_context shadow_pass;
  shadow_pass.policy = &shadow;
  return model_->forward(shadow_pass, inputs, targets);
}

step_record training_run::train_step(tensor_stats_log* stats) {
  step_record record;
  parameter_set& params = model_->parameters();
  if (stats != nullptr) stats->set_step(step_ + 1);
  const pass_context pass = training_pass(stats);
  if (split_.sharded()) {
    sharded_gradients(record, stats);  // data_parallel.cpp
  } else {
    loader_->next(inputs_.data(), targets_.data());
    params.zero_grad();
    record.train_loss = model_->forward(pass, inputs_.data(), targets_.data());
    model_->backward(pass);
    if (options_.shadow_every > 0 && (step_ + 1) % options_.shadow_every == 0) {
      record.shadow_loss = shadow_forward(inputs_.data(), targets_.data());
    }
  }
  record.grad_norm = gradient_norm(params);
  clip_gradients(params, record.grad_norm, options_.clip_norm);
  const float lr = schedule_.at(step_);
  record.learning_rate = lr;
  adamw_update(params, options_.adamw, lr, step_);
  params.refresh_compute(policy_.activation_storage());
  // The amaxes agree over the ranks (one all-reduce with max) before the next step's scales.
  if (pass.scaling != nullptr) scaling_->end_step(group_->amax_reducer());
  finish_step(record);
  return record;
}

void training_run::finish_step(step_record& record) {
  ++step_;
  record.step = step_;
  record.tokens = step_ * long(inputs_.size());
  if (options_.hash_every > 0 && step_ % options_.hash_every == 0) {
    check_replicas("after step " + std::to_string(step_));
  }
}

double training_run::evaluate() {
  pass_context pass;
  pass.policy = &policy_;
  pass.scaling = policy_.base == precision::fp32 ? nullptr : scaling_.get();
  pass.record_amax = false;
  return mean_validation_loss([&](const std::int32_t* inputs, const std::int32_t* targets) {
    return model_->forward(pass, inputs, targets);
  });
}

double training_run::mean_validation_loss(
    const std::function<double(const std::int32_t* inputs, const std::int32_t* targets)>& pass_loss) {
  // Batches of --batch windows, in passes of the model's batch (several when the step is sharded).
  const int passes = options_.batch / split_.micro;
  const std::size_t pass_tokens = std::size_t(split_.micro) * std::size_t(options_.model.context);
  double total = 0.0;
  for (int b = 0; b < eval_->batches(); ++b) {
    eval_->fill(b, inputs_.data(), targets_.data());
    for (int p = 0; p < passes; ++p) {
      total += pass_loss(inputs_.data() + std::size_t(p) * pass_tokens,
                         targets_.data() + std::size_t(p) * pass_tokens);
    }
  }
  return total / double(eval_->batches() * passes);
}

void training_run::save(const std::string& path) const {
  std::map<std::string, std::string> info{{"run.precision", to_string(policy_.base)},
                                          {"run.scaling", to_string(options_.recipe.recipe)},
                                          {"run.seed", std::to_string(options_.seed)},
                                          {"run.steps", std::to_string(options_.steps)}};
  if (!options_.command_line.empty()) info["run.command"] = options_.command_line;
  save_checkpoint(path, *model_, step_, loader_->position(), scaling_->serialize(), data_, info);
}

void training_run::load(const std::string& path) {
  const checkpoint_contents contents = read_checkpoint(path, *model_, data_);
  // Everything that can fail is tried on copies first.
  scaling_state scaling = *scaling_;
  if (!options_.reset_scaling) {
    try {
      scaling.deserialize(contents.scaling_state);
    } catch (const fp8::error& e) {
      throw fp8::checkpoint_error(
          "checkpoint '" + path + "': its FP8 scaling state does not fit this run: " + e.what() +
          "\npass the recipe switches it was trained with (--format, --amax-history, "
          "--amax-algo, --margin, --pow2-scales), or --reset-scaling to start the scaling "
          "state afresh");
    }
  }
  batch_loader probe = *loader_;
  try {
    probe.set_position(contents.data);
  } catch (const std::invalid_argument& e) {
    throw fp8::checkpoint_error("checkpoint '" + path +
                                "': its data position does not fit this text: " + e.what());
  }
  // Commit.
  parameter_set& params = model_->parameters();
  params.master = contents.master;
  params.adam_m = contents.adam_m;
  params.adam_v = contents.adam_v;
  params.refresh_compute(policy_.activation_storage());
  *scaling_ = std::move(scaling);
  loader_->set_position(contents.data);
  step_ = contents.step;
}

std::string training_run::describe() const {
  std::ostringstream out;
  const auto shape = model_->shape_description();
  out << "data:      " << data_.description << "\n"
      << "           " << data_.train.size() << " training bytes, " << data_.validation.size()
      << " validation bytes; unigram baseline " << unigram_ << " nats/byte\n"
      << "model:    ";
  for (const auto& [key, value] : shape) out << " " << key << "=" << value;
  out << " (" << model_->parameters().size() << " parameters)\n"
      << "precision: " << policy_text(policy_, options_, *model_) << "\n"
      << "training:  " << options_.steps << " steps of " << options_.batch << "x" << options_.model.context
      << " bytes, lr " << options_.learning_rate << " (warmup " << schedule_.warmup_steps << ", cosine to "
      << options_.final_lr_fraction << "x), seed " << options_.seed << ", " << thread_count() << " threads\n";
  if (split_.sharded()) {
    out << "parallel:  " << describe_split(split_, model_->parameters().size(), gradient_collective())
        << "\n";
  }
  if (step_ > 0) out << "resumed:   at step " << step_ << " from " << options_.resume_from << "\n";
  return out.str();
}

double training_run::run() {
  if (step_ >= options_.steps) {
    throw std::invalid_argument("the run is already at step " + std::to_string(step_) + " of --steps " +
                                std::to_string(options_.steps) + ": pass a larger --steps to train further");
  }
  // Rank 0 writes the logs, checkpoints and messages of a data-parallel run; the others only train.
  const bool writer = group_->is_root();
  const std::string dir = output_directory(options_);
  std::unique_ptr<csv_log> log;
  std::unique_ptr<tensor_stats_log> stats;
  if (writer) {
    check_output_directory(options_);
    prepare_output_directory(options_);
    std::printf("%s", describe().c_str());
    std::printf("output:    %s/log.csv%s\n", dir.c_str(),
                options_.out_dir.empty() ? " (the default for these options)" : "");
    for (const std::string& name : remove_stale_temporaries(dir, ".safetensors")) {
      std::printf("removed:   %s/%s, left by a save that was interrupted\n", dir.c_str(), name.c_str());
    }
    std::fflush(stdout);
    log = std::make_unique<csv_log>(dir + "/log.csv", step_);
    if (options_.stats_every > 0) stats = std::make_unique<tensor_stats_log>(dir + "/stats.csv", step_);
  }

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto seconds_since = [](clock::time_point t) {
    return std::chrono::duration<double>(clock::now() - t).count();
  };
  double val_loss = not_measured;
  if (step_ == 0 && writer) {
    step_record initial;
    initial.val_loss = val_loss = evaluate();
    log->write(initial);
  }
  progress_display progress(options_.steps, options_.progress_bar, options_.log_every);
  double step_seconds_average = 0.0;
  const long first_step = step_;
  while (step_ < options_.steps) {
    const auto step_start = clock::now();
    const bool stats_step = stats != nullptr && (step_ + 1) % options_.stats_every == 0;
    step_record record = train_step(stats_step ? stats.get() : nullptr);
    const double step_seconds = seconds_since(step_start);
    record.tokens_per_second = double(inputs_.size()) / step_seconds;
    const long done = step_ - first_step;
    step_seconds_average += (step_seconds - step_seconds_average) / double(done < 20 ? done : 20);
    if (writer && (step_ % options_.eval_every == 0 || step_ == options_.steps)) {
      record.val_loss = val_loss = evaluate();
    }
    record.elapsed_seconds = seconds_since(start);
    if (writer) {
      log->write(record);
      if (stats_step) stats->flush();
      progress.update(step_, record.train_loss, record.val_loss, record.tokens_per_second,
                      step_seconds_average * double(options_.steps - step_));
    }
    if (!std::isfinite(record.train_loss)) {
      if (writer) progress.finish();
      // Every rank has the same (reduced) loss and stops here together.
      throw collective_error(
          "the training loss is " + std::to_string(record.train_loss) + " at step " + std::to_string(step_) +
              ": training diverged (see docs/debugging.md: try "
              "--precision bf16 from the last checkpoint, a lower --lr, or the FP8 switches)",
          failure_status);
    }
    if (writer && options_.save_every > 0 && step_ % options_.save_every == 0) {
      char name[32];
      std::snprintf(name, sizeof(name), "/step_%06ld.safetensors", step_);
      save(dir + name);
    }
  }
  check_replicas("at the end (step " + std::to_string(step_) + ")");
  if (!writer) return val_loss;
  progress.finish();
  if (options_.save_final) save(dir + "/final.safetensors");
  std::printf("final:     validation loss %.4f nats/byte (unigram baseline %.4f) after %ld steps, %s\n",
              val_loss, unigram_, step_, format_duration(seconds_since(start)).c_str());
  return val_loss;
}

}  // namespace trainer

// A training run: data, model, precision policy, FP8 scaling state, optimizer and logs, with the
// step, evaluation, shadow-step, checkpoint and resume logic that main() and the tests drive.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data.hpp"
#include "data_parallel.hpp"
#include "logging.hpp"
#include "model.hpp"
#include "options.hpp"
#include "process_group.hpp"
#include "scaling_state.hpp"
#include "schedule.hpp"
#include "tensor_stats.hpp"

namespace trainer {

// Where the run's files go: --out, or runs/<run name> (see run_name()).
std::string output_directory(const run_options& options);
// Refuses (std::invalid_argument naming the directory) to start a fresh run in a directory that
// already holds one (a log.csv), unless --overwrite or --resume. Cheap: main() calls it first.
void check_output_directory(const run_options& options);
// Creates the directory; with --overwrite removes the earlier run's logs and checkpoints. Throws
// std::runtime_error naming the directory if it cannot be created.
void prepare_output_directory(const run_options& options);

class training_run {
 public:
  // Loads the data, builds and initialises the model (or restores --resume), prints nothing.
  // Throws std::invalid_argument / std::runtime_error / fp8::checkpoint_error with a message for the user.
  // With a group of several ranks (data parallelism, docs/distributed_training.md) this rank trains its
  // share of each global batch, and the ranks check that they start from the same text and weights
  // (collective_error otherwise); without one, this process trains alone.
  explicit training_run(run_options options, process_group* group = nullptr);
  // The GPU run (cuda/trainer_cuda.hpp) overrides the step, the evaluation, save and load.
  virtual ~training_run() = default;
  // The data loader refers to the text this object owns: a run stays where it was built.
  training_run(const training_run&) = delete;
  training_run& operator=(const training_run&) = delete;

  // Trains up to options.steps: progress on stderr, DIR/log.csv, DIR/stats.csv, checkpoints, and a
  // summary on stdout. Returns the final validation loss. Throws std::runtime_error if the loss
  // becomes NaN or infinite (the log up to that step is kept).
  double run();

  // One optimizer step on the next training batch; returns its record (losses, norm, lr).
  virtual step_record train_step(tensor_stats_log* stats = nullptr);
  // Mean validation loss with the current weights (records nothing, changes nothing).
  virtual double evaluate();

  // Writes / restores a checkpoint. load() checks everything before changing anything: on error the
  // run is exactly as it was.
  virtual void save(const std::string& path) const;
  virtual void load(const std::string& path);

  long step() const { return step_; }
  model& net() { return *model_; }
  const text_data& data() const { return data_; }
  const precision_policy& policy() const { return policy_; }
  const scaling_state& scaling() const { return *scaling_; }
  const batch_split& split() const { return split_; }
  double unigram() const { return unigram_; }
  // What this run trains, in a few lines (printed at the start of run()).
  virtual std::string describe() const;

 protected:
  pass_context training_pass(tensor_stats_log* stats);
  // The BF16 loss of a batch with the current weights (--shadow-every); touches no scaling state.
  double shadow_forward(const std::int32_t* inputs, const std::int32_t* targets);
  // Data parallelism (data_parallel.cpp): this rank's passes of the step and the all-reduce that
  // leaves the mean gradient of the global batch in parameters().grad on every rank.
  void sharded_gradients(step_record& record, tensor_stats_log* stats);
  // The step's global batch in the one seeded order, this rank's share of it in inputs_/targets_
  // (passes() x micro sequences); the GPU's sharded step draws the same.
  void draw_rank_windows();
  // What a GPU run brings into the host model: the master weights and the FP8 scales for the
  // replica check's hash, and the moments with them for a checkpoint.
  enum class host_copies { replica_hash, checkpoint };
  // The GPU run downloads what `what` needs into the host model here; nothing to do on the CPU.
  virtual void refresh_host_copies(host_copies what) const { (void)what; }
  // The collective that sums the gradients, for describe().
  virtual const char* gradient_collective() const { return "MPI_Allreduce"; }
  // Throw collective_error unless every rank holds the same weights and scales (and, at the start,
  // the same text and step).
  void check_replicas(const std::string& when);
  // The mean loss over the validation batches, each run in passes of the model's batch through
  // pass_loss (the device's forward pass, recording no amaxes).
  double mean_validation_loss(
      const std::function<double(const std::int32_t* inputs, const std::int32_t* targets)>& pass_loss);
  // Closes a step both devices share: counts it into the record, then the replica check that is due.
  void finish_step(step_record& record);
  void check_start(const std::string& when);

  run_options options_;
  std::unique_ptr<process_group> own_group_;  // this process alone, when no group is given
  process_group* group_ = nullptr;
  batch_split split_;
  std::vector<float> gradient_sum_;  // the packed all-reduce buffer: gradients, loss, shadow loss
  text_data data_;
  std::unique_ptr<model> model_;
  precision_policy policy_;
  std::unique_ptr<scaling_state> scaling_;
  std::unique_ptr<batch_loader> loader_;
  std::unique_ptr<eval_windows> eval_;
  lr_schedule schedule_;
  double unigram_ = 0.0;
  long step_ = 0;
  std::vector<std::int32_t> inputs_, targets_;  // [B, T]
};

}  // namespace trainer

// The data-parallel step: this rank's share of the global batch, its passes, one all-reduce of the
// packed gradients and losses, and the replica checks.
#include "data_parallel.hpp"

#include <algorithm>
#include <sstream>

#include "hash.hpp"
#include "process_group.hpp"
#include "trainer.hpp"

namespace trainer {

batch_split split_batch(const run_options& o, int rank, int ranks) {
  batch_split split;
  split.global = o.batch;
  split.ranks = ranks;
  split.rank = rank;
  if (o.batch % ranks != 0) {
    throw collective_error("--batch " + std::to_string(o.batch) +
                               " (the global batch, summed over the ranks) does not divide among " +
                               std::to_string(ranks) + " ranks: use a multiple of " + std::to_string(ranks) +
                               " (see docs/distributed_training.md)",
                           usage_error_status);
  }
  split.micro = o.micro_batch > 0 ? o.micro_batch : split.local();
  if (split.local() % split.micro != 0) {
    throw collective_error("--micro-batch " + std::to_string(split.micro) + " does not divide the " +
                               std::to_string(split.local()) + " sequences of each of the " +
                               std::to_string(ranks) + " ranks (--batch " + std::to_string(o.batch) + ")",
                           usage_error_status);
  }
  return split;
}

std::string describe_split(const batch_split& s, std::size_t parameters, const std::string& collective) {
  std::ostringstream out;
  out << s.ranks << (s.ranks == 1 ? " rank" : " ranks") << " x " << s.local() << " sequences, " << s.passes()
      << (s.passes() == 1 ? " pass" : " passes") << " of " << s.micro << " each; gradients averaged over "
      << s.shards() << " passes";
  if (s.ranks > 1) out << " with one " << collective << " of " << parameters + 2 << " floats per step";
  return out.str();
}

std::uint64_t replica_fingerprint(const parameter_set& p, const scaling_state& scaling) {
  std::uint64_t hash = fnv1a(p.master.data(), p.master.size() * sizeof(float));
  const fp8::delayed_scaling_state& delayed = scaling.delayed();
  for (std::size_t i = 0; i < delayed.size(); ++i) {
    const float scale = delayed.scale(i);
    hash = fnv1a(&scale, sizeof scale, hash);
  }
  return hash;
}

void training_run::draw_rank_windows() {
  const std::size_t context = std::size_t(options_.model.context);
  // The step's global batch in the one seeded order: every rank draws all of it and keeps its
  // contiguous share; the other ranks' windows land in a scratch row (there is one: ranks >= 2).
  const int first = split_.rank * split_.local();
  for (int w = 0; w < split_.global; ++w) {
    const bool mine = w >= first && w < first + split_.local();
    const std::size_t row = std::size_t(mine ? w - first : split_.local()) * context;
    loader_->next(inputs_.data() + row, targets_.data() + row);
  }
}

void training_run::sharded_gradients(step_record& record, tensor_stats_log* stats) {
  parameter_set& params = model_->parameters();
  const std::size_t context = std::size_t(options_.model.context);
  draw_rank_windows();
  const bool shadow_step = options_.shadow_every > 0 && (step_ + 1) % options_.shadow_every == 0;
  // The packed buffer of the all-reduce: [gradients, loss, shadow loss], each a sum over passes.
  const std::size_t n = params.size();
  gradient_sum_.resize(n + 2);
  float* sum = gradient_sum_.data();
  for (int p = 0; p < split_.passes(); ++p) {
    const std::size_t row = std::size_t(p) * std::size_t(split_.micro) * context;
    params.zero_grad();
    // stats.csv gets the operands of one pass (rank 0's first): one row per operand and step.
    const pass_context pass = training_pass(p == 0 ? stats : nullptr);
    const float loss = float(model_->forward(pass, inputs_.data() + row, targets_.data() + row));
    model_->backward(pass);
    const float shadow =
        shadow_step ? float(shadow_forward(inputs_.data() + row, targets_.data() + row)) : 0.0f;
    // The first pass is copied, not added to zero: the sum is the same whether a rank's passes are
    // its own or the whole step's (0 + -0 would turn a -0 into +0).
    if (p == 0) {
      std::copy(params.grad.begin(), params.grad.end(), sum);
      sum[n] = loss;
      sum[n + 1] = shadow;
    } else {
      for (std::size_t i = 0; i < n; ++i) sum[i] += params.grad[i];
      sum[n] += loss;
      sum[n + 1] += shadow;
    }
  }
  // With two ranks of one pass each, the sum of the two gradients has one rounding whichever rank
  // adds first: it equals one process's sum of the same two passes, bit for bit. With more ranks or
  // passes, MPI (or NCCL on the GPU) may associate the partial sums differently from one process's
  // pass order, so the last bits may differ (every rank still gets the same sum).
  group_->sum(sum, n + 2);
  const float shards = float(split_.shards());
  for (std::size_t i = 0; i < n; ++i) params.grad[i] = sum[i] / shards;
  record.train_loss = double(sum[n] / shards);
  if (shadow_step) record.shadow_loss = double(sum[n + 1] / shards);
}

void training_run::check_replicas(const std::string& when) {
  if (group_->size() == 1) return;  // nothing to compare, and no hash to compute
  refresh_host_copies(host_copies::replica_hash);
  check_same_on_all_ranks(
      *group_, {{"the weights and FP8 scales", replica_fingerprint(model_->parameters(), *scaling_)}}, when,
      "the ranks no longer train the same model (a rank computed a different gradient sum, "
      "or its memory was corrupted); resume from the last checkpoint",
      failure_status);
}

void training_run::check_start(const std::string& when) {
  if (group_->size() == 1) return;  // nothing to compare, and no hash to compute
  check_same_on_all_ranks(
      *group_,
      {{"the training texts (fingerprints)", data_.fingerprint},
       {"the steps (from --resume)", std::uint64_t(step_)},
       {"the initial weights and FP8 scales", replica_fingerprint(model_->parameters(), *scaling_)}},
      when, "every rank must read the same --data and --resume files", usage_error_status);
}

}  // namespace trainer

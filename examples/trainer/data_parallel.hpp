// Data parallelism on the CPU: how a step's global batch (--batch) is split over the ranks and, on each
// rank, into forward/backward passes of --micro-batch sequences, and the fingerprint that shows that
// every rank still holds the same model. The step itself is training_run's (data_parallel.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "options.hpp"
#include "parameters.hpp"
#include "scaling_state.hpp"

namespace trainer {

// Sequence w of a step's global batch (in the one seeded data order) goes to rank w / local(); on its
// rank, to pass (w % local()) / micro. The step's gradient is the mean of the shards' (passes')
// gradients, summed pass after pass on each rank and then over the ranks by one all-reduce.
struct batch_split {
  int global = 1;  // --batch: sequences per optimizer step, over all ranks
  int ranks = 1;
  int rank = 0;
  int micro = 1;  // sequences per forward/backward pass (the model's batch)

  int local() const { return global / ranks; }    // sequences per step on each rank
  int passes() const { return local() / micro; }  // passes per step on each rank
  int shards() const { return global / micro; }   // passes per step over all ranks
  // Whether the step runs as several passes (on one rank or several) rather than one pass of --batch.
  bool sharded() const { return shards() > 1; }
};

// The split of options.batch over `ranks` ranks (--micro-batch 0: one pass per rank). Throws
// collective_error (exit status 2, every rank alike) if the batch does not divide evenly.
batch_split split_batch(const run_options& options, int rank, int ranks);

// "2 ranks x 8 sequences (1 pass of 8 each); ..." for the run's description; `collective` names the
// gradient all-reduce.
std::string describe_split(const batch_split& split, std::size_t parameters,
                           const std::string& collective = "MPI_Allreduce");

// FNV-1a of the master weights and the FP8 scales: equal on every rank while the ranks agree.
std::uint64_t replica_fingerprint(const parameter_set& parameters, const scaling_state& scaling);

}  // namespace trainer

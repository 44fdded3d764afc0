// The training run of --device cuda: the CPU run's data order, schedule, logs and checkpoint format
// (../trainer.hpp), with the model, its gradients, AdamW and the FP8 scaling state on the GPU. A
// host header: main() includes it where the trainer is built with CUDA (FP8_TRAINER_CUDA).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../options.hpp"
#include "../process_group.hpp"
#include "../trainer.hpp"
#include "producer_calls.hpp"

namespace trainer::cuda {

// Builds the GPU run for `options` (which check_device_options accepted): loads the data, builds
// the host model (the parameter layout and the checkpoint's copy), restores --resume on the host
// and uploads everything. The host model's parameters (master weights, moments, the compute copy
// made from the master weights) and scaling() are refreshed from the device by save(); between saves
// they are stale, and its gradients are never refreshed (gradients_of downloads them). Throws like
// training_run's constructor, and fp8::cuda_error when no GPU can be used. With a group of several ranks
// (mpirun), each rank drives one GPU and the ranks reduce gradients and amaxes through NCCL
// (docs/distributed_training.md); collective_error where the trainer was built without NCCL.
std::unique_ptr<training_run> make_training_run(const run_options& options, process_group& group);
// This process alone.
std::unique_ptr<training_run> make_training_run(const run_options& options);

// How many linear-layer calls of a run made by make_training_run took FP8 codes, or an amax, from
// the kernel that produced the operand (producer_calls.hpp): whether, and how often, each path ran.
// Throws std::invalid_argument for a run that is not a GPU run.
producer_calls producers_of(const training_run& run);

// The gradients of the last step of a run made by make_training_run, unclipped (the optimizer clips
// them as it reads them), in the host model's parameter layout; checkpoints do not hold them. Throws
// std::invalid_argument for a run that is not a GPU run.
std::vector<float> gradients_of(const training_run& run);

}  // namespace trainer::cuda

// The GPU training step, evaluation, save and load; run() (logs, progress, checkpoints every N
// steps) is the CPU run's, which calls these.
#include "trainer_cuda.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include <fp8/cuda/error.hpp>

#include "../gpu_ranks.hpp"
#include "../scaling_state.hpp"
#include "adamw.hpp"
#include "device_memory.hpp"
#include "device_model.cuh"
#include "gradient_sum.hpp"
#include "nccl_group.hpp"
#include "stats_rows.hpp"

namespace trainer::cuda {

namespace {

// What shrinks a run's device memory: a pass holds --micro-batch (else --batch) sequences of
// activations per block.
constexpr const char* too_large_hint =
    "lower --batch (or run each step in passes with --micro-batch), --context, --layers, --d-model or "
    "--hidden";

class cuda_training_run final : public training_run {
 public:
  // group: the ranks that train together (null: this process alone).
  cuda_training_run(run_options options, process_group* group) : training_run(std::move(options), group) {
#ifdef FP8_TRAINER_NCCL
    if (group_->size() > 1) devices_ = join_nccl_group(*group_);  // chooses this rank's GPU first
#endif
    int devices = 0;
    FP8_CUDA_CHECK(cudaGetDeviceCount(&devices));
    if (devices == 0) throw fp8::error("--device cuda: no CUDA device is visible (check nvidia-smi)");
    const recipe_switches switches{options_.recipe, options_.power_of_two_scales,
                                   options_.current_scaling_for};
    const fp8::gemm_recipe recipe = device_recipe(scaling_->recipe(), delayed_config(switches));
    // One pass of the model is --micro-batch sequences when the step is sharded (as on the CPU).
    try {
      device_ = make_device_model(
          options_.model, split_.micro, *model_, policy_, recipe, options_.shadow_every > 0, stream_,
          devices_ != nullptr ? &devices_->amax_reducer() : nullptr, options_.attention);
      device_->producer_amaxes(options_.producer_amaxes);
      device_->producer_fp8(options_.producer_fp8);
    } catch (const fp8::cuda_error& e) {
      if (e.status() != cudaErrorMemoryAllocation) throw;
      throw fp8::error(std::string(e.what()) + "; the run does not fit this GPU: " + too_large_hint);
    }
    upload_scaling();
  }

  step_record train_step(tensor_stats_log* stats) override {
    step_record record;
    // Statistics steps count the casts of the step's first pass (as the CPU logs the operands of
    // one pass); fp32 runs have no casts and log nothing, as on the CPU.
    const bool statistics = stats != nullptr && device_->records_scaling();
    if (stats != nullptr) stats->set_step(step_ + 1);
    device_->collect_statistics(statistics);
    if (split_.sharded()) {
      gpu_sharded_gradients(record);
    } else {
      loader_->next(inputs_.data(), targets_.data());
      record.train_loss = device_->forward(inputs_.data(), targets_.data(), pass_kind::train);
      device_->backward(gradient_mode::overwrite);
      device_->collect_statistics(false);
      if (shadow_step()) {
        // The same batch and weights through BF16 GEMMs, forward only; the scaling state is not touched.
        record.shadow_loss = device_->forward(inputs_.data(), targets_.data(), pass_kind::shadow);
      }
    }
    if (statistics) {
      log_statistics(*stats, *scaling_, policy_, model_->linear_layers(), device_->read_statistics());
    }
    const float lr = schedule_.at(step_);
    record.learning_rate = lr;
    record.grad_norm = optimizer_step(*device_, options_.adamw, lr, step_, options_.clip_norm);
    finish_step(record);
    return record;
  }

  double evaluate() override {
    // W's copies cast here record no amax: the layers cast W again at the next training call.
    return mean_validation_loss([&](const std::int32_t* inputs, const std::int32_t* targets) {
      return device_->forward(inputs, targets, pass_kind::evaluate);
    });
  }

  void save(const std::string& path) const override {
    refresh_host_copies(host_copies::checkpoint);  // the checkpoint is written from the host copies
    training_run::save(path);
  }

  void load(const std::string& path) override {
    training_run::load(path);  // checks everything, then commits to the host copies
    // device_parameters copies with cudaMemcpy, which orders with the legacy default stream only:
    // the step's kernels on stream_ must be done before their buffers are replaced.
    FP8_CUDA_CHECK(cudaStreamSynchronize(stream_));
    device_->parameters().upload(model_->parameters());
    device_->weights_changed();
    upload_scaling();
  }

  struct producer_calls producer_calls() const {
    return device_->producer_calls();
  }

  // The gradients of the last step, unclipped (gradients_of).
  std::vector<float> gradients() const {
    FP8_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return device_->parameters().grad.to_host();
  }

  std::string describe() const override {
    int device = 0;
    cudaDeviceProp properties{};
    FP8_CUDA_CHECK(cudaGetDevice(&device));
    FP8_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    std::ostringstream out;
    out << training_run::describe() << "device:    cuda " << device << " (" << properties.name << ", sm_"
        << properties.major << properties.minor << ")";
    if (group_->size() > 1) out << " on rank 0, one GPU per rank";
    out << "\n";
    std::size_t free = 0, total = 0;
    FP8_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    out << "memory:    "
        << memory_summary(buffer_bytes_held().load(), device_->linear_layer_memory(), free, total) << "\n";
    const std::string attention = device_->attention_description();
    if (!attention.empty()) out << "attention: " << attention << "\n";
    return out.str();
  }

 protected:
  // The master weights and the scaling state, for the replica check's hash; the moments too, for a
  // checkpoint. The gradients and the compute copy are not downloaded (a checkpoint holds neither):
  // at 1 B parameters each buffer is 4 GB. In bf16 and fp8 runs the device keeps the linear
  // weights' compute copy only as BF16 (the float copy is not written after the first step), so
  // for a checkpoint the host's compute copy is made from the master weights, as the CPU run makes
  // it, which keeps the host model whole where it is written.
  void refresh_host_copies(host_copies what) const override {
    FP8_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the last update done (see load)
    parameter_set& host = model_->parameters();
    const bool checkpoint = what == host_copies::checkpoint;
    device_->parameters().download(host, {true, false, false, checkpoint});
    if (checkpoint) host.refresh_compute(policy_.activation_storage());
    scaling_->delayed() = device_->scaling().state().download(stream_);
  }
  const char* gradient_collective() const override { return "ncclAllReduce"; }

 private:
  void upload_scaling() { device_->scaling().state().upload(scaling_->delayed(), stream_); }
  bool shadow_step() const { return options_.shadow_every > 0 && (step_ + 1) % options_.shadow_every == 0; }

  // The CPU's sharded step (../data_parallel.cpp) on the GPU: this rank's share of the global batch,
  // its passes, the all-reduce of the gradients in place and then of the two losses (devices_; none
  // on one rank), and the mean over all passes. The amaxes are reduced by the optimizer step's end_step.
  void gpu_sharded_gradients(step_record& record) {
    draw_rank_windows();
    const bool shadow = shadow_step();
    const std::size_t pass_tokens = std::size_t(split_.micro) * std::size_t(options_.model.context);
    for (int p = 0; p < split_.passes(); ++p) {
      const std::int32_t* inputs = inputs_.data() + std::size_t(p) * pass_tokens;
      const std::int32_t* targets = targets_.data() + std::size_t(p) * pass_tokens;
      const float loss = float(device_->forward(inputs, targets, pass_kind::train));
      // The first pass writes the gradients, the others add theirs in pass order (the CPU's sum but
      // for association: the embedding's kernel adds each pass's rows to the running sum).
      device_->backward(p == 0 ? gradient_mode::overwrite : gradient_mode::accumulate);
      device_->collect_statistics(false);  // the first pass only
      const float shadow_loss = shadow ? float(device_->forward(inputs, targets, pass_kind::shadow)) : 0.0f;
      gradient_sum_.add_pass_losses(p, loss, shadow_loss);
    }
    const device_gradient_sum::mean_losses mean =
        gradient_sum_.finish(device_->parameters(), split_.shards(), devices_.get(), stream_);
    record.train_loss = double(mean.loss);
    if (shadow) record.shadow_loss = double(mean.shadow);
  }

  cudaStream_t stream_ = nullptr;          // the legacy default stream: the host copies order with it
  std::unique_ptr<device_group> devices_;  // NCCL over the ranks (null on one rank); outlives device_
  std::unique_ptr<device_model> device_;
  device_gradient_sum gradient_sum_;  // sharded steps: the losses, the sum over ranks and the mean
};

}  // namespace

std::unique_ptr<training_run> make_training_run(const run_options& options, process_group& group) {
#ifdef FP8_TRAINER_NCCL
  check_gpu_data_parallel(group.size(), true);
#else
  check_gpu_data_parallel(group.size(), false);
#endif
  return std::make_unique<cuda_training_run>(options, &group);
}

std::unique_ptr<training_run> make_training_run(const run_options& options) {
  return std::make_unique<cuda_training_run>(options, nullptr);
}

namespace {

// run as the GPU run it must be; `who` names the caller in the error where it is not.
const cuda_training_run& gpu_run(const training_run& run, const char* who) {
  const auto* gpu = dynamic_cast<const cuda_training_run*>(&run);
  if (gpu == nullptr) {
    throw std::invalid_argument(std::string("trainer::cuda::") + who +
                                ": the run is not a GPU run (--device cuda)");
  }
  return *gpu;
}

}  // namespace

producer_calls producers_of(const training_run& run) { return gpu_run(run, "producers_of").producer_calls(); }

std::vector<float> gradients_of(const training_run& run) { return gpu_run(run, "gradients_of").gradients(); }

}  // namespace trainer::cuda

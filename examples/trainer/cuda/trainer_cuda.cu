// The GPU training step, evaluation, save and load; run() (logs, progress, checkpoints every N
// steps) is the CPU run's, which calls these.
#include "trainer_cuda.hpp"

#include <cuda_runtime.h>

#include <sstream>
#include <string>

#include <fp8/cuda/error.hpp>

#include "../scaling_state.hpp"
#include "adamw.hpp"
#include "device_model.cuh"

namespace trainer::cuda {

namespace {

class cuda_training_run final : public training_run {
 public:
  explicit cuda_training_run(run_options options) : training_run(std::move(options)) {
    int devices = 0;
    FP8_CUDA_CHECK(cudaGetDeviceCount(&devices));
    if (devices == 0) throw fp8::error("--device cuda: no CUDA device is visible (check nvidia-smi)");
    const recipe_switches switches{options_.recipe, options_.power_of_two_scales,
                                   options_.current_scaling_for};
    const fp8::gemm_recipe recipe = device_recipe(scaling_->recipe(), delayed_config(switches));
    device_ = make_device_model(options_.model, options_.batch, *model_, policy_, recipe,
                                options_.shadow_every > 0, stream_);
    upload_scaling();
  }

  step_record train_step(tensor_stats_log* stats) override {
    if (stats != nullptr) throw fp8::invalid_argument("--stats-every is not supported on --device cuda");
    step_record record;
    loader_->next(inputs_.data(), targets_.data());
    device_->parameters().zero_grad(stream_);
    record.train_loss = device_->forward(inputs_.data(), targets_.data(), pass_kind::train);
    device_->backward();
    if (options_.shadow_every > 0 && (step_ + 1) % options_.shadow_every == 0) {
      // The same batch and weights through BF16 GEMMs, forward only; the scaling state is not touched.
      record.shadow_loss = device_->forward(inputs_.data(), targets_.data(), pass_kind::shadow);
    }
    const float lr = schedule_.at(step_);
    record.learning_rate = lr;
    record.grad_norm = optimizer_step(*device_, options_.adamw, lr, step_, options_.clip_norm);
    ++step_;
    record.step = step_;
    record.tokens = step_ * long(inputs_.size());
    return record;
  }

  double evaluate() override {
    double total = 0.0;
    for (int b = 0; b < eval_->batches(); ++b) {
      eval_->fill(b, inputs_.data(), targets_.data());
      total += device_->forward(inputs_.data(), targets_.data(), pass_kind::evaluate);
    }
    // The evaluation cast W without recording its amax: the next training step casts it again.
    device_->drop_weight_copies();
    return total / double(eval_->batches());
  }

  void save(const std::string& path) const override {
    // The checkpoint is written from the host copies: parameters, moments and the scaling state.
    device_->parameters().download(model_->parameters());
    scaling_->delayed() = device_->scaling().state().download(stream_);
    training_run::save(path);
  }

  void load(const std::string& path) override {
    training_run::load(path);  // checks everything, then commits to the host copies
    device_->parameters().upload(model_->parameters());
    device_->weights_changed();
    upload_scaling();
  }

  std::string describe() const override {
    int device = 0;
    cudaDeviceProp properties{};
    FP8_CUDA_CHECK(cudaGetDevice(&device));
    FP8_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    std::ostringstream out;
    out << training_run::describe() << "device:    cuda " << device << " (" << properties.name << ", sm_"
        << properties.major << properties.minor << ")\n";
    return out.str();
  }

 private:
  void upload_scaling() { device_->scaling().state().upload(scaling_->delayed(), stream_); }

  cudaStream_t stream_ = nullptr;  // the legacy default stream: the host copies order with it
  std::unique_ptr<device_model> device_;
};

}  // namespace

std::unique_ptr<training_run> make_training_run(const run_options& options) {
  return std::make_unique<cuda_training_run>(options);
}

}  // namespace trainer::cuda

// The transformer of ../transformer.hpp on the device: the same layers in the same order, with the
// CUDA twins of the non-GEMM layers and fp8::cuda::linear_layer for every linear layer (BF16 or FP8
// per GEMM class and precision unit, as the precision policy says; an fp32 run's linear layers are
// FP32 cuBLAS products instead, the layer having no FP32 path). nvcc only (the layer is device code);
// the training loop (trainer_cuda.cu) and the speed benchmark drive it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include <fp8/cublaslt/handle.hpp>
#include <fp8/cuda/linear.cuh>

#include "../model.hpp"
#include "../precision.hpp"
#include "adamw.hpp"
#include "attention.hpp"
#include "batched_gemm.hpp"
#include "device_buffer.hpp"
#include "linear_policy.hpp"
#include "phase_profile.hpp"
#include "rope.hpp"

namespace trainer::cuda {

// What a forward pass is for: a training step records amaxes (and its backward follows), an
// evaluation records nothing, a shadow pass runs every GEMM in BF16 and records nothing.
enum class pass_kind { train, evaluate, shadow };

class device_transformer {
 public:
  // shape: the model options (transformer); host: the parameter layout and values (all five buffers
  // are copied); linears: the host model's linear layers in scaling-state order (per block wqkv, wo,
  // w_gate_up, w_down, then lm_head). with_shadow allocates the BF16 layers of shadow passes.
  // Throws fp8::invalid_argument naming the layer when a shape does not fit an FP8 product.
  device_transformer(const model_options& shape, int batch, const parameter_set& host,
                     const std::vector<linear_layer_info>& linears, const precision_policy& policy,
                     const fp8::gemm_recipe& recipe, bool with_shadow, cudaStream_t stream);

  device_parameters& parameters() { return params_; }
  fp8::cuda::linear_scaling& scaling() { return scaling_; }
  cudaStream_t stream() const { return stream_; }
  // False in fp32 runs: they keep no FP8 statistics, and the scaling state stays as it is (as on
  // the CPU, whose fp32 passes get no scaling state).
  bool records_scaling() const { return !fp32_; }
  // Times the phases of later passes (null: none). The profile must outlive its use.
  void set_profile(phase_profile* profile) { profile_ = profile; }

  // inputs, targets: host [B, T] bytes. Returns the mean cross-entropy; keeps the activations and
  // the loss gradient for backward() (waits for the stream: the loss is read on the host).
  double forward(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind);
  // inputs, targets already on the device ([B, T], int32).
  double forward_device(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind);
  // Accumulates the gradients of the last training forward pass into parameters().grad.
  void backward();
  // After the optimizer (or a load): compute = master in BF16, its BF16 copy for the layers, and
  // every layer's FP8 weight copies dropped (remade, with their amaxes recorded, at the next use).
  void weights_changed();
  // Drops the FP8 weight copies only (after an evaluation, which casts W without recording its
  // amax: the next training step casts it again and records).
  void drop_weight_copies();

 private:
  struct block_activations {
    device_buffer<float> ln1, ln1_rstd, qkv, qkvr, att, atty, attproj, residual2, ln2, ln2_rstd, gate_up,
        swiglu, mlp_out, residual3;
  };
  struct block_parameters {
    std::size_t attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down;
  };

  float* compute(std::size_t tensor) { return params_.compute.data() + params_.offset(tensor); }
  float* grad(std::size_t tensor) { return params_.grad.data() + params_.offset(tensor); }
  const __nv_bfloat16* weight16(std::size_t tensor) const;
  fp8::cuda::linear_layer& layer(std::size_t linear, pass_kind kind);
  void mark(phase p) {
    if (profile_ != nullptr) profile_->mark(p);
  }
  // y[M, N] = x[M, K] . W[N, K]^T through the layer `linear`, W the parameter tensor `weight`.
  void linear_forward(std::size_t linear, pass_kind kind, float* y, const float* x, std::size_t weight, int m,
                      int k, int n);
  // dx[M, K] = dy . W; grad(W) += dy^T . x.
  void linear_backward(std::size_t linear, float* dx, std::size_t weight, const float* dy, const float* x,
                       int m, int k, int n);

  int batch_, context_, channels_, layers_, heads_, hidden_, vocab_;
  bool fp32_;                 // --precision fp32: FP32 storage and products, no linear_layer
  storage stored_;            // activations and compute weights: fp32, or BF16 values in floats
  gemm_mode attention_mode_;  // attention's products: fp32 or bf16
  cudaStream_t stream_;
  device_parameters params_;
  device_buffer<std::uint16_t> weights16_;  // [size] BF16 copy of the compute weights (not in fp32 runs)
  std::size_t wte_, final_norm_, lm_head_;
  std::vector<block_parameters> blocks_;
  attention_shape shape_;
  device_rope_table rope_;
  cublas_handle cublas_;
  attention_workspace attention_;
  fp8::cublaslt::handle lt_;
  fp8::cuda::linear_scaling scaling_;
  std::vector<std::unique_ptr<fp8::cuda::linear_layer>> layers_fp8_;     // the policy's precision
  std::vector<std::unique_ptr<fp8::cuda::linear_layer>> layers_shadow_;  // all BF16 (shadow passes)
  phase_profile* profile_ = nullptr;

  device_buffer<std::int32_t> inputs_, targets_;  // [N]
  device_buffer<float> encoded_;                  // [N, C]
  std::vector<block_activations> acts_;
  device_buffer<float> lnf_, lnf_rstd_, logits_, losses_;  // [N, C], [N], [N, V], [N]
  device_buffer<float> dresidual_, dbuffer_c_, dbuffer_3c_, dbuffer_f_, dbuffer_2f_, dlogits_;
  device_buffer<float> norm_workspace_;  // rmsnorm_backward_workspace_size(N, C)
  device_buffer<double> mean_scratch_;   // [1]
  // BF16 operands and results of the linear layers: x and dx [N, max(C, F)], y and dy [N, max(3C, 2F, V)].
  device_buffer<std::uint16_t> x16_, y16_, dy16_, dx16_;
  device_buffer<float> wgrad_scratch_;  // fp32 runs: [max N x K] one wgrad product before it is added
};

// The optimizer half of a training step, after forward(train) and backward(): the gradient norm
// (returned; read on the host), clipping to clip_norm (<= 0: none), AdamW at `step` with
// `learning_rate`, the new compute weights, and the end of the FP8 scaling step (amax histories roll,
// next scales). The CPU run's order (../trainer.cpp).
double optimizer_step(device_transformer& model, const adamw_options& options, float learning_rate, long step,
                      float clip_norm, phase_profile* profile = nullptr);

}  // namespace trainer::cuda

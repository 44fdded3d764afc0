// The transformer of ../transformer.hpp on the device: the same layers in the same order, with the
// CUDA twins of the non-GEMM layers and the model's device_linears for every linear layer (BF16 or
// FP8 per GEMM class and precision unit, as the precision policy says; FP32 cuBLAS products in fp32
// runs). nvcc only; the training loop (trainer_cuda.cu) and the speed benchmark drive it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attention.hpp"
#include "device_model.cuh"
#include "rope.hpp"

namespace trainer::cuda {

class device_transformer final : public device_model {
 public:
  // shape: the model options (transformer); host: the parameter layout and values (all five buffers
  // are copied); linears: the host model's linear layers in scaling-state order (per block wqkv, wo,
  // w_gate_up, w_down, then lm_head). with_shadow allocates the BF16 layers of shadow passes.
  // Throws fp8::invalid_argument naming the layer when a shape does not fit an FP8 product.
  // attention: materialized, fused (throws fp8::error with the reason where it is unavailable: an
  // fp32 run, a build without cuDNN, a shape or device cuDNN has no kernel for) or automatic (fused
  // where available, else materialized; attention_description() says which and why).
  device_transformer(const model_options& shape, int batch, const parameter_set& host,
                     const std::vector<linear_layer_info>& linears, const precision_policy& policy,
                     const fp8::gemm_recipe& recipe, bool with_shadow, cudaStream_t stream,
                     fp8::cuda::device_amax_reducer* amax_reducer = nullptr,
                     attention_kernel attention = attention_kernel::automatic);

  double forward(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind) override;
  // inputs, targets already on the device ([B, T], int32).
  double forward_device(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind);
  void backward() override;
  std::string attention_description() const override { return attention_path_.description; }

 private:
  struct block_activations {
    device_buffer<float> ln1, ln1_rstd, qkv, qkvr, att, atty, attproj, residual2, ln2, ln2_rstd, gate_up,
        swiglu, mlp_out, residual3;
    // The fused path saves these for the backward pass instead of qkvr and att (which it leaves empty;
    // the materialised path leaves these empty).
    device_buffer<std::uint16_t> qkv16;  // [B, T, 3C] q, k (rotated) and v as BF16
    device_buffer<std::uint16_t> att16;  // [B, T, C]  the heads' outputs as BF16
    device_buffer<float> att_stats;      // [B, H, T]  each score row's log-sum-exp
  };
  struct block_parameters {
    std::size_t attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down;
  };

  int batch_, context_, channels_, layers_, heads_, hidden_, vocab_;
  std::size_t wte_, final_norm_, lm_head_;
  std::vector<block_parameters> blocks_;
  attention_shape shape_;
  device_rope_table rope_;
  cublas_handle cublas_;  // attention's products (materialised path)
  attention_path attention_path_;
  attention_workspace attention_;

  device_buffer<std::int32_t> inputs_, targets_;  // [N]
  device_buffer<float> encoded_;                  // [N, C]
  std::vector<block_activations> acts_;
  device_buffer<float> lnf_, lnf_rstd_, logits_, losses_;  // [N, C], [N], [N, V], [N]
  device_buffer<float> dresidual_, dbuffer_c_, dbuffer_3c_, dbuffer_f_, dbuffer_2f_, dlogits_;
  device_buffer<float> norm_workspace_;  // rmsnorm_backward_workspace_size(N, C)
  device_buffer<double> mean_scratch_;   // [1]
};

}  // namespace trainer::cuda

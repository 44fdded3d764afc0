// The transformer of ../transformer.hpp on the device: the same layers in the same order, with the
// CUDA twins of the non-GEMM layers and the model's device_linears for every linear layer (BF16 or
// FP8 per GEMM class and precision unit, as the precision policy says; FP32 cuBLAS products in fp32
// runs). nvcc only; the training loop (trainer_cuda.cu) and the speed benchmark drive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../precision.hpp"
#include "attention.hpp"
#include "device_buffer.hpp"
#include "device_loss.hpp"
#include "device_model.cuh"
#include "rope.hpp"

namespace trainer::cuda {

// An activation that a linear layer reads or writes, in the run's form: floats in fp32 runs; BF16
// (raw __nv_bfloat16 bits) in bf16 and fp8 runs, which the linear layers read and write as they are
// (no staging copy) and the layer next to them (RMSNorm's forward, SwiGLU, the fused attention)
// writes or reads directly. The transformer's: the norms' outputs ln1, ln2 and lnf (the inputs of
// wqkv, w_gate_up and the head), the tensors around SwiGLU (gate_up [N, 2F], its output [N, F], and
// their gradients), and those around the attention, which are BF16 on the fused path only (qkv, the
// heads' output atty and their gradients; the materialised path keeps floats in every run). The
// values are the same either way (floats would hold BF16 values). Only the chosen form is allocated.
// Two more are shared by all blocks rather than kept per block: branch_, the output of wo and of
// w_down (read at once by the residual add), and dnorm_, the gradient of a norm's output (the dx of
// wqkv, w_gate_up and the head, read at once by RMSNorm's backward).
class activation_tensor {
 public:
  enum class form { floats, bf16 };
  activation_tensor() = default;
  activation_tensor(std::size_t count, form kind) : bf16_(kind == form::bf16) {
    if (bf16_) {
      bf16_values_ = device_buffer<std::uint16_t>(count);
    } else {
      floats_ = device_buffer<float>(count);
    }
  }
  // The run's form: BF16 where activations are stored as BF16.
  activation_tensor(std::size_t count, storage stored)
      : activation_tensor(count, stored == storage::bf16 ? form::bf16 : form::floats) {}
  // A view of `owner`'s memory, in its form, holding none of its own: for tensors of several blocks
  // that are never live at once. `owner` must outlive it.
  static activation_tensor view_of(activation_tensor& owner) {
    activation_tensor view;
    view.bf16_ = owner.bf16_;
    view.floats_view_ = owner.floats();
    view.bf16_view_ = owner.bf16();
    return view;
  }
  bool is_bf16() const { return bf16_; }
  // The float values: null in the BF16 form.
  float* floats() { return floats_view_ != nullptr ? floats_view_ : floats_.data(); }
  const float* floats() const { return floats_view_ != nullptr ? floats_view_ : floats_.data(); }
  // The BF16 values: null in the float form.
  std::uint16_t* bf16() { return bf16_view_ != nullptr ? bf16_view_ : bf16_values_.data(); }
  const std::uint16_t* bf16() const { return bf16_view_ != nullptr ? bf16_view_ : bf16_values_.data(); }
  // As a linear layer's result or operand.
  linear_output output() { return bf16_ ? linear_output(bf16()) : linear_output(floats()); }
  linear_input input() const { return bf16_ ? linear_input(bf16()) : linear_input(floats()); }

 private:
  bool bf16_ = false;
  device_buffer<float> floats_;
  device_buffer<std::uint16_t> bf16_values_;
  float* floats_view_ = nullptr;  // a view's memory (view_of), else null
  std::uint16_t* bf16_view_ = nullptr;
};

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

  // forward() with inputs, targets already on the device ([B, T], int32).
  double forward_device(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind);

  std::string attention_description() const override { return attention_path_.description; }

 private:
  double forward_pass(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind) override;
  // The forward pass on device inputs (forward_device without recording its kind).
  double forward_on_device(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind);
  void backward_pass() override;

  // The public constructor's work, with `attention` already resolved: the linear layers' BF16 plan
  // (the base, built first) depends on the path.
  device_transformer(const model_options& shape, int batch, const parameter_set& host,
                     const std::vector<linear_layer_info>& linears, const precision_policy& policy,
                     const fp8::gemm_recipe& recipe, bool with_shadow, cudaStream_t stream,
                     fp8::cuda::device_amax_reducer* amax_reducer, attention_path attention);

  struct block_activations {
    device_buffer<float> ln1_rstd, qkvr, att, residual2, ln2_rstd, residual3;
    // [N, C]: wqkv's and w_gate_up's x; [N, 2F], [N, F]. ln1, ln2 and swiglu are views of
    // one_block_x_c_ and one_block_x_f_ where the layer they feed has an FP8 or fake wgrad, whose
    // backward reads no X.
    activation_tensor ln1, ln2;
    activation_tensor gate_up, swiglu;
    // wqkv's y [N, 3C] and wo's x [N, C]: floats on the materialised path; BF16 on the fused one,
    // where they are also what the backward pass keeps in place of qkvr and att (which it leaves
    // empty): qkv with q and k rotated in place, and the heads' outputs.
    activation_tensor qkv, atty;
    device_buffer<float> att_stats;  // [B, H, T] fused path: each score row's log-sum-exp
    // Whether the last forward's producer wrote wqkv's, w_gate_up's and w_down's X as the layer's
    // FP8 codes (device_linears::fp8_output_of), leaving ln1, ln2 and swiglu unwritten: their
    // backward passes name X as fp8_written (the FP8 wgrad reads the layer's transposed copy).
    bool ln1_fp8 = false, ln2_fp8 = false, swiglu_fp8 = false;
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
  // The X of wqkv and w_gate_up ([N, C]) and of w_down ([N, F]) for the layers whose backward reads
  // no X (an FP8 or fake wgrad: the transposed copy the forward made): written by the norm or SwiGLU
  // and read by the layer's forward at once, so one buffer of each shape serves all such layers of
  // every block (the blocks' ln1, ln2 and swiglu are then views of them). Unallocated where no
  // layer needs it.
  activation_tensor one_block_x_c_, one_block_x_f_;
  std::vector<block_activations> acts_;
  // [N, C]: wo's and w_down's y, each added into the residual stream at once, so one serves every
  // block; BF16 in bf16 and fp8 runs, read by the residual add as it is (no staging copy).
  activation_tensor branch_;
  activation_tensor lnf_;          // [N, C]: the head's x
  bool lnf_fp8_ = false;           // the last forward wrote the head's X as FP8 codes (--fp8-head)
  device_buffer<float> lnf_rstd_;  // [N]
  device_loss loss_;
  device_buffer<float> dresidual_;
  // [N, C]: the norms' output gradients (the dx of wqkv, w_gate_up and the head), which RMSNorm's
  // backward reads; BF16 in bf16 and fp8 runs. dbuffer_c_: wo's dx on the materialised path (floats,
  // the attention's backward reads them; not allocated on the fused path).
  activation_tensor dnorm_;
  device_buffer<float> dbuffer_c_;
  // Attention's gradients: wqkv's dy [N, 3C] (floats on the materialised path, BF16 on the fused one,
  // where cuDNN writes it) and, on the fused path only, wo's dx [N, C] as BF16, which cuDNN reads as
  // dO (the materialised path takes wo's dx in dbuffer_c_).
  activation_tensor dqkv_;
  device_buffer<std::uint16_t> datty16_;
  activation_tensor dswiglu_, dgate_up_;  // [N, F], [N, 2F]
  device_buffer<float> norm_workspace_;   // rmsnorm_backward_workspace_size(N, C)

  // The amaxes the model's kernels record as they write a linear layer's BF16 operand, for layers
  // that take them (device_linears::amax_slot), zeroed at the start of each pass (bf16 and fp8 runs):
  // per block ln1, ln2 and SwiGLU's output (forward_slot), then lnf, then per block SwiGLU's input
  // gradient, w_gate_up's dY (backward_slot). [4 * layers + 1]
  device_buffer<float> producer_amax_;
  static std::size_t forward_slot(int block, int which) { return std::size_t(3 * block + which); }
  std::size_t backward_slot(int block) const { return std::size_t(3 * layers_ + 1 + block); }
  // The slot where the producer of layer `linear`'s `tensor` records its amax, or null where the
  // layer does not take it (or in fp32 runs).
  float* producer_amax(std::size_t linear, fp8::cuda::linear_tensor tensor, std::size_t slot);
};

}  // namespace trainer::cuda

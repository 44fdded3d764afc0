// The transformer's forward and backward passes on the device, in the CPU model's order
// (../transformer.cpp), with the linear layers through fp8::cuda::linear_layer.
#include "transformer.cuh"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fp8/cuda/error.hpp>

#include "embedding.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "storage.hpp"
#include "swiglu.hpp"

namespace trainer::cuda {

namespace {

// The linear layers' operands the transformer holds as BF16 (activation_tensor), in bf16 and fp8
// runs: the norms' outputs as x of wqkv (ln1), w_gate_up (ln2) and the head (lnf), and their
// gradients as those layers' dx (RMSNorm's backward reads them as BF16); the tensors around SwiGLU,
// which are w_gate_up's y and dy (gate_up and its gradient) and w_down's x and dx (SwiGLU's output
// and its gradient); wo's and w_down's y, which the residual add reads as BF16; and with the fused attention
// (`fused_attention`) the tensors around cuDNN, which are wqkv's y and dy (qkv and its gradient) and
// wo's x and dx (the heads' output and its gradient).
// Layers per block: wqkv, wo, w_gate_up, w_down; then the head.
std::vector<linear_bf16_operands> bf16_operands_of(std::size_t linears, const precision_policy& policy,
                                                   bool fused_attention) {
  std::vector<linear_bf16_operands> operands(linears);
  if (policy.activation_storage() != storage::bf16 || linears == 0) return operands;
  for (std::size_t block = 0; 4 * block + 3 < linears; ++block) {
    linear_bf16_operands& wqkv = operands[4 * block];
    linear_bf16_operands& wo = operands[4 * block + 1];
    linear_bf16_operands& w_gate_up = operands[4 * block + 2];
    linear_bf16_operands& w_down = operands[4 * block + 3];
    wqkv.x = wqkv.dx = true;
    wqkv.y = wqkv.dy = fused_attention;
    wo.x = wo.dx = fused_attention;
    wo.y = true;  // the residual add reads it as BF16
    w_gate_up.x = w_gate_up.y = w_gate_up.dy = w_gate_up.dx = true;
    w_down.x = w_down.dx = true;
    w_down.y = true;  // the residual add reads it as BF16
  }
  operands[linears - 1].x = operands[linears - 1].dx = true;  // the head
  return operands;
}

// RMSNorm's backward from an output gradient in the run's form (BF16 read as it is, without a copy).
void rmsnorm_backward(float* dinp, float* dweight, const activation_tensor& dout, const float* inp,
                      const float* weight, const float* rstd, int n, int c, storage stored, float* workspace,
                      cudaStream_t stream) {
  if (dout.is_bf16()) {
    cuda::rmsnorm_backward(dinp, dweight, dout.bf16(), inp, weight, rstd, n, c, stored, workspace, stream);
  } else {
    cuda::rmsnorm_backward(dinp, dweight, dout.floats(), inp, weight, rstd, n, c, stored, workspace, stream);
  }
}

// residual + a linear layer's output in the run's form (BF16 read as it is, without a staging copy).
void residual_forward(float* out, const float* residual, const activation_tensor& branch, std::size_t count,
                      storage stored, cudaStream_t stream) {
  if (branch.is_bf16()) {
    cuda::residual_forward(out, residual, branch.bf16(), count, stored, stream);
  } else {
    cuda::residual_forward(out, residual, branch.floats(), count, stored, stream);
  }
}

// The producers of linear-layer operands: RMSNorm's forward and SwiGLU's two passes. Each writes
// the layer's FP8 codes where the layer takes them (`codes`, from device_linears::fp8_output_of),
// else the tensor in the run's form: floats in fp32 runs, BF16 otherwise, with its amax recorded as
// it is written (`amax`, or null; fp32 runs pass none). Each returns the operand the layer reads:
// linear_input::fp8_written(), or the tensor.
linear_input rmsnorm_into(activation_tensor& out, const std::optional<fp8_output>& codes, float* rstd,
                          const float* inp, const float* weight, int n, int c, cudaStream_t stream,
                          float* amax) {
  if (codes) {
    cuda::rmsnorm_forward(*codes, rstd, inp, weight, n, c, stream);
    return linear_input::fp8_written();
  }
  if (out.is_bf16()) {
    cuda::rmsnorm_forward(out.bf16(), rstd, inp, weight, n, c, stream, amax);
  } else {
    cuda::rmsnorm_forward(out.floats(), rstd, inp, weight, n, c, storage::fp32, stream);
  }
  return out.input().with_amax(amax);
}

linear_input swiglu_forward_into(activation_tensor& out, const std::optional<fp8_output>& codes,
                                 const activation_tensor& inp, int n, int f, cudaStream_t stream,
                                 float* amax) {
  if (codes) {
    cuda::swiglu_forward(*codes, inp.bf16(), n, f, stream);
    return linear_input::fp8_written();
  }
  if (out.is_bf16()) {
    cuda::swiglu_forward(out.bf16(), inp.bf16(), n, f, stream, amax);
  } else {
    cuda::swiglu_forward(out.floats(), inp.floats(), n, f, storage::fp32, stream);
  }
  return out.input().with_amax(amax);
}

linear_input swiglu_backward_into(activation_tensor& dinp, const std::optional<fp8_output>& codes,
                                  const activation_tensor& dout, const activation_tensor& inp, int n, int f,
                                  cudaStream_t stream, float* amax) {
  if (codes) {
    cuda::swiglu_backward(*codes, dout.bf16(), inp.bf16(), n, f, stream);
    return linear_input::fp8_written();
  }
  if (dinp.is_bf16()) {
    cuda::swiglu_backward(dinp.bf16(), dout.bf16(), inp.bf16(), n, f, stream, amax);
  } else {
    cuda::swiglu_backward(dinp.floats(), dout.floats(), inp.floats(), n, f, storage::fp32, stream);
  }
  return dinp.input().with_amax(amax);
}

// A layer's X as the backward pass reads it (its wgrad): the tensor, or, where the forward's
// producer wrote X as FP8 codes, fp8_written() (the FP8 wgrad reads the layer's transposed copy).
linear_input saved_x(const activation_tensor& x, bool fp8_written) {
  return fp8_written ? linear_input::fp8_written() : x.input();
}

constexpr fp8::cuda::linear_tensor x_tensor = fp8::cuda::linear_tensor::x;
constexpr fp8::cuda::linear_tensor dy_tensor = fp8::cuda::linear_tensor::dy;

}  // namespace

float* device_transformer::producer_amax(std::size_t linear, fp8::cuda::linear_tensor tensor,
                                         std::size_t slot) {
  if (producer_amax_.size() == 0) return nullptr;  // fp32 runs
  return linears_.amax_slot(linear, tensor, producer_amax_.data() + slot);
}

device_transformer::device_transformer(const model_options& shape, int batch, const parameter_set& host,
                                       const std::vector<linear_layer_info>& linears,
                                       const precision_policy& policy, const fp8::gemm_recipe& recipe,
                                       bool with_shadow, cudaStream_t stream,
                                       fp8::cuda::device_amax_reducer* amax_reducer,
                                       attention_kernel attention)
    : device_transformer(
          shape, batch, host, linears, policy, recipe, with_shadow, stream, amax_reducer,
          choose_attention(attention, policy.other_mode(),
                           attention_shape{batch, shape.context, shape.channels, shape.heads})) {}

device_transformer::device_transformer(const model_options& shape, int batch, const parameter_set& host,
                                       const std::vector<linear_layer_info>& linears,
                                       const precision_policy& policy, const fp8::gemm_recipe& recipe,
                                       bool with_shadow, cudaStream_t stream,
                                       fp8::cuda::device_amax_reducer* amax_reducer, attention_path attention)
    : device_model(host, linear_features_of(shape, linears.size()), linears,
                   std::int64_t(batch) * std::int64_t(shape.context), policy, recipe, with_shadow, stream,
                   amax_reducer,
                   bf16_operands_of(linears.size(), policy, attention.kernel == attention_kernel::fused)),
      batch_(batch),
      context_(shape.context),
      channels_(shape.channels),
      layers_(shape.layers),
      heads_(shape.heads),
      hidden_(shape.hidden),
      vocab_(shape.vocab),
      wte_(host.index_of("wte")),
      final_norm_(host.index_of("final_norm")),
      lm_head_(host.index_of("lm_head")),
      shape_{batch, shape.context, shape.channels, shape.heads},
      rope_(make_rope_table(shape.context, shape.channels / shape.heads)),
      attention_path_(std::move(attention)),
      attention_(shape_, attention_path_.kernel) {
  if (linears.size() != std::size_t(4 * layers_ + 1)) {
    throw fp8::invalid_argument("trainer::cuda::device_transformer: expected " +
                                std::to_string(4 * layers_ + 1) + " linear layers, got " +
                                std::to_string(linears.size()));
  }
  for (int l = 0; l < layers_; ++l) {
    const std::string prefix = "blocks." + std::to_string(l) + ".";
    blocks_.push_back({host.index_of(prefix + "attn_norm"), host.index_of(prefix + "wqkv"),
                       host.index_of(prefix + "wo"), host.index_of(prefix + "mlp_norm"),
                       host.index_of(prefix + "w_gate_up"), host.index_of(prefix + "w_down")});
  }
  const std::size_t N = std::size_t(batch_) * std::size_t(context_);
  const std::size_t C = std::size_t(channels_), F = std::size_t(hidden_);
  const std::size_t T = std::size_t(context_), BH = std::size_t(batch_) * std::size_t(heads_);
  const bool fused = attention_path_.kernel == attention_kernel::fused;
  // The tensors around the attention: BF16 around cuDNN, floats around the materialised path.
  const activation_tensor::form attention_form =
      fused ? activation_tensor::form::bf16 : activation_tensor::form::floats;
  inputs_ = device_buffer<std::int32_t>(N);
  targets_ = device_buffer<std::int32_t>(N);
  encoded_ = device_buffer<float>(N * C);
  acts_.resize(std::size_t(layers_));
  // A layer's X, kept per block where its backward reads it again, else a view of the one buffer
  // of its shape that every such layer writes and reads within its forward.
  const auto layer_x = [&](std::size_t linear, std::size_t count, activation_tensor& one_block) {
    if (linears_.wgrad_reads_x(linear)) return activation_tensor(count, stored_);
    if (one_block.floats() == nullptr && one_block.bf16() == nullptr)
      one_block = activation_tensor(count, stored_);
    return activation_tensor::view_of(one_block);
  };
  for (std::size_t l = 0; l < acts_.size(); ++l) {
    block_activations& a = acts_[l];
    const std::size_t linear = 4 * l;  // wqkv, wo, w_gate_up, w_down
    a.ln1 = layer_x(linear + 0, N * C, one_block_x_c_);
    a.ln1_rstd = device_buffer<float>(N);
    a.qkv = activation_tensor(N * 3 * C, attention_form);
    if (fused) {
      a.att_stats = device_buffer<float>(BH * T);
    } else {
      a.qkvr = device_buffer<float>(N * 3 * C);
      a.att = device_buffer<float>(BH * T * T);
    }
    a.atty = activation_tensor(N * C, attention_form);
    a.residual2 = device_buffer<float>(N * C);
    a.ln2 = layer_x(linear + 2, N * C, one_block_x_c_);
    a.ln2_rstd = device_buffer<float>(N);
    a.gate_up = activation_tensor(N * 2 * F, stored_);
    a.swiglu = layer_x(linear + 3, N * F, one_block_x_f_);
    a.residual3 = device_buffer<float>(N * C);
  }
  branch_ = activation_tensor(N * C, stored_);
  lnf_ = activation_tensor(N * C, stored_);
  lnf_rstd_ = device_buffer<float>(N);
  loss_ = device_loss(N, vocab_);
  dresidual_ = device_buffer<float>(N * C);
  dnorm_ = activation_tensor(N * C, stored_);
  if (!fused) dbuffer_c_ = device_buffer<float>(N * C);
  dqkv_ = activation_tensor(N * 3 * C, attention_form);
  if (fused) datty16_ = device_buffer<std::uint16_t>(N * C);
  dswiglu_ = activation_tensor(N * F, stored_);
  dgate_up_ = activation_tensor(N * 2 * F, stored_);
  norm_workspace_ = device_buffer<float>(rmsnorm_backward_workspace_size(int(N), channels_));
  if (stored_ == storage::bf16) producer_amax_ = device_buffer<float>(std::size_t(4 * layers_ + 1));
}

double device_transformer::forward_pass(const std::int32_t* inputs, const std::int32_t* targets,
                                        pass_kind kind) {
  const std::size_t bytes = inputs_.size() * sizeof(std::int32_t);
  FP8_CUDA_CHECK(cudaMemcpyAsync(inputs_.data(), inputs, bytes, cudaMemcpyHostToDevice, stream_));
  FP8_CUDA_CHECK(cudaMemcpyAsync(targets_.data(), targets, bytes, cudaMemcpyHostToDevice, stream_));
  // The host vectors may change as soon as this returns: the copies must be done.
  FP8_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return forward_on_device(inputs_.data(), targets_.data(), kind);
}

double device_transformer::forward_device(const std::int32_t* inputs, const std::int32_t* targets,
                                          pass_kind kind) {
  return record_forward(kind, [&] { return forward_on_device(inputs, targets, kind); });
}

double device_transformer::forward_on_device(const std::int32_t* inputs, const std::int32_t* targets,
                                             pass_kind kind) {
  const int N = batch_ * context_, C = channels_, F = hidden_, V = vocab_;
  const std::size_t NC = std::size_t(N) * std::size_t(C);
  const storage stored = stored_;
  const gemm_mode attention_mode = attention_mode_;
  mark(phase::other);
  if (inputs != inputs_.data()) {
    FP8_CUDA_CHECK(cudaMemcpyAsync(inputs_.data(), inputs, inputs_.size() * sizeof(std::int32_t),
                                   cudaMemcpyDeviceToDevice, stream_));
  }
  if (targets != targets_.data()) {
    FP8_CUDA_CHECK(cudaMemcpyAsync(targets_.data(), targets, targets_.size() * sizeof(std::int32_t),
                                   cudaMemcpyDeviceToDevice, stream_));
  }
  // The producers' amax slots of this pass, forward and backward, start at zero.
  if (producer_amax_.size() > 0) {
    FP8_CUDA_CHECK(cudaMemsetAsync(producer_amax_.data(), 0, producer_amax_.size() * sizeof(float), stream_));
  }
  mark(phase::embedding);
  embedding_forward(encoded_.data(), compute(wte_), inputs_.data(), N, C, V, stream_);
  const float* residual = encoded_.data();
  for (int l = 0; l < layers_; ++l) {
    block_activations& a = acts_[std::size_t(l)];
    const block_parameters& p = blocks_[std::size_t(l)];
    const std::size_t linear = std::size_t(4 * l);
    mark(phase::norms);
    const linear_input ln1 = rmsnorm_into(a.ln1, linears_.fp8_output_of(linear + 0, x_tensor, kind, N),
                                          a.ln1_rstd.data(), residual, compute(p.attn_norm), N, C, stream_,
                                          producer_amax(linear + 0, x_tensor, forward_slot(l, 0)));
    a.ln1_fp8 = ln1.is_fp8_written();
    linear_forward(linear + 0, kind, a.qkv.output(), ln1, p.wqkv, N);
    mark(phase::attention);
    if (attention_path_.fused) {
      fused_attention_forward(a.atty.bf16(), a.att_stats.data(), a.qkv.bf16(), rope_, shape_,
                              attention_path_.fused.get(), stream_);
    } else {
      attention_forward(a.atty.floats(), a.qkvr.data(), a.att.data(), a.qkv.floats(), rope_, shape_,
                        attention_mode, stored, attention_, cublas_.get(), stream_);
    }
    linear_forward(linear + 1, kind, branch_.output(), a.atty.input(), p.wo, N);
    mark(phase::residual);
    residual_forward(a.residual2.data(), residual, branch_, NC, stored, stream_);
    mark(phase::norms);
    const linear_input ln2 = rmsnorm_into(a.ln2, linears_.fp8_output_of(linear + 2, x_tensor, kind, N),
                                          a.ln2_rstd.data(), a.residual2.data(), compute(p.mlp_norm), N, C,
                                          stream_, producer_amax(linear + 2, x_tensor, forward_slot(l, 1)));
    a.ln2_fp8 = ln2.is_fp8_written();
    linear_forward(linear + 2, kind, a.gate_up.output(), ln2, p.w_gate_up, N);
    mark(phase::activation);
    const linear_input swiglu =
        swiglu_forward_into(a.swiglu, linears_.fp8_output_of(linear + 3, x_tensor, kind, N), a.gate_up, N, F,
                            stream_, producer_amax(linear + 3, x_tensor, forward_slot(l, 2)));
    a.swiglu_fp8 = swiglu.is_fp8_written();
    linear_forward(linear + 3, kind, branch_.output(), swiglu, p.w_down, N);
    mark(phase::residual);
    residual_forward(a.residual3.data(), a.residual2.data(), branch_, NC, stored, stream_);
    residual = a.residual3.data();
  }
  mark(phase::norms);
  const std::size_t head = std::size_t(4 * layers_);
  const linear_input lnf = rmsnorm_into(lnf_, linears_.fp8_output_of(head, x_tensor, kind, N),
                                        lnf_rstd_.data(), residual, compute(final_norm_), N, C, stream_,
                                        producer_amax(head, x_tensor, forward_slot(layers_, 0)));
  lnf_fp8_ = lnf.is_fp8_written();
  linear_forward(head, kind, loss_.logits(), lnf, lm_head_, N);
  mark(phase::loss);
  const double loss = loss_.forward_backward(targets_.data(), N, stored, stream_);
  stop_profile();
  return loss;
}

void device_transformer::backward_pass() {
  const int N = batch_ * context_, C = channels_, F = hidden_, V = vocab_;
  const storage stored = stored_;
  const gemm_mode attention_mode = attention_mode_;
  // The head: dlnf = dlogits . W_head, dW_head (+)= dlogits^T . lnf. In bf16 and fp8 runs the norms'
  // outputs (lnf, ln2, ln1) and their gradients (dnorm_, which RMSNorm's backward reads as BF16) are
  // BF16, read and written by the layers as they are.
  linear_backward(std::size_t(4 * layers_), dnorm_.output(), lm_head_, loss_.dlogits(),
                  saved_x(lnf_, lnf_fp8_), N);
  mark(phase::other);
  FP8_CUDA_CHECK(cudaMemsetAsync(dresidual_.data(), 0, dresidual_.size() * sizeof(float), stream_));
  const float* last = layers_ > 0 ? acts_.back().residual3.data() : encoded_.data();
  mark(phase::norms);
  rmsnorm_backward(dresidual_.data(), grad(final_norm_), dnorm_, last, compute(final_norm_), lnf_rstd_.data(),
                   N, C, stored, norm_workspace_.data(), stream_);
  for (int l = layers_ - 1; l >= 0; --l) {
    block_activations& a = acts_[std::size_t(l)];
    const block_parameters& p = blocks_[std::size_t(l)];
    const std::size_t linear = std::size_t(4 * l);
    const float* block_input = l == 0 ? encoded_.data() : acts_[std::size_t(l - 1)].residual3.data();
    // MLP branch: residual3 = residual2 + down(swiglu(gate_up(rmsnorm(residual2)))).
    // In bf16 and fp8 runs the [N, F] and [N, 2F] tensors stay BF16 from layer to layer.
    linear_backward(linear + 3, dswiglu_.output(), p.w_down, dresidual_.data(),
                    saved_x(a.swiglu, a.swiglu_fp8), N);
    mark(phase::activation);
    const linear_input dgate_up = swiglu_backward_into(
        dgate_up_, linears_.fp8_output_of(linear + 2, dy_tensor, pass_kind::train, N), dswiglu_, a.gate_up, N,
        F, stream_, producer_amax(linear + 2, dy_tensor, backward_slot(l)));
    linear_backward(linear + 2, dnorm_.output(), p.w_gate_up, dgate_up, saved_x(a.ln2, a.ln2_fp8), N);
    mark(phase::norms);
    rmsnorm_backward(dresidual_.data(), grad(p.mlp_norm), dnorm_, a.residual2.data(), compute(p.mlp_norm),
                     a.ln2_rstd.data(), N, C, stored, norm_workspace_.data(), stream_);
    // Attention branch: residual2 = input + wo(attention(wqkv(rmsnorm(input)))). On the fused path
    // wo's dx and wqkv's dy are BF16 (cuDNN's dO and dq, dk, dv), with qkv and atty as kept.
    if (attention_path_.fused) {
      linear_backward(linear + 1, datty16_.data(), p.wo, dresidual_.data(), a.atty.input(), N);
      mark(phase::attention);
      fused_attention_backward(dqkv_.bf16(), datty16_.data(), a.qkv.bf16(), a.atty.bf16(), a.att_stats.data(),
                               rope_, shape_, attention_path_.fused.get(), stream_);
    } else {
      linear_backward(linear + 1, dbuffer_c_.data(), p.wo, dresidual_.data(), a.atty.input(), N);
      mark(phase::attention);
      attention_backward(dqkv_.floats(), dbuffer_c_.data(), a.qkvr.data(), a.att.data(), rope_, shape_,
                         attention_mode, stored, attention_, cublas_.get(), stream_);
    }
    linear_backward(linear + 0, dnorm_.output(), p.wqkv, dqkv_.input(), saved_x(a.ln1, a.ln1_fp8), N);
    mark(phase::norms);
    rmsnorm_backward(dresidual_.data(), grad(p.attn_norm), dnorm_, block_input, compute(p.attn_norm),
                     a.ln1_rstd.data(), N, C, stored, norm_workspace_.data(), stream_);
  }
  mark(phase::embedding);
  embedding_backward(grad(wte_), dresidual_.data(), inputs_.data(), N, C, V, stream_);
  stop_profile();
}

}  // namespace trainer::cuda

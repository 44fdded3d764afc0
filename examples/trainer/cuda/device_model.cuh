// What the GPU training loop sees of a model on the device (the CUDA form of ../model.hpp): its
// parameters, the FP8 scaling state of its linear layers, a forward pass with a loss, a backward
// pass; and the part every such model shares: the linear layers (device_linears) and the BF16 copy
// of the compute weights they read. nvcc only: the linear layer is device code.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fp8/cublaslt/handle.hpp>
#include <fp8/cuda/linear.cuh>

#include "../model.hpp"
#include "../options.hpp"
#include "../precision.hpp"
#include "adamw.hpp"
#include "batched_gemm.hpp"
#include "device_buffer.hpp"
#include "device_memory.hpp"
#include "fp8_output.hpp"
#include "linear_policy.hpp"
#include "phase_profile.hpp"
#include "producer_calls.hpp"

namespace trainer::cuda {

// What a forward pass is for: a training step records amaxes (and its backward follows), an
// evaluation records nothing, a shadow pass runs every GEMM in BF16 and records nothing.
enum class pass_kind { train, evaluate, shadow };

// What a backward pass does with parameters().grad: overwrite it (the first pass of a step: the
// linear layers' wgrad products write their dW with beta = 0, and only the other gradients, which
// their kernels add into, are cleared first) or accumulate into it (a later pass of the same step:
// every gradient adds, the wgrads with beta = 1, in FP32).
enum class gradient_mode { overwrite, accumulate };

// An operand or a result of a linear layer as the model holds it: floats holding BF16 values (a
// stored tensor, copied to or from __nv_bfloat16 around the layer: the staging phase) or BF16 (raw
// __nv_bfloat16 bits, which the layer reads or writes as they are: no copy). Implicit from either
// pointer, so a call site names the buffer it has. BF16 tensors are for bf16 and fp8 runs only: the
// FP32 products of fp32 runs read and write floats.
template <class Float, class Bf16>
class linear_tensor {
 public:
  linear_tensor(Float* floats) : floats_(floats) {}           // NOLINT: implicit by design
  linear_tensor(Bf16* bf16) : bf16_(bf16), staged_(false) {}  // NOLINT: implicit by design
  // An operand its producer wrote as the layer's FP8 codes (device_linears::fp8_output_of): no BF16
  // values. As x forward and dy backward, the layer only transposes the codes; as x backward, the
  // layer's FP8 wgrad reads the transposed copy the forward made.
  static linear_tensor fp8_written() {
    linear_tensor t(static_cast<Bf16*>(nullptr));
    t.written_ = true;
    return t;
  }
  bool staged() const { return staged_; }
  bool is_fp8_written() const { return written_; }
  Float* floats() const { return floats_; }  // null unless staged()
  Bf16* bf16() const { return bf16_; }       // null when staged()
  // A BF16 tensor's amax, recorded by the kernel that wrote it (device memory; null: none), which
  // the layer takes instead of reading the tensor for it (fp8::cuda::linear_layer's x_amax, dy_amax).
  const float* amax() const { return amax_; }
  linear_tensor with_amax(const float* amax) const {
    linear_tensor t = *this;
    t.amax_ = amax;
    return t;
  }

 private:
  Float* floats_ = nullptr;
  Bf16* bf16_ = nullptr;
  bool staged_ = true;
  bool written_ = false;
  const float* amax_ = nullptr;
};
using linear_input = linear_tensor<const float, const std::uint16_t>;  // x, dy
using linear_output = linear_tensor<float, std::uint16_t>;             // y, dx

// Which of a layer's operands the model holds as BF16 (passed through, never staged), one flag per
// operand: x and dx (K wide), y and dy (N wide). A tensor may be BF16 in one pass and floats in the
// other (wo's and w_down's outputs are BF16 as y, their gradients dy, the residual stream's, stay
// floats). device_linears sizes each
// staging copy for the layers that stage that operand only, and refuses floats where BF16 is planned.
struct linear_bf16_operands {
  bool x = false;
  bool y = false;
  bool dx = false;
  bool dy = false;
  bool any() const { return x || y || dx || dy; }
};

// The linear layers of a model: one fp8::cuda::linear_layer each in the policy's precision (BF16,
// FP8 or fake FP8 per GEMM class and unit), all-BF16 twins for shadow passes, the float <-> BF16
// copies around them for operands held as floats, and the scaling state they share; in fp32 runs
// FP32 cuBLAS products instead (the layer has no FP32 path). Layer i has features[i] and the
// precision unit infos[i].unit, and is slot i of the scaling state (the host scaling state's order).
class device_linears {
 public:
  // Throws fp8::invalid_argument naming the layer when a shape does not fit an FP8 product.
  // amax_reducer (null: one process) makes the amaxes agree over the ranks at every end_step; it
  // must outlive this object. bf16_operands: per layer, the operands the model passes as BF16
  // (empty: none; fp32 runs refuse any).
  device_linears(const std::vector<linear_features>& features, const std::vector<linear_layer_info>& infos,
                 std::int64_t max_tokens, const precision_policy& policy, const fp8::gemm_recipe& recipe,
                 bool with_shadow, fp8::cuda::device_amax_reducer* amax_reducer = nullptr,
                 const std::vector<linear_bf16_operands>& bf16_operands = {});

  fp8::cuda::linear_scaling& scaling() { return scaling_; }
  bool fp32() const { return fp32_; }
  // Where the linear layers' GPU time goes (their casts and their products), or null for nowhere.
  void set_profile(phase_profile* profile);

  // y[M, N] = x[M, K] . W[N, K]^T through layer `linear`. w: the compute weights (floats, read in
  // fp32 runs), w16: their BF16 copy (read by the layer; unused in fp32 runs). x and y each floats
  // (staged) or BF16 (passed through); fp32 runs refuse BF16 ones.
  void forward(std::size_t linear, pass_kind kind, linear_output y, linear_input x, const float* w,
               const __nv_bfloat16* w16, int m, cudaStream_t stream);
  // dx[M, K] = dy[M, N] . W; dw[N, K] = dy^T . x (overwrite) or += (accumulate), in FP32. dx, dy
  // and x each floats or BF16, as in forward().
  void backward(std::size_t linear, linear_output dx, float* dw, linear_input dy, linear_input x,
                const float* w, const __nv_bfloat16* w16, int m, gradient_mode mode, cudaStream_t stream);
  // The weights changed (or an evaluation cast them without recording): W's FP8 copies are remade
  // at their next use.
  void drop_weight_copies();

  // While on, training passes also count what each layer's casts do (--stats-every): saturated
  // and flushed elements, amax and scale range per operand.
  void set_statistics(bool on) { statistics_ = on; }
  // Whether training passes record the amaxes of the operands of BF16 classes (the layer's
  // record_bf16_amax): on by default, as the CPU records them in bf16 and fp8 runs.
  void set_record_bf16_amax(bool on);
  // Amaxes from the producers (on by default): where a layer's training calls would read X or dY
  // only for its amax (a current per-tensor cast, a BF16 class's amax-only pass), the kernel that
  // writes the tensor records it instead: the model's, through amax_slot(), and the staging copy's
  // here. Off: every layer reads its operands for their amaxes (the same results, bit for bit).
  void set_producer_amaxes(bool on) { producer_amaxes_ = on; }
  // Where the producer of layer `linear`'s X (tensor x) or dY (dy) records its amax: `slot` when the
  // layer's training calls take it (fp8::cuda::linear_layer::takes_given_amax), else null (the
  // producer records nothing). fp32 runs: null.
  float* amax_slot(std::size_t linear, fp8::cuda::linear_tensor tensor, float* slot) const;
  // Whether producers write FP8 codes where a layer takes them (on by default; fp8_output_of), the
  // model's kernels and the staging copies of float operands alike. Off: every producer writes BF16
  // and the layers cast it (the same results, bit for bit).
  void set_producer_fp8(bool on) { producer_fp8_ = on; }
  // Whether the layers' cuBLASLt products are tuned (off by default): each product's candidate
  // algorithms timed on its first call and the fastest kept (fp8::cublaslt::handle::set_tuning).
  // Which algorithm wins depends on timings, so two runs may round differently: resume is then not
  // bit-identical, which is why the trainer leaves it off; bench_trainer --gemm-tuning on turns it on.
  void set_gemm_tuning(bool on) {
    fp8::cublaslt::tuning_options options = lt_.tuning();
    options.enabled = on;
    lt_.set_tuning(options);
  }
  // Where the producer of layer `linear`'s X (tensor x, in a forward pass of `kind`) or dY (dy, in
  // the training backward: kind train) of m tokens writes it as the layer's FP8 codes; or nothing,
  // where it writes BF16: producer_fp8 off, fp32 runs, a shadow pass (its layers are BF16), a
  // statistics pass (they count the BF16 tensor), or a layer that does not take codes
  // (fp8::cuda::linear_layer::takes_fp8_input: a class of the tensor in BF16 or fake FP8, scaling
  // that is not delayed, dY of a layer with a bias). The call then passes
  // linear_input::fp8_written() for the tensor, forward and (x) backward. The amax slot is set in
  // training passes only, which record amaxes.
  std::optional<fp8_output> fp8_output_of(std::size_t linear, fp8::cuda::linear_tensor tensor, pass_kind kind,
                                          int m);
  // What the layers hold on the device (their own copies, the shared workspace); none in fp32 runs.
  linear_memory memory() const;
  // Whether the backward reads the layer's X again: its wgrad takes X as it is (fp32 runs, BF16
  // wgrads), where an FP8 or fake wgrad reads the transposed copy its forward made.
  bool wgrad_reads_x(std::size_t linear) const;
  // How many layer calls have taken FP8 codes written before the call (x forward, dy backward: by
  // the model's producers, or by the staging copy of a float operand, to_fp8), and how many were
  // given an amax recorded by the operand's producer, since the layers were made.
  const struct producer_calls& producer_calls() const { return producer_calls_; }
  // The counts of the statistics passes since the last read, per layer (empty in fp32 runs, which
  // have no layers). Waits for `stream`.
  std::vector<fp8::cuda::linear_statistics> read_statistics(cudaStream_t stream);

 private:
  fp8::cuda::linear_layer& layer(std::size_t linear, pass_kind kind);
  // fp32 runs: the floats of t, or fp8::invalid_argument naming the layer and the operand.
  template <class Float, class Bf16>
  Float* fp32_operand(const linear_tensor<Float, Bf16>& t, std::size_t linear, const char* name) const;
  // Refuses floats where the plan has BF16 (bf16_planned), whose staging copies are not allocated.
  template <class Float, class Bf16>
  void check_planned(const linear_tensor<Float, Bf16>& t, bool bf16_planned, std::size_t linear,
                     const char* name) const;
  // The BF16 operand the layer reads: t itself, or its copy into `scratch` (count elements; staging),
  // whose amax the copy records into `amax` when it is set (zeroed here first).
  const __nv_bfloat16* layer_operand(linear_input t, device_buffer<std::uint16_t>& scratch, std::size_t count,
                                     cudaStream_t stream, float* amax = nullptr);
  // What a layer call takes as X (forward) or dY (backward): the BF16 operand with its amax (null:
  // none), or nothing where its FP8 codes were written into the layer's copy (`written`).
  struct taken_operand {
    const __nv_bfloat16* bf16 = nullptr;
    const float* amax = nullptr;
    bool written = false;
  };
  // Operand t of layer `linear` (tensor x or dy) for a call of `kind` with m tokens (count
  // elements): written codes where its producer wrote them or stage_codes copies them; else the
  // BF16 operand (layer_operand, staged through `scratch`, a staged copy's amax recorded into
  // `amax_scratch` where the layer takes one) and its amax. Counts the calls that take codes.
  taken_operand take_operand(linear_input t, std::size_t linear, fp8::cuda::linear_tensor tensor,
                             pass_kind kind, int m, std::size_t count, device_buffer<std::uint16_t>& scratch,
                             float* amax_scratch, cudaStream_t stream);
  // A staged operand (x forward, dy backward) copied straight into the layer's FP8 codes where the
  // layer takes them (fp8_output_of; to_fp8: the codes its cast makes of the BF16 copy, with that
  // copy's amax): true, and the call passes the codes as written; false where the operand is not
  // staged or the layer does not take codes (layer_operand then stages BF16).
  bool stage_codes(linear_input t, std::size_t linear, fp8::cuda::linear_tensor tensor, pass_kind kind, int m,
                   std::size_t count, cudaStream_t stream);
  // Where the layer writes a result: t itself, or `scratch`, widened into t's floats by stage_result.
  static __nv_bfloat16* layer_result(linear_output t, device_buffer<std::uint16_t>& scratch);
  void stage_result(linear_output t, const device_buffer<std::uint16_t>& scratch, std::size_t count,
                    cudaStream_t stream);
  void mark(phase p) {
    if (profile_ != nullptr) profile_->mark(p);
  }
  void refresh_takes_amax();

  std::vector<linear_features> features_;
  std::vector<linear_bf16_operands> bf16_operands_;  // one per layer
  bool fp32_;
  cublas_handle cublas_;  // fp32 runs' products
  fp8::cublaslt::handle lt_;
  fp8::cuda::linear_scaling scaling_;
  // The FP8 copies the layers use only within a call, shared (null when no layer casts any); before
  // the layers, which must go first.
  std::unique_ptr<fp8::cuda::linear_workspace> workspace_;
  std::vector<std::unique_ptr<fp8::cuda::linear_layer>> layers_;         // the policy's precision
  std::vector<std::unique_ptr<fp8::cuda::linear_layer>> shadow_layers_;  // all BF16 (shadow passes)
  phase_profile* profile_ = nullptr;
  bool statistics_ = false;
  bool producer_amaxes_ = true;
  bool producer_fp8_ = true;
  struct producer_calls producer_calls_;
  // Per layer, whether its training calls take a given amax of X and of dY (takes_given_amax, kept
  // here: the query plans the layer); refresh_takes_amax() asks the layers again.
  std::vector<std::array<bool, 2>> takes_amax_;
  // The staging copies' amaxes of x and dy (bf16 and fp8 runs): each written by the copy a call
  // makes and read by that call's layer, in stream order.
  device_buffer<float> staged_amax_;
  // BF16 copies of operands and results held as floats: x and dx [M, max K], y and dy [M, max N],
  // each the maximum over the layers that stage that operand (not planned as BF16); fp32 runs: one
  // wgrad product [max N x K] before it is added to the gradient.
  device_buffer<std::uint16_t> x16_, y16_, dy16_, dx16_;
  device_buffer<float> wgrad_scratch_;
};

// A model on the device. Holds what every model shares (parameters, their BF16 copy, the linear
// layers, the stream, the storage precision); forward and backward are the model's.
class device_model {
 public:
  virtual ~device_model() = default;
  device_model(const device_model&) = delete;
  device_model& operator=(const device_model&) = delete;

  device_parameters& parameters() { return params_; }
  fp8::cuda::linear_scaling& scaling() { return linears_.scaling(); }
  cudaStream_t stream() const { return stream_; }
  // False in fp32 runs: they keep no FP8 statistics, and the scaling state stays as it is (as on
  // the CPU, whose fp32 passes get no scaling state).
  bool records_scaling() const { return !linears_.fp32(); }
  // What the linear layers hold on the device beside the trainer's buffers (the run's memory line).
  linear_memory linear_layer_memory() const { return linears_.memory(); }
  // Times the phases of later passes (null: none). The profile must outlive its use.
  virtual void set_profile(phase_profile* profile) {
    profile_ = profile;
    linears_.set_profile(profile);
  }

  // inputs, targets: host [B, T] bytes. Returns the mean cross-entropy; keeps the activations and
  // the loss gradient for backward() (waits for the stream: the loss is read on the host).
  double forward(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind);
  // The gradients of the last forward pass into parameters().grad, written or added (gradient_mode).
  // A step of several passes overwrites in its first and accumulates in the others, so it neither
  // clears the gradients nor sums them in a buffer of its own. The last forward must have been a
  // training pass: an evaluation or a shadow pass overwrites the activations (and the FP8 codes the
  // layers' backward reads) with its own, so a backward after one is refused (std::logic_error).
  void backward(gradient_mode mode);
  // How the model's attention runs, for the run's description (empty: a model without attention).
  virtual std::string attention_description() const { return {}; }

  // After a load: compute = master (in BF16 unless fp32), its BF16 copy for the layers, and every
  // layer's FP8 weight copies dropped (remade, with their amaxes recorded, at the next use).
  void weights_changed();
  // An AdamW update's fusion that leaves the weights as weights_changed() makes them once
  // weights_updated() has run: fp32 runs write the compute copy; bf16 and fp8 runs write only its
  // BF16 copy, which is all the linear layers read (their float compute copies then stay as the last
  // weights_changed() left them: nothing on the device reads them, and a checkpoint saves the master
  // weights), saving 4 of the update's bytes per parameter.
  adamw_fusion weights_fusion() {
    return {std::nullopt, linears_.fp32(), stored_, linears_.fp32() ? nullptr : weights16_.data()};
  }
  // After an AdamW update with weights_fusion(): the tensors the model reads as floats (all but the
  // linear weights: norm gains, the embedding; small) widened from the BF16 copy into the compute
  // copy (bit-identical: in bf16 and fp8 runs the compute copy holds BF16 values), and every layer's
  // FP8 weight copies dropped.
  void weights_updated();

  // Statistics of the casts (device_linears::set_statistics, read_statistics).
  void collect_statistics(bool on) { linears_.set_statistics(on); }
  // device_linears::set_record_bf16_amax.
  void record_bf16_amax(bool on) { linears_.set_record_bf16_amax(on); }
  // device_linears::set_producer_amaxes (on by default; off for the tests that compare the two).
  void producer_amaxes(bool on) { linears_.set_producer_amaxes(on); }
  // device_linears::set_producer_fp8 (the transformer's RMSNorm and SwiGLU, and every model's
  // staging copies of float operands).
  void producer_fp8(bool on) { linears_.set_producer_fp8(on); }
  // device_linears::set_gemm_tuning.
  void gemm_tuning(bool on) { linears_.set_gemm_tuning(on); }
  const struct producer_calls& producer_calls() const { return linears_.producer_calls(); }
  std::vector<fp8::cuda::linear_statistics> read_statistics() { return linears_.read_statistics(stream_); }

 protected:
  // host: the parameter layout and values (all five buffers are copied); features: each linear
  // layer's (in, out) in the order of `infos`, the host model's linear layers; bf16_operands: the
  // operands the model passes to them as BF16 (device_linears).
  device_model(const parameter_set& host, const std::vector<linear_features>& features,
               const std::vector<linear_layer_info>& infos, std::int64_t max_tokens,
               const precision_policy& policy, const fp8::gemm_recipe& recipe, bool with_shadow,
               cudaStream_t stream, fp8::cuda::device_amax_reducer* amax_reducer = nullptr,
               const std::vector<linear_bf16_operands>& bf16_operands = {});

  // The model's forward pass (forward() records its kind for backward()).
  virtual double forward_pass(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind) = 0;
  // Runs pass() (a forward pass of `kind`, returning its loss) and records its kind for backward();
  // a pass that throws leaves none recorded, as its buffers may be half written. For the models'
  // other forward entries (device_transformer::forward_device).
  template <class Pass>
  double record_forward(pass_kind kind, Pass&& pass) {
    last_forward_.reset();
    const double loss = pass();
    last_forward_ = kind;
    return loss;
  }
  // The model's backward pass (backward() has cleared what it adds into when it overwrites).
  virtual void backward_pass() = 0;

  float* compute(std::size_t tensor) { return params_.compute.data() + params_.offset(tensor); }
  float* grad(std::size_t tensor) { return params_.grad.data() + params_.offset(tensor); }
  const __nv_bfloat16* weight16(std::size_t tensor) const;
  void mark(phase p) {
    if (profile_ != nullptr) profile_->mark(p);
  }
  void stop_profile() {
    if (profile_ != nullptr) profile_->stop();
  }
  // Linear layer `linear` with the parameter tensor `weight` as W; operands floats or BF16
  // (device_linears).
  void linear_forward(std::size_t linear, pass_kind kind, linear_output y, linear_input x, std::size_t weight,
                      int m) {
    linears_.forward(linear, kind, y, x, compute(weight), weight16(weight), m, stream_);
  }
  void linear_backward(std::size_t linear, linear_output dx, std::size_t weight, linear_input dy,
                       linear_input x, int m);

  cudaStream_t stream_;
  storage stored_;            // activations and compute weights: fp32, or BF16 values in floats
  gemm_mode attention_mode_;  // products other than linear layers: fp32 or bf16
  device_parameters params_;
  device_buffer<std::uint16_t> weights16_;  // [size] BF16 copy of the compute weights (not in fp32 runs)
  device_linears linears_;
  phase_profile* profile_ = nullptr;

 private:
  // The parameter tensor each linear layer reads as W, in layer order (the tensor of its name): their
  // gradients are the wgrad products' (written or added as the pass's gradient_mode says).
  std::vector<std::size_t> linear_weight_;
  // Every tensor but the linear weights (ranges_except): the gradients kernels add into (an
  // overwriting pass clears them) and the weights the model reads as floats (weights_updated widens
  // them).
  std::vector<parameter_range> other_ranges_;
  gradient_mode mode_ = gradient_mode::overwrite;  // of the backward pass running
  std::optional<pass_kind> last_forward_;          // whose activations the buffers hold (none yet)
  std::vector<bool> backward_done_;                // per linear layer, in the backward pass running
};

// The device model of the host model `host` (a transformer or an MLP) for batches of `batch`
// sequences, with host's parameters. Throws fp8::invalid_argument for another kind of model.
// amax_reducer: see device_linears (a data-parallel run's NCCL reducer; null in one process).
// attention: the transformer's attention path (--attention; the MLP has none).
std::unique_ptr<device_model> make_device_model(const model_options& shape, int batch, const model& host,
                                                const precision_policy& policy,
                                                const fp8::gemm_recipe& recipe, bool with_shadow,
                                                cudaStream_t stream,
                                                fp8::cuda::device_amax_reducer* amax_reducer = nullptr,
                                                attention_kernel attention = attention_kernel::automatic);

// The optimizer half of a training step, after forward(train) and backward(): the gradient norm
// (returned; read on the host), clipping to clip_norm (<= 0: none), AdamW at `step` with
// `learning_rate`, the new compute weights, and the end of the FP8 scaling step (amax histories roll,
// next scales; not in fp32 runs). The CPU run's order and arithmetic (../trainer.cpp), in two passes
// over the parameters: the norm, then one AdamW pass that also clips and writes the weights as the
// layers read them (adamw_fusion: in fp32 runs the compute copy; in bf16 and fp8 runs the BF16 copy
// only, which device_model::weights_updated widens for the few tensors read as floats). The
// gradients stay unclipped in memory; the next step's first pass overwrites them.
double optimizer_step(device_model& model, const adamw_options& options, float learning_rate, long step,
                      float clip_norm, phase_profile* profile = nullptr);

}  // namespace trainer::cuda

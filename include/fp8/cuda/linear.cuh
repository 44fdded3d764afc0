// fp8::cuda::linear_layer: an FP8 (or BF16) linear layer for any C++/CUDA program, device pointers
// and a stream in, no framework. Forward Y = X·Wᵀ (+ bias); backward dX = dY·W and dW (+)= dYᵀ·X in
// FP32, dbias (+)= colsum(dY). Each GEMM class runs in FP8, BF16 or fake_fp8 (cast to FP8, decoded
// to BF16, BF16 product: linear_precision); FP8 operands are cast by the recipe of their operand (delayed
// through linear_scaling's device state, or current per tensor / row / 1x128 / 128x128), with the transposed
// copies the backward products need made in the same pass as the cast. W's FP8 copies are kept until
// weights_changed(), and made again (with the step's scale, recording W's amaxes) by the first call of
// a step that records amaxes.
//
//   fp8::cublaslt::handle lt;
//   fp8::cuda::linear_scaling scaling(recipe, /*layers=*/1);
//   fp8::cuda::linear_layer layer({K, N, max_tokens, /*bias=*/true, recipe, {}}, scaling, 0, lt);
//   layer.forward({x, w, bias, y, m}, stream);
//   layer.backward({dy, x, w, dx, dw, dbias, m}, stream);
//   ... optimizer updates w ...; layer.weights_changed(); scaling.end_step(stream);
//
// One forward is in flight per layer: backward(m) uses the Xᵀ copy the last forward(m) made. A
// forward with backward_follows = false (an evaluation's) makes none, leaves that one alone and needs
// only fprop's shapes.
// A call with `record_amax` records the amax of every operand into its slot of the scaling state,
// those of BF16 classes included (config.record_bf16_amax). A call with `statistics = true` also
// counts what its casts did (saturated and flushed elements, amax, scale range), and what a cast
// would do to the operands of BF16 classes, read with read_statistics(). A caller whose kernel wrote
// X (or dY) can pass its amax (x_amax, dy_amax: amax_tracker), which saves the read of the tensor
// that current per-tensor scaling and BF16 amax recording otherwise make for it. Under delayed
// scaling it can write X's (or dY's) FP8 codes itself (fp8_input, x_written, dy_written), which
// saves its BF16 store of the tensor and the layer's cast of it. See docs/linear_layer.md.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/linear.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "../cublaslt/handle.hpp"
#include "amax.cuh"
#include "amax_tracker.cuh"
#include "current_scaling.cuh"
#include "delayed_scaling.cuh"
#include "linear/config.hpp"
#include "linear/kernels.cuh"
#include "linear/plan.hpp"
#include "linear/scaling.cuh"
#include "linear/statistics.hpp"
#include "linear/workspace.cuh"
#include "quantize.cuh"
#include "transpose_codes.cuh"

namespace fp8::cuda {

class linear_layer {
 public:
  struct forward_args {
    const __nv_bfloat16* x = nullptr;     // [M, K]
    const __nv_bfloat16* w = nullptr;     // [N, K], the BF16 compute weights (caller-owned)
    const __nv_bfloat16* bias = nullptr;  // [N] (16-byte aligned) when the config has a bias
    __nv_bfloat16* y = nullptr;           // [M, N]
    std::int64_t m = 0;                   // tokens
    bool record_amax = true;              // false for evaluation passes: the histories stay as they are
    bool statistics = false;              // count what the casts of X and W did (read_statistics)
    // max |X| over this call's m x K X in device memory, recorded by the kernel that wrote X
    // (fp8::cuda::amax_tracker), or null. It replaces a read of X where one is made only for the
    // amax: a current per-tensor cast of X is then the cast alone, and the amax of an X operand of a
    // BF16 class is copied from it. Delayed and block-scaled casts find X's amax in their one read
    // and do not read it. It must be exactly X's amax: a smaller one saturates X's largest elements.
    const float* x_amax = nullptr;
    // X's FP8 codes were written by the caller's kernel into fp8_input(linear_tensor::x, m), its
    // amax recorded there when record_amax: the layer makes only the transposed copy, and x may be
    // null. Not with statistics (they count the BF16 tensor against its copies).
    bool x_written = false;
    // false: no backward follows this forward (evaluation, inference). X's transposed copy for an
    // FP8 wgrad is not made, the token count needs only fprop's shape rules (a decode step of 1 to 15
    // tokens runs where an FP8 wgrad would refuse it), and the next backward still pairs with the
    // last forward that had it true, whose Xᵀ this call leaves alone: an evaluation may run between
    // a training forward and its backward. W's copies are made and kept as in any call.
    bool backward_follows = true;
  };
  struct backward_args {
    const __nv_bfloat16* dy = nullptr;  // [M, N]
    const __nv_bfloat16* x = nullptr;   // [M, K]: read when wgrad runs in BF16 (FP8 uses the saved Xᵀ)
    const __nv_bfloat16* w = nullptr;   // [N, K]: read when dgrad runs in BF16, or W's copies were dropped
    __nv_bfloat16* dx = nullptr;        // [M, K], or null (first layer: no dgrad)
    float* dw = nullptr;                // [N, K] FP32
    float* dbias = nullptr;             // [N] FP32 when the config has a bias
    std::int64_t m = 0;
    bool accumulate = true;  // dW += and dbias += (micro-batches); false: overwrite
    bool record_amax = true;
    bool statistics = false;         // count what the casts of dY did (read_statistics)
    const float* dy_amax = nullptr;  // max |dY| of this call's dY, as forward_args::x_amax for X
    // dY's FP8 codes written into fp8_input(linear_tensor::dy, m), as forward_args::x_written for X;
    // dy may then be null. Only in a backward with dX (without, the layer casts only wgrad's copy,
    // with that operand's own scale).
    bool dy_written = false;
  };

  // An FP8 copy the layer holds (for inspection and tests): codes, inverse scales and how they were made.
  struct fp8_copy {
    const std::uint8_t* data = nullptr;
    const float* scale_inv = nullptr;
    std::int64_t rows = 0;  // as stored, row-major
    std::int64_t cols = 0;
    quantization quant{};
  };

  // Allocates the FP8 copies for config.max_tokens (refusing configurations the products cannot
  // run). `scaling` and `lt` must outlive the layer; `index` is the layer's number in `scaling`.
  // `workspace` (or null): where the copies that live only within one call go, shared with other
  // layers (linear/workspace.cuh, which says the rules); it must outlive the layer and hold
  // linear_workspace_bytes(config).
  linear_layer(const linear_config& config, linear_scaling& scaling, std::size_t index, cublaslt::handle& lt,
               linear_workspace* workspace = nullptr)
      : config_(checked(config)), scaling_(scaling), index_(index), lt_(lt), workspace_(workspace) {
    check_formats();
    const linear_plan full = make_linear_plan(config_, config_.max_tokens);
    const workspace_layout layout = make_workspace_layout(full);
    if (workspace_ != nullptr) {
      if (workspace_->size() < layout.bytes) {
        throw invalid_argument("fp8::cuda::linear_layer: the shared linear_workspace holds " +
                               std::to_string(workspace_->size()) + " bytes, but this layer needs " +
                               std::to_string(layout.bytes) + " (linear_workspace_bytes of its config)");
      }
      member_ = workspace_->claims().enroll();
    }
    for (const cast_plan& c : full.casts)
      allocate(c, copies_[std::size_t(c.tensor)], workspace_ != nullptr ? layout : workspace_layout{});
    if (config_.bias) bias_gradient_ = detail::device_array<float>(std::size_t(config_.out_features));
    if (full.bias_gradient == bias_gradient_method::column_sum) {
      column_partials_ = detail::device_array<float>(
          detail::column_sum_workspace(std::size_t(config_.max_tokens), std::size_t(config_.out_features)));
    }
    for (const linear_tensor t : {linear_tensor::x, linear_tensor::w, linear_tensor::dy})
      input_refusals_[std::size_t(t)] = fp8_input_refusal(config_, t);
    counters_ = detail::device_array<cast_counters>(gemm_operand_count);
    // read_statistics copies all of them back, counted or not: no uninitialised bytes in that copy.
    // cudaMemset runs on the legacy default stream, which a cudaStreamNonBlocking stream does not
    // wait for: the wait makes the zeros land before any stream's first use of the layer.
    FP8_CUDA_CHECK(cudaMemset(counters_.data(), 0, gemm_operand_count * sizeof(cast_counters)));
    FP8_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

  const linear_config& config() const noexcept { return config_; }
  // The plan of a call with m tokens (what the products and casts will be); forward_only: of a
  // forward that no backward follows.
  linear_plan plan(std::int64_t m, linear_pass pass = linear_pass::training) const {
    return make_linear_plan(config_, m, pass);
  }

  // The weights changed (optimizer step, load): W's FP8 copies are remade at their next use.
  void weights_changed() noexcept { weights_cached_ = false; }
  // config().record_bf16_amax for later calls: off, for example, for a plain BF16 baseline that
  // should launch nothing beyond its products; on again, BF16 classes record from the next call
  // (call it between steps). W's copies cached while it was off recorded no amax for W's BF16
  // operand, so turning it on drops them when W has one: the next call casts W again and records.
  void set_record_bf16_amax(bool on) noexcept {
    const linear_precision& p = config_.precision;
    const bool w_bf16 = p.fprop == gemm_precision::bf16 || p.dgrad == gemm_precision::bf16;
    if (on && !config_.record_bf16_amax && w_bf16) weights_cached_ = false;
    config_.record_bf16_amax = on;
  }
  // Whether x_amax (tensor x) or dy_amax (dy) would save this layer a read of the tensor
  // (given_amax_saves_read): a producer can skip recording the amax where it would not.
  bool takes_given_amax(linear_tensor tensor) const { return given_amax_saves_read(config_, tensor); }
  // Where the kernel that writes X (or dY) puts the tensor's FP8 codes for a call with x_written (or
  // dy_written), instead of the BF16 tensor: for each element, the value as BF16 (rounded to nearest
  // even, as the BF16 store would), widened, times *scale, converted to `format` rounding to nearest
  // even and saturating (fp8::cuda::scaled_code, or scaled_codes_x4 four at a time: the codes are then
  // those the layer's cast would make); and, in calls that record amaxes, the values' amax
  // max-accumulated into *amax (fp8::cuda::amax_tracker). Device pointers, valid until the layer
  // goes. *amax is the scaling state's slot of this step, which end_step() clears: a producer only
  // max-accumulates into it and never zeroes it (that would lose an earlier micro-batch's amax).
  // *scale is the state's scale, which moves only at end_step(): the call that takes the codes must
  // come before the next end_step(), or it would decode them with another scale than they were
  // made with.
  struct fp8_input_target {
    std::uint8_t* codes = nullptr;  // [rows, cols] row-major
    const float* scale = nullptr;
    float* amax = nullptr;
    fp8_format format = fp8_format::e4m3;
    std::int64_t rows = 0;  // m
    std::int64_t cols = 0;  // in_features for X, out_features for dY
  };
  // Whether fp8_input(tensor) is available (fp8_input_refusal says why not).
  bool takes_fp8_input(linear_tensor tensor) const { return input_refusals_[std::size_t(tensor)] == nullptr; }
  // The target for X's (or dY's) codes in a call with m tokens; throws fp8::invalid_argument with
  // the reason where the layer cannot take them (takes_fp8_input).
  fp8_input_target fp8_input(linear_tensor tensor, std::int64_t m) {
    const char* refusal = input_refusals_[std::size_t(tensor)];
    if (refusal != nullptr) {
      throw invalid_argument(std::string("fp8::cuda::linear_layer::fp8_input: ") + tensor_name(tensor) +
                             " cannot be written as FP8 by its producer: " + refusal);
    }
    // The plan of m without replacing the layer's own: a call in progress (a stage hook that asks
    // for another m) keeps the plan it runs on. Its row copy is the same in either pass. With no
    // plan of m yet, X's target is held to fprop's rules alone, since a forward that no backward
    // follows (a decode step of a few tokens) may take it; dY's, which only a backward takes, to
    // the whole pass's (a forward-only plan of m does not stand for it).
    const linear_pass pass = tensor == linear_tensor::x ? linear_pass::forward_only : linear_pass::training;
    const linear_plan* cached = tensor == linear_tensor::x ? cached_plan(m) : cached_plan(m, pass);
    const linear_plan other = cached != nullptr ? linear_plan{} : make_linear_plan(config_, m, pass);
    const cast_plan& c = (cached != nullptr ? *cached : other).cast(tensor);
    if (workspace_ != nullptr) workspace_->claims().claim(member_, tensor);
    given_targets_[std::size_t(tensor)] = {m, scaling_.steps()};
    return {copies_[std::size_t(tensor)].row.data(),
            delayed_scale(c.row_operand),
            amax_slot(c.row_operand),
            config_.recipe[c.row_operand].quant.format,
            c.rows,
            c.cols};
  }

  // How many times W has been cast: by the first call after weights_changed(), and again by the first
  // call of each step that records amaxes where no call of that step has recorded W's yet.
  std::uint64_t weight_casts() const noexcept { return weight_casts_; }

  // Device bytes the layer holds itself: its FP8 copies, their inverse scales and fake decodes, the
  // statistics' scratch copies once a statistics call made them, and its small scratch buffers. A
  // shared workspace's bytes are the workspace's (linear_workspace::size), not counted here.
  std::size_t device_bytes() const noexcept {
    const auto bytes = [](const auto& array) { return array.size() * sizeof(*array.data()); };
    std::size_t total = bytes(bias_gradient_) + bytes(column_partials_) + bytes(counters_);
    for (const auto* group : {&copies_, &statistics_copies_}) {
      for (const tensor_copies& t : *group) {
        for (const code_buffer* codes : {&t.row, &t.transposed, &t.scratch}) total += bytes(codes->owned);
        for (const auto* scales : {&t.row_scale, &t.transposed_scale, &t.scratch_scale, &t.amax})
          total += bytes(*scales);
        total += bytes(t.row_fake) + bytes(t.transposed_fake);
      }
    }
    return total;
  }

  // What a call is doing, for profilers: its own kernels (casts, amax passes and copies, statistics,
  // the bias-gradient sums) or its cuBLASLt products.
  enum class stage { kernels, products };
  // Called on the host, in stream order, each time a call moves from one stage to the other (a
  // forward: kernels, products; a backward: kernels, products, and kernels again for a bias
  // gradient), e.g. to record a CUDA event on the stream; empty (the default) for none.
  void set_stage_hook(std::function<void(stage)> hook) { stage_hook_ = std::move(hook); }

  void forward(const forward_args& args, cudaStream_t stream = nullptr) {
    constexpr const char* function = "fp8::cuda::linear_layer::forward";
    const linear_plan& p =
        plan_for(args.m, args.backward_follows ? linear_pass::training : linear_pass::forward_only);
    detail::require(args.y != nullptr, function, "y must be set");
    detail::require(args.x != nullptr || args.x_written, function,
                    "x must be set (or its FP8 codes written: x_written)");
    if (args.x_written) check_written(linear_tensor::x, args.m, args.statistics, function);
    detail::require(args.w != nullptr, function, "w must be set (the BF16 weights, read or cast)");
    detail::require(
        config_.bias == (args.bias != nullptr), function,
        config_.bias ? "the config has a bias: pass it" : "a bias was passed but the config has none");
    check_caller_pointer(p, linear_buffer::y, args.y);
    check_caller_pointer(p, linear_buffer::bias, args.bias);
    check_caller_pointer(p, linear_buffer::x, args.x);
    check_caller_pointer(p, linear_buffer::w, args.w);
    check_given_amax(args.x_amax, function, "x_amax");
    if (args.statistics) {
      check_countable(p.bf16_cast(linear_tensor::w), function);
      check_countable(p.bf16_cast(linear_tensor::x), function);
    }
    check_workspace(linear_tensor::x, args.x_written, stream, function);  // the last check
    // This call takes the written codes, or its own cast overwrites them: either way no later call
    // may take them (a forward-only evaluation between fp8_input and the call would otherwise pass).
    given_targets_[std::size_t(linear_tensor::x)] = {};
    // X's cast replaces the Xᵀ a pending backward reads: until this call has run its product, no
    // backward pairs with it or with the forward before (a call that throws leaves none).
    if (args.backward_follows) saved_m_ = -1;
    enter(stage::kernels);
    ensure_weight_copies(p, args.w, args.record_amax, stream);
    if (args.x_written) {
      transpose_written(p.cast(linear_tensor::x), args.record_amax, stream);
    } else {
      cast_tensor(p.cast(linear_tensor::x), p.bf16_cast(linear_tensor::x), args.x, args.x_amax,
                  args.record_amax, stream);
    }
    if (args.statistics) {
      // W's copies may be cached from an earlier call: they are counted against the W passed now,
      // which is the W they were made from as long as weights_changed() follows every change.
      count_tensor(p.cast(linear_tensor::w), p.bf16_cast(linear_tensor::w), args.w, stream);
      count_tensor(p.cast(linear_tensor::x), p.bf16_cast(linear_tensor::x), args.x, stream);
    }
    pointers_.fill(nullptr);
    pointers_[index_of(linear_buffer::x)] = args.x;
    pointers_[index_of(linear_buffer::w)] = args.w;
    pointers_[index_of(linear_buffer::y)] = args.y;
    pointers_[index_of(linear_buffer::bias)] = args.bias;
    enter(stage::products);
    run_gemm(p.gemm(gemm_kind::fprop), true, stream);
    if (args.backward_follows) saved_m_ = args.m;
  }

  void backward(const backward_args& args, cudaStream_t stream = nullptr) {
    constexpr const char* function = "fp8::cuda::linear_layer::backward";
    const linear_plan& p = plan_for(args.m, linear_pass::training);
    const bool dgrad = args.dx != nullptr;
    const bool wgrad8 = casts_to_fp8(p.gemm(gemm_kind::wgrad).precision);  // reads the saved Xᵀ copy
    detail::require(args.dw != nullptr, function, "dw must be set");
    detail::require(args.dy != nullptr || args.dy_written, function,
                    "dy must be set (or its FP8 codes written: dy_written)");
    if (args.dy_written) {
      detail::require(dgrad, function,
                      "dy_written needs a backward with dX (without, only wgrad's copy of dY is made, "
                      "with that operand's own scale)");
      check_written(linear_tensor::dy, args.m, args.statistics, function);
    }
    detail::require(
        config_.bias == (args.dbias != nullptr), function,
        config_.bias ? "the config has a bias: pass dbias" : "dbias was passed but the config has none");
    if (wgrad8 && saved_m_ != args.m) {  // the message is built only when it is thrown
      throw invalid_argument(std::string(function) +
                             ": the FP8 (or fake_fp8) wgrad product reads the Xᵀ copy of the last forward, " +
                             (saved_m_ < 0 ? std::string("but this layer has no completed forward to pair "
                                                         "with (one with backward_follows = false makes "
                                                         "none, and one that failed leaves none)")
                                           : "which had " + std::to_string(saved_m_) + " tokens, not " +
                                                 std::to_string(args.m)) +
                             " (call forward first; one forward in flight per layer)");
    }
    detail::require(wgrad8 || args.x != nullptr, function, "x must be set: wgrad runs in BF16 and reads X");
    check_caller_pointer(p, linear_buffer::dx, args.dx);
    check_caller_pointer(p, linear_buffer::dw, args.dw);
    check_caller_pointer(p, linear_buffer::dy, args.dy);
    check_given_amax(args.dy_amax, function, "dy_amax");
    // W is read by a BF16 dgrad, cast where dgrad needs copies it lacks, and, where this is the step's
    // first call to record amaxes and none of the step has recorded W's, cast again to record them
    // (with or without dX: every step's history holds W's amax).
    const bool w_cast_due = weight_cast_due(p, args.record_amax) && (dgrad || args.record_amax);
    if (dgrad && p.gemm(gemm_kind::dgrad).precision == gemm_precision::bf16) {
      detail::require(args.w != nullptr, function, "w must be set: dgrad runs in BF16 and reads W");
    }
    detail::require(!w_cast_due || args.w != nullptr, function,
                    "w must be set: W's copies were dropped by weights_changed(), or this call records the "
                    "step's first amaxes and W's with them");
    // No dX: only wgrad's copy of dY, and no copy, amax or statistics of dgrad's operand.
    const dy_casts dy = backward_dy_casts(p, dgrad);
    if (args.statistics) check_countable(dy.bf16, function);
    check_workspace(linear_tensor::dy, args.dy_written, stream, function);  // the last check
    given_targets_[std::size_t(linear_tensor::dy)] = {};  // taken, or overwritten by this call's cast
    enter(stage::kernels);
    if (w_cast_due) ensure_weight_copies(p, args.w, args.record_amax, stream);
    if (args.dy_written) {
      transpose_written(dy.cast, args.record_amax, stream);
    } else {
      cast_tensor(dy.cast, dy.bf16, args.dy, args.dy_amax, args.record_amax, stream);
    }
    if (args.statistics) count_tensor(dy.cast, dy.bf16, args.dy, stream);
    pointers_.fill(nullptr);
    pointers_[index_of(linear_buffer::x)] = args.x;
    pointers_[index_of(linear_buffer::w)] = args.w;
    pointers_[index_of(linear_buffer::dy)] = args.dy;
    pointers_[index_of(linear_buffer::dx)] = args.dx;
    pointers_[index_of(linear_buffer::dw)] = args.dw;
    pointers_[index_of(linear_buffer::bias_gradient)] = bias_gradient_.data();
    enter(stage::products);
    if (dgrad) run_gemm(p.gemm(gemm_kind::dgrad), true, stream);
    run_gemm(p.gemm(gemm_kind::wgrad), args.accumulate, stream);
    const std::size_t n = std::size_t(config_.out_features);
    if (p.bias_gradient != bias_gradient_method::none) enter(stage::kernels);
    switch (p.bias_gradient) {
      case bias_gradient_method::none: break;
      case bias_gradient_method::epilogue:
        if (p.bias_gradient_type == cublaslt::data_type::bf16) {
          detail::add_vector(reinterpret_cast<const __nv_bfloat16*>(bias_gradient_.data()), n,
                             args.accumulate, args.dbias, stream);
        } else {
          detail::add_vector(static_cast<const float*>(bias_gradient_.data()), n, args.accumulate, args.dbias,
                             stream);
        }
        break;
      case bias_gradient_method::column_sum:
        detail::column_sum(args.dy, std::size_t(args.m), n, args.accumulate, column_partials_.data(),
                           args.dbias, stream);
        break;
    }
  }

  // The FP8 copy in `buffer` (x_fp8, x_t_fp8, w_fp8, w_t_fp8, dy_fp8, dy_t_fp8) as of the last call
  // that made it, with the shape of a call with m tokens (of `pass`: forward_only for one with
  // backward_follows = false). Throws if that plan has no such copy.
  fp8_copy copy(linear_buffer buffer, std::int64_t m, linear_pass pass = linear_pass::training) const {
    const linear_plan p = make_linear_plan(config_, m, pass);
    for (const cast_plan& c : p.casts) {
      const tensor_copies& t = copies_[std::size_t(c.tensor)];
      if (c.row_buffer == buffer && c.row_major) {
        return {t.row.data(), t.row_scale.data(), c.rows, c.cols, config_.recipe[c.row_operand].quant};
      }
      if (c.transposed_buffer == buffer && c.transposed) {
        return {t.transposed.data(), t.transposed_scale.data(), c.cols, c.rows,
                config_.recipe[c.transposed_operand].quant};
      }
    }
    throw invalid_argument(std::string("fp8::cuda::linear_layer::copy: this configuration makes no ") +
                           buffer_name(buffer) + " copy");
  }

  // The BF16 decode a fake_fp8 class reads (x_fake, x_t_fake, w_fake, w_t_fake, dy_fake, dy_t_fake)
  // as of the last call that made it: rows x cols as stored, row-major. Throws if the plan has none.
  const __nv_bfloat16* fake_copy(linear_buffer buffer, std::int64_t m,
                                 linear_pass pass = linear_pass::training) const {
    const linear_plan p = make_linear_plan(config_, m, pass);
    for (const cast_plan& c : p.casts) {
      const tensor_copies& t = copies_[std::size_t(c.tensor)];
      if (c.row_fake_buffer == buffer && c.dequantize_row) return t.row_fake.data();
      if (c.transposed_fake_buffer == buffer && c.dequantize_transposed) return t.transposed_fake.data();
    }
    throw invalid_argument(std::string("fp8::cuda::linear_layer::fake_copy: this configuration makes no ") +
                           buffer_name(buffer) + " copy");
  }

  // The statistics of every operand read in a call with `statistics = true` since the last read
  // (`counted` false for the others: no such call read them), `precision` saying whether they are of
  // the copy an FP8 (or fake_fp8) product read, or of a scratch cast of a BF16 class's operand. Waits
  // for `stream` when there is something to read. A later statistics call for the same operand
  // replaces its counts (micro-batches: the last one counted).
  linear_statistics read_statistics(cudaStream_t stream = nullptr) {
    linear_statistics out{};
    bool any = false;
    for (bool c : counted_) any = any || c;
    if (!any) return out;
    std::array<cast_counters, gemm_operand_count> host{};
    FP8_CUDA_CHECK(
        cudaMemcpyAsync(host.data(), counters_.data(), sizeof(host), cudaMemcpyDeviceToHost, stream));
    FP8_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (std::size_t op = 0; op < gemm_operand_count; ++op) {
      if (counted_[op]) out[op] = statistics_of(host[op], config_.precision.of(gemm_of(gemm_operand(op))));
    }
    counted_.fill(false);
    return out;
  }

 private:
  // An FP8 copy's codes: the layer's own memory, or its place in a shared workspace.
  struct code_buffer {
    detail::device_array<std::uint8_t> owned;
    std::uint8_t* shared = nullptr;
    std::uint8_t* data() const noexcept { return shared != nullptr ? shared : owned.data(); }
  };
  // The FP8 copies of one tensor, with their inverse scales and the amax scratch of current scaling.
  struct tensor_copies {
    code_buffer row, transposed, scratch;
    detail::device_array<float> row_scale, transposed_scale, scratch_scale, amax;
    detail::device_array<__nv_bfloat16> row_fake, transposed_fake;  // decodes for fake_fp8 classes
  };

  static const linear_config& checked(const linear_config& config) {
    validate_linear_config(config, config.max_tokens);
    return config;
  }
  static constexpr std::size_t index_of(linear_buffer buffer) noexcept { return std::size_t(buffer); }
  // A caller's amax (or null) is one float the kernels read: it must be a float's address.
  static void check_given_amax(const float* amax, const char* function, const char* name) {
    if (amax != nullptr && !detail::is_aligned(amax, sizeof(float))) {
      throw invalid_argument(std::string(function) + ": " + name + " is at " +
                             cublaslt::detail::hex_address(amax) + ", not a float's 4-byte alignment");
    }
  }
  // A call of a layer that shares a workspace: on the workspace's one stream, and, where its producer
  // wrote `tensor`'s codes (`written`), with no other layer's call since fp8_input put them there.
  // The call then holds the workspace.
  void check_workspace(linear_tensor tensor, bool written, cudaStream_t stream, const char* function) {
    if (workspace_ == nullptr) return;
    workspace_->use_on(stream, function);
    if (written && !workspace_->claims().held_by(member_, tensor)) {
      throw invalid_argument(std::string(function) + ": " + tensor_name(tensor) +
                             "'s FP8 codes are in the shared linear_workspace, where another layer's call "
                             "(or this layer's for another tensor) has run since fp8_input gave them; "
                             "call fp8_input again and write them right before this call");
    }
    workspace_->claims().claim(member_, tensor);
  }

  // A call of m tokens whose X (or dY) its producer wrote as FP8 codes: the layer must take them;
  // fp8_input must have given their target for this call (for m tokens, since the last end_step(),
  // whose new scale would decode codes made with the old one, and taken by no call yet); and
  // statistics, which count the BF16 tensor against its copies, have no BF16 tensor to count.
  void check_written(linear_tensor tensor, std::int64_t m, bool statistics, const char* function) const {
    const char* refusal = input_refusals_[std::size_t(tensor)];
    if (refusal != nullptr) {
      throw invalid_argument(std::string(function) + ": " + tensor_name(tensor) +
                             " was written as FP8 by its producer, but " + refusal);
    }
    detail::require(!statistics, function,
                    std::string("statistics count the BF16 ") + tensor_name(tensor) +
                        " against its copies: a statistics call takes it in BF16, not written as FP8");
    const given_target& given = given_targets_[std::size_t(tensor)];
    const auto refuse = [&](const std::string& why) {  // the message is built only when it is thrown
      throw invalid_argument(std::string(function) + ": " + tensor_name(tensor) +
                             " was written as FP8 by its producer, but " + why);
    };
    if (given.m < 0) {
      refuse(std::string("no fp8_input(") + tensor_name(tensor) +
             ", m) gave its target since the last call that took such codes or cast the tensor itself; call "
             "fp8_input and write the "
             "codes right before each call that takes them");
    }
    if (given.m != m) {
      refuse("fp8_input gave its target for " + std::to_string(given.m) + " tokens, and this call has " +
             std::to_string(m));
    }
    if (given.step != scaling_.steps()) {
      refuse(
          "end_step() has run since fp8_input gave its target: the codes were made with the last step's "
          "scale, and this call would decode them with the new one; call fp8_input again after end_step()");
    }
  }

  // The rest of the fused delayed cast of a tensor whose codes its producer wrote into the row copy
  // (fp8_input): the transposed copy, both copies' inverse scale 1 / scale (the scale the producer
  // read), and the amax the producer recorded into the row operand's slot copied into the transposed
  // operand's, as cast_one does after a fused delayed cast. A forward_only plan has no transposed
  // copy of X: only the row copy's inverse scale is written then (transpose_codes of no elements).
  void transpose_written(const cast_plan& c, bool record, cudaStream_t stream) {
    tensor_copies& t = copies_[std::size_t(c.tensor)];
    const bool both = c.transposed;
    transpose_codes(t.row.data(), both ? std::size_t(c.rows) : 0, both ? std::size_t(c.cols) : 0,
                    both ? t.transposed.data() : nullptr, delayed_scale(c.row_operand), t.row_scale.data(),
                    both ? t.transposed_scale.data() : nullptr, stream);
    if (record && both)
      detail::record_amax(amax_slot(c.row_operand), amax_slot(c.transposed_operand), nullptr, stream);
  }

  // The bits of an FP8 code without its sign (the same for E4M3 and E5M2): zero means ±0.
  static constexpr std::uint32_t magnitude_mask = format_traits<e4m3_format>::magnitude_mask;

  void enter(stage s) const {
    if (stage_hook_) stage_hook_(s);
  }

  // The plan of the last token count of each pass, remade (and re-checked) only when the count
  // changes: evaluations between training steps do not remake the training plan.
  const linear_plan& plan_for(std::int64_t m, linear_pass pass) {
    const std::size_t i = std::size_t(pass);
    if (m != planned_m_[i]) {
      planned_[i] = make_linear_plan(config_, m, pass);
      planned_m_[i] = m;
    }
    return planned_[i];
  }
  // The plan of m tokens already made for `pass`, or null.
  const linear_plan* cached_plan(std::int64_t m, linear_pass pass) const noexcept {
    const std::size_t i = std::size_t(pass);
    return planned_m_[i] == m ? &planned_[i] : nullptr;
  }
  // A plan of m tokens already made for either pass (the training pass's first), or null.
  const linear_plan* cached_plan(std::int64_t m) const noexcept {
    const linear_plan* training = cached_plan(m, linear_pass::training);
    return training != nullptr ? training : cached_plan(m, linear_pass::forward_only);
  }

  // Delayed operands cast with their slot's format: the state's formats must be the recipe's.
  void check_formats() const {
    for (std::size_t op = 0; op < gemm_operand_count; ++op) {
      const operand_recipe& r = config_.recipe[gemm_operand(op)];
      const fp8_format state_format = scaling_.state().format(scaling_.slot(index_, gemm_operand(op)));
      if (r.mode == scaling_mode::delayed && r.quant.format != state_format) {
        throw invalid_argument(std::string("fp8::cuda::linear_layer: operand ") +
                               operand_name(gemm_operand(op)) + " is delayed-scaled in " +
                               format_name(r.quant.format) + " but its slot in the scaling state is " +
                               format_name(state_format) + " (build linear_scaling from the same recipe)");
      }
    }
  }

  // The copies of `c`, in the layer's own memory or, where `placed` (the layout of the layer's
  // transient copies in workspace_; the default places none) gives an offset, in the workspace.
  void allocate(const cast_plan& c, tensor_copies& t, const workspace_layout& placed = {}) {
    const std::size_t elements = std::size_t(c.rows) * std::size_t(c.cols);
    const operand_recipe& row = config_.recipe[c.row_operand];
    const operand_recipe& transposed = config_.recipe[c.transposed_operand];
    const std::size_t tensor = std::size_t(c.tensor);
    const auto codes = [&](std::size_t offset) {
      code_buffer out;
      if (offset != workspace_layout::none) {
        out.shared = workspace_->data() + offset;
      } else {
        out.owned = detail::device_array<std::uint8_t>(elements);
      }
      return out;
    };
    if (c.row_major) {
      t.row = codes(placed.row[tensor]);
      t.row_scale = detail::device_array<float>(scale_floats(row, c.rows, c.cols));
    }
    if (c.transposed) {
      t.transposed = codes(placed.transposed[tensor]);
      t.transposed_scale = detail::device_array<float>(scale_floats(transposed, c.cols, c.rows));
      if (!c.fused) {  // the transposed-only cast also writes a row-major copy nobody reads
        t.scratch = codes(placed.scratch[tensor]);
        t.scratch_scale = detail::device_array<float>(scale_floats(transposed, c.rows, c.cols));
      }
    }
    if (c.any()) t.amax = detail::device_array<float>(1);
    if (c.dequantize_row) t.row_fake = detail::device_array<__nv_bfloat16>(elements);
    if (c.dequantize_transposed) t.transposed_fake = detail::device_array<__nv_bfloat16>(elements);
  }

  // Whether a call (recording amaxes or not) must cast W (ensure_weight_copies): its copies are not
  // cached, or this is the step's first recording call and W's amaxes are not yet recorded. Never
  // where both classes that read W are BF16 and there is no amax to record: nothing is then cached,
  // so that a later recording call still records.
  bool weight_cast_due(const linear_plan& p, bool record) const noexcept {
    const bool recorded_this_step = weights_recorded_ && recorded_step_ == scaling_.steps();
    if (weights_cached_ && (recorded_this_step || !record)) return false;
    return p.cast(linear_tensor::w).any() || records_bf16_amax(p.bf16_cast(linear_tensor::w), record);
  }

  // W's casts (and the amaxes of its operands), once per weights_changed(): W is the same tensor
  // in every call until then, so a second cast or amax would give the same values.
  // A cache made by a call that recorded nothing (an evaluation pass right after weights_changed())
  // holds no amax of W for this step: the next recording call casts W again and records it. So does
  // the first recording call of a step that began without weights_changed() (frozen weights, a
  // skipped optimizer step): end_step() cleared W's slots, and every step's history needs W's amax.
  void ensure_weight_copies(const linear_plan& p, const __nv_bfloat16* w, bool record, cudaStream_t stream) {
    if (!weight_cast_due(p, record)) return;
    const cast_plan& c = p.cast(linear_tensor::w);
    const cast_plan& bf16 = p.bf16_cast(linear_tensor::w);
    cast_tensor(c, bf16, w, nullptr, record, stream);  // the casts, or only W's amax
    weights_cached_ = true;
    weights_recorded_ = record;
    recorded_step_ = scaling_.steps();
    if (c.any()) ++weight_casts_;
  }

  bool records_bf16_amax(const cast_plan& bf16, bool record) const noexcept {
    return record && config_.record_bf16_amax && bf16.any();
  }
  float* amax_slot(gemm_operand operand) { return scaling_.state().amax(scaling_.slot(index_, operand)); }
  // The operand's delayed scale of this step, in device memory (the state's: end_step() moves it).
  const float* delayed_scale(gemm_operand operand) const {
    return scaling_.state().scale(scaling_.slot(index_, operand));
  }

  // The FP8 casts `c` of `in` into the layer's copies, recording their amaxes when `record`, and the
  // amaxes of the operands of BF16 classes (`bf16`, the tensor's other operands) with them: from the
  // cast's own amax where the tensor is cast (the same tensor, so the same amax), else from an
  // amax-only pass, or from `given` (the caller's amax of `in`, or null) where there is one.
  void cast_tensor(const cast_plan& c, const cast_plan& bf16, const __nv_bfloat16* in, const float* given,
                   bool record, cudaStream_t stream) {
    const bool bf16_amax = records_bf16_amax(bf16, record);
    if (c.any()) {
      // A tensor has two operands: when one is cast, at most the other runs in BF16.
      float* also =
          bf16_amax ? amax_slot(bf16.row_major ? bf16.row_operand : bf16.transposed_operand) : nullptr;
      run_cast(c, in, given, record, also, copies_[std::size_t(c.tensor)], stream);
    } else if (bf16_amax) {
      amax_only_pass(bf16, in, given, stream);
    }
  }

  // The amax-only pass: max |in| max-accumulated into the slot of each operand in `bf16` (the
  // library's amax kernel straight into the first slot, as a delayed cast records; then copied), or
  // the caller's amax of `in` (`given`) recorded into them without reading `in`.
  void amax_only_pass(const cast_plan& bf16, const __nv_bfloat16* in, const float* given,
                      cudaStream_t stream) {
    const bool both = bf16.row_major && bf16.transposed;
    float* first = amax_slot(bf16.row_major ? bf16.row_operand : bf16.transposed_operand);
    if (given != nullptr) {
      detail::record_amax(given, first, both ? amax_slot(bf16.transposed_operand) : nullptr, stream);
      return;
    }
    compute_amax(in, std::size_t(bf16.rows) * std::size_t(bf16.cols), first, stream);
    if (both) detail::record_amax(first, amax_slot(bf16.transposed_operand), nullptr, stream);
  }

  // One cast of `in` (rows x cols) with `recipe` into out (and out_t when set), its amax recorded
  // into slot0 (and slot1: the other operand of a fused cast, or the tensor's BF16 operand). `given`:
  // the caller's amax of `in` (or null), which a current per-tensor cast takes instead of its own
  // amax pass.
  void cast_one(const __nv_bfloat16* in, std::int64_t rows, std::int64_t cols, const operand_recipe& recipe,
                gemm_operand scale_operand, std::uint8_t* out, float* scale_inv, std::uint8_t* out_t,
                float* scale_inv_t, const float* given, float* amax, float* slot0, float* slot1, bool record,
                cudaStream_t stream) {
    const std::size_t r = std::size_t(rows), c = std::size_t(cols);
    if (recipe.mode == scaling_mode::delayed) {
      // The scale of this step from the state; 1 / scale snapshotted into the copy's own scale_inv, so
      // a cached W keeps the scale it was made with even after end_step() moves the state on.
      const tensor_scale s{delayed_scale(scale_operand), scale_inv, record ? slot0 : nullptr};
      if (out_t != nullptr) {
        quantize_transpose(in, r, c, recipe.quant.format, s, out, out_t, stream);
        FP8_CUDA_CHECK(
            cudaMemcpyAsync(scale_inv_t, scale_inv, sizeof(float), cudaMemcpyDeviceToDevice, stream));
      } else {
        quantize(in, r * c, recipe.quant.format, s, out, stream);
      }
      if (record && slot1 != nullptr) detail::record_amax(slot0, slot1, nullptr, stream);
      return;
    }
    if (given != nullptr && recipe.quant.granularity == granularity::per_tensor) {
      if (out_t != nullptr) {
        quantize_transpose_from_amax(in, r, c, recipe.quant, given, out, scale_inv, out_t, scale_inv_t,
                                     stream);
      } else {
        quantize_from_amax(in, r, c, recipe.quant, given, out, scale_inv, stream);
      }
      if (record) detail::record_amax(given, slot0, slot1, stream);
      return;
    }
    if (out_t != nullptr) {
      quantize_transpose(in, r, c, recipe.quant, out, scale_inv, out_t, scale_inv_t, amax, stream);
    } else {
      quantize(in, r, c, recipe.quant, out, scale_inv, amax, stream);
    }
    if (record) detail::record_amax(amax, slot0, slot1, stream);
  }

  // The casts `c` of `in` into `t`, amaxes recorded into the operands' slots when `record` (and
  // into `also` too: the slot of the tensor's BF16 operand, when only one of its operands is cast);
  // `given`, the caller's amax of `in` or null (cast_one).
  void run_cast(const cast_plan& c, const __nv_bfloat16* in, const float* given, bool record, float* also,
                tensor_copies& t, cudaStream_t stream) {
    if (!c.any()) return;
    float* row_slot = amax_slot(c.row_operand);
    float* transposed_slot = amax_slot(c.transposed_operand);
    const operand_recipe& row = config_.recipe[c.row_operand];
    const operand_recipe& transposed = config_.recipe[c.transposed_operand];
    if (c.fused) {
      cast_one(in, c.rows, c.cols, row, c.row_operand, t.row.data(), t.row_scale.data(), t.transposed.data(),
               t.transposed_scale.data(), given, t.amax.data(), row_slot, transposed_slot, record, stream);
    } else {
      if (c.row_major) {
        cast_one(in, c.rows, c.cols, row, c.row_operand, t.row.data(), t.row_scale.data(), nullptr, nullptr,
                 given, t.amax.data(), row_slot, also, record, stream);
      }
      if (c.transposed) {
        // The transposed-only cast also writes a row-major copy nobody reads: into the scratch, or,
        // where the plan fuses the tensor's casts (no scratch; the same recipe, so the same scale
        // layout) and this call makes no row copy (dY without dX), into the row copy's buffers.
        const bool scratch = t.scratch.data() != nullptr;
        cast_one(in, c.rows, c.cols, transposed, c.transposed_operand,
                 scratch ? t.scratch.data() : t.row.data(),
                 scratch ? t.scratch_scale.data() : t.row_scale.data(), t.transposed.data(),
                 t.transposed_scale.data(), given, t.amax.data(), transposed_slot, also, record, stream);
      }
    }
    // fake_fp8: the copies decoded to BF16 by the library's dequantize (value x scale_inv of its
    // block, rounded once), bit-identical to the CPU's fp8::dequantize.
    const std::size_t rows = std::size_t(c.rows), cols = std::size_t(c.cols);
    if (c.row_major && c.dequantize_row) {
      dequantize(t.row.data(), rows, cols, row.quant, t.row_scale.data(), t.row_fake.data(), stream);
    }
    if (c.transposed && c.dequantize_transposed) {
      dequantize(t.transposed.data(), cols, rows, transposed.quant, t.transposed_scale.data(),
                 t.transposed_fake.data(), stream);
    }
  }

  // A statistics call casts its BF16 classes' operands with their recipes, which the layer cannot do
  // for mx_1x32 (it has no MX cast): refused before the call changes anything, naming the operand.
  void check_countable(const cast_plan& bf16, const char* function) const {
    const auto check = [&](bool made, gemm_operand operand) {
      if (made && config_.recipe[operand].quant.granularity == granularity::mx_1x32) {
        throw invalid_argument(std::string(function) + ": statistics cannot count " + operand_name(operand) +
                               ", whose BF16 class's recipe is mx_1x32 (the layer has no MX cast)");
      }
    };
    check(bf16.row_major, bf16.row_operand);
    check(bf16.transposed, bf16.transposed_operand);
  }

  // Statistics of one tensor: the copies its FP8 casts `c` made, and, for its operands of BF16 classes
  // (`bf16`), a cast into scratch copies with their recipe and scale (recording nothing: the amaxes
  // are cast_tensor's), counted the same way.
  void count_tensor(const cast_plan& c, const cast_plan& bf16, const __nv_bfloat16* in, cudaStream_t stream) {
    count_casts(c, in, copies_[std::size_t(c.tensor)], stream);
    if (!bf16.any()) return;
    tensor_copies& scratch = statistics_copies(bf16.tensor);
    run_cast(bf16, in, nullptr, false, nullptr, scratch, stream);
    count_casts(bf16, in, scratch, stream);
  }

  // The scratch copies of the statistics casts of BF16 operands, allocated at the first statistics
  // call that needs them (for max_tokens), never for a layer that asks no statistics. dY's are sized
  // for the unfused form too: a backward without dX casts only the transposed half of a fused plan
  // (X and W are cast as planned, so a fused plan of theirs needs no row-major scratch). The
  // allocation is made in relaxed capture mode, as the cuBLASLt handle allocates its workspaces, so
  // that a first statistics call captured into a graph in global mode does not invalidate the capture.
  tensor_copies& statistics_copies(linear_tensor tensor) {
    tensor_copies& t = statistics_copies_[std::size_t(tensor)];
    if (!statistics_allocated_[std::size_t(tensor)]) {
      cast_plan all = make_linear_plan(config_, config_.max_tokens).bf16_cast(tensor);
      if (tensor == linear_tensor::dy) all.fused = false;
      const cublaslt::detail::relaxed_capture_mode relaxed;
      allocate(all, t);
      statistics_allocated_[std::size_t(tensor)] = true;
    }
    return t;
  }

  // Counts each copy `c` made from `in` into `t`, into its operand's counters (statistics calls only).
  void count_casts(const cast_plan& c, const __nv_bfloat16* in, const tensor_copies& t, cudaStream_t stream) {
    const auto count = [&](gemm_operand operand, const std::uint8_t* codes, const float* scale_inv,
                           bool transposed) {
      const quantization& q = config_.recipe[operand].quant;
      detail::count_cast(in, std::size_t(c.rows), std::size_t(c.cols), codes, transposed, q.granularity,
                         scale_inv, max_finite(q.format), magnitude_mask,
                         counters_.data() + std::size_t(operand), stream);
      counted_[std::size_t(operand)] = true;
    };
    if (c.row_major) count(c.row_operand, t.row.data(), t.row_scale.data(), false);
    if (c.transposed) count(c.transposed_operand, t.transposed.data(), t.transposed_scale.data(), true);
  }

  // Data and inverse scales of a buffer: the caller's (pointers_) or an FP8 copy of the layer's.
  const void* data_of(linear_buffer buffer) const {
    switch (buffer) {
      case linear_buffer::x_fp8: return copies_[0].row.data();
      case linear_buffer::x_t_fp8: return copies_[0].transposed.data();
      case linear_buffer::w_fp8: return copies_[1].row.data();
      case linear_buffer::w_t_fp8: return copies_[1].transposed.data();
      case linear_buffer::dy_fp8: return copies_[2].row.data();
      case linear_buffer::dy_t_fp8: return copies_[2].transposed.data();
      case linear_buffer::x_fake: return copies_[0].row_fake.data();
      case linear_buffer::x_t_fake: return copies_[0].transposed_fake.data();
      case linear_buffer::w_fake: return copies_[1].row_fake.data();
      case linear_buffer::w_t_fake: return copies_[1].transposed_fake.data();
      case linear_buffer::dy_fake: return copies_[2].row_fake.data();
      case linear_buffer::dy_t_fake: return copies_[2].transposed_fake.data();
      default: return pointers_[index_of(buffer)];
    }
  }
  const float* scale_of(linear_buffer buffer) const {
    switch (buffer) {
      case linear_buffer::x_fp8: return copies_[0].row_scale.data();
      case linear_buffer::x_t_fp8: return copies_[0].transposed_scale.data();
      case linear_buffer::w_fp8: return copies_[1].row_scale.data();
      case linear_buffer::w_t_fp8: return copies_[1].transposed_scale.data();
      case linear_buffer::dy_fp8: return copies_[2].row_scale.data();
      case linear_buffer::dy_t_fp8: return copies_[2].transposed_scale.data();
      default: return nullptr;
    }
  }

  void run_gemm(const gemm_plan& g, bool accumulate, cudaStream_t stream) {
    cublaslt::gemm_problem problem = g.problem;
    problem.a.data = data_of(g.a);
    problem.b.data = data_of(g.b);
    if (cublaslt::is_fp8(problem.a.type)) {
      problem.a.scale_inv = scale_of(g.a);
      problem.b.scale_inv = scale_of(g.b);
    }
    problem.d.data = const_cast<void*>(data_of(g.d));
    if (g.c != linear_buffer::none && accumulate) {
      problem.c.data = data_of(g.c);
    } else {
      problem.options.beta = 0.0f;
      problem.c = {};
    }
    if (g.bias != linear_buffer::none) problem.options.bias = data_of(g.bias);
    lt_.gemm(problem, stream);
  }

  linear_config config_;
  linear_scaling& scaling_;
  std::size_t index_;
  cublaslt::handle& lt_;
  linear_workspace* workspace_ = nullptr;             // where the transient copies live when shared, or null
  std::uint64_t member_ = 0;                          // this layer's number among the workspace's claims
  std::array<tensor_copies, 3> copies_{};             // x, w, dy
  std::array<tensor_copies, 3> statistics_copies_{};  // scratch casts of BF16 operands (statistics_copies)
  std::array<bool, 3> statistics_allocated_{};
  detail::device_array<float> bias_gradient_;
  detail::device_array<float>
      column_partials_;  // the column sum's partials (bias_gradient_method::column_sum)
  std::array<const void*, linear_buffer_count> pointers_{};
  detail::device_array<cast_counters> counters_;  // per gemm_operand: the last statistics pass's counts
  std::array<bool, gemm_operand_count> counted_{};
  // fp8_input_refusal of each tensor (indexed by linear_tensor), fixed by the configuration: worked
  // out once, not in every call that passes written codes.
  std::array<const char*, 3> input_refusals_{};
  // What fp8_input gave for each tensor (indexed by linear_tensor) and no call has taken yet: the
  // token count and the scaling step (m < 0: none).
  struct given_target {
    std::int64_t m = -1;
    std::uint64_t step = 0;
  };
  std::array<given_target, 3> given_targets_{};
  bool weights_cached_ = false;      // W cast (or its BF16 amax recorded) since the last weights_changed()
  bool weights_recorded_ = false;    // ... by a call that recorded W's amaxes
  std::uint64_t recorded_step_ = 0;  // scaling_.steps() when W was last cast (or its amax taken)
  std::uint64_t weight_casts_ = 0;
  std::int64_t saved_m_ = -1;             // tokens of the last forward with backward_follows, or -1
  std::array<linear_plan, 2> planned_{};  // indexed by linear_pass
  std::array<std::int64_t, 2> planned_m_{-1, -1};
  std::function<void(stage)> stage_hook_;
};

}  // namespace fp8::cuda

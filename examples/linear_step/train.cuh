// A user's own training step around fp8::cuda::linear_layer: a two-layer ReLU network
// (in -> hidden -> out) learns to imitate a fixed "teacher" network of the same shape from fresh
// random batches, with the mean squared error as its loss. Every batch is new, so the training loss
// is a held-out loss too. The two student layers run in FP8 (delayed scaling, HYBRID: E4M3 forward,
// E5M2 gradients) or, with one field changed, in BF16; the teacher is a pair of BF16 layers.
// docs/linear_layer.md quotes the layers' set-up and the step between their marks ([layers],
// [training step]); the test docs_linear_step keeps the page's copy equal to this file's.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <fp8/cuda/linear.cuh>

#include "device_vector.cuh"
#include "kernels.cuh"

namespace linear_step {

struct run_options {
  bool fp8 = true;  // false: both student layers in BF16 (the baseline)
  int steps = 200;
  int in = 256, hidden = 1024, out = 256;  // features: multiples of 16, as FP8 products need
  int tokens = 256;                        // per micro-batch
  int micro_batches = 2;                   // per optimizer step: dW accumulated over them
};

// A weight tensor [rows, cols]: its BF16 compute copy, FP32 gradient and AdamW state.
struct weight {
  weight(int rows, int cols, cudaStream_t stream)
      : n(std::size_t(rows) * std::size_t(cols)),
        w16(n, stream),
        grad(n, stream),
        master(n, stream),
        m(n, stream),
        v(n, stream) {}
  adamw_tensor state() { return {master.data(), m.data(), v.data(), w16.data(), n}; }
  std::size_t n;
  device_vector<__nv_bfloat16> w16;
  device_vector<float> grad, master, m, v;
};

// Trains for o.steps steps; returns each step's loss (the mean over its micro-batches).
inline std::vector<float> train(const run_options& o) {
  cudaStream_t stream = nullptr;
  FP8_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct stream_owner {
    cudaStream_t s;
    ~stream_owner() { cudaStreamDestroy(s); }
  } owner{stream};

  const std::int64_t m = o.tokens;
  const std::size_t tokens = std::size_t(o.tokens);
  // [layers]
  fp8::cublaslt::handle lt;                         // cuBLASLt handle, workspace, plan cache
  fp8::gemm_recipe recipe{fp8::delayed_scaling{}};  // HYBRID: E4M3 forward, E5M2 gradients
  fp8::cuda::linear_scaling scaling(recipe, /*layers=*/2);
  fp8::cuda::linear_config up_config{o.in, o.hidden, m, /*bias=*/false, recipe, {}};
  fp8::cuda::linear_config down_config{o.hidden, o.out, m, false, recipe, {}};
  if (!o.fp8) up_config.precision = down_config.precision = fp8::cuda::linear_precision::bf16();
  fp8::cuda::linear_layer up(up_config, scaling, 0, lt), down(down_config, scaling, 1, lt);
  // [layers end]

  // The teacher: BF16 layers that record nothing (their own scaling state, never stepped).
  fp8::cuda::linear_scaling teacher_scaling(recipe, 2);
  fp8::cuda::linear_config teacher_up_config = up_config, teacher_down_config = down_config;
  for (fp8::cuda::linear_config* c : {&teacher_up_config, &teacher_down_config}) {
    c->precision = fp8::cuda::linear_precision::bf16();
    c->record_bf16_amax = false;
  }
  fp8::cuda::linear_layer teacher_up(teacher_up_config, teacher_scaling, 0, lt),
      teacher_down(teacher_down_config, teacher_scaling, 1, lt);

  // Weights ~ N(0, 1 / fan_in) before the ReLU, N(0, 2 / fan_in) after it: outputs of unit scale.
  // The student and the teacher start from different seeds.
  weight up_w(o.hidden, o.in, stream), down_w(o.out, o.hidden, stream), teacher_up_w(o.hidden, o.in, stream),
      teacher_down_w(o.out, o.hidden, stream);
  fill_normal(up_w.master.data(), up_w.w16.data(), up_w.n, 1, 1.0f / std::sqrt(float(o.in)), stream);
  fill_normal(down_w.master.data(), down_w.w16.data(), down_w.n, 2, std::sqrt(2.0f / float(o.hidden)),
              stream);
  fill_normal(nullptr, teacher_up_w.w16.data(), teacher_up_w.n, 3, 1.0f / std::sqrt(float(o.in)), stream);
  fill_normal(nullptr, teacher_down_w.w16.data(), teacher_down_w.n, 4, std::sqrt(2.0f / float(o.hidden)),
              stream);

  // Activations [tokens, features] and their gradients, BF16; the loss, one float.
  const std::size_t hidden = tokens * std::size_t(o.hidden), outputs = tokens * std::size_t(o.out);
  device_vector<__nv_bfloat16> x_(tokens * std::size_t(o.in), stream), h_(hidden, stream), a_(hidden, stream),
      out_(outputs, stream), target_(outputs, stream), d_out_(outputs, stream), d_a_(hidden, stream),
      d_h_(hidden, stream), teacher_h_(hidden, stream), teacher_a_(hidden, stream);
  device_vector<float> loss_(1, stream);
  __nv_bfloat16 *x = x_.data(), *h = h_.data(), *a = a_.data(), *out = out_.data(), *target = target_.data(),
                *d_out = d_out_.data(), *d_a = d_a_.data(), *d_h = d_h_.data();
  const __nv_bfloat16 *w_up = up_w.w16.data(), *w_down = down_w.w16.data();
  float *dw_up = up_w.grad.data(), *dw_down = down_w.grad.data(), *loss = loss_.data();
  const adamw_tensor up_state = up_w.state(), down_state = down_w.state();
  const adamw_step optimizer{};
  const int micro_batches = o.micro_batches;

  // A fresh batch x ~ N(0, 1) and the teacher's output for it.
  const auto make_batch = [&](__nv_bfloat16* batch, __nv_bfloat16* batch_target, int step_number,
                              int micro_batch, cudaStream_t on) {
    const std::uint64_t seed = 1000 + std::uint64_t(step_number) * 64 + std::uint64_t(micro_batch);
    fill_normal(nullptr, batch, x_.size(), seed, 1.0f, on);
    teacher_up.forward({batch, teacher_up_w.w16.data(), nullptr, teacher_h_.data(), m, /*record_amax=*/false},
                       on);
    relu_forward(teacher_h_.data(), teacher_a_.data(), hidden, on);
    teacher_down.forward({teacher_a_.data(), teacher_down_w.w16.data(), nullptr, batch_target, m, false}, on);
  };
  // The step's loss to the host, and the accumulator cleared for the next step.
  const auto read_and_clear = [](float* sum, cudaStream_t on) {
    float value = 0.0f;
    FP8_CUDA_CHECK(cudaMemcpyAsync(&value, sum, sizeof(float), cudaMemcpyDeviceToHost, on));
    FP8_CUDA_CHECK(cudaMemsetAsync(sum, 0, sizeof(float), on));
    FP8_CUDA_CHECK(cudaStreamSynchronize(on));
    return value;
  };

  std::vector<float> losses;
  // [training step]
  for (int step = 1; step <= o.steps; ++step) {
    for (int micro = 0; micro < micro_batches; ++micro) {
      const bool first = micro == 0;                 // the first micro-batch overwrites dW
      make_batch(x, target, step, micro, stream);    // your data: x [m, in], target [m, out]
      up.forward({x, w_up, nullptr, h, m}, stream);  // h = x · w_upᵀ
      relu_forward(h, a, hidden, stream);
      down.forward({a, w_down, nullptr, out, m}, stream);  // out = a · w_downᵀ
      mse_loss_backward(out, target, d_out, outputs, 1.0f / micro_batches, loss, stream);
      down.backward({d_out, a, w_down, d_a, dw_down, nullptr, m, !first}, stream);
      relu_backward(d_a, h, d_h, hidden, stream);
      up.backward({d_h, x, w_up, /*dx=*/nullptr, dw_up, nullptr, m, !first}, stream);
    }
    adamw(up_state, dw_up, step, optimizer, stream);  // FP32 masters -> BF16 w_up
    adamw(down_state, dw_down, step, optimizer, stream);
    up.weights_changed();  // W's FP8 copies are remade next forward
    down.weights_changed();
    scaling.end_step(stream);  // amax reduction once, histories roll
    losses.push_back(read_and_clear(loss, stream));
  }
  // [training step end]
  return losses;
}

}  // namespace linear_step

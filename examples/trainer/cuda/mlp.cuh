// The byte-window MLP of ../mlp.hpp on the device: the embeddings of each prediction's W bytes,
// concatenated, through GELU hidden layers to next-byte logits, in the CPU model's order, with the
// model's device_linears for the linear layers. nvcc only.
#pragma once

#include <cstdint>
#include <vector>

#include "device_loss.hpp"
#include "device_model.cuh"

namespace trainer::cuda {

class device_mlp final : public device_model {
 public:
  // As device_transformer's: shape (an MLP's options), host parameters, the host model's linear
  // layers (fc1 .. fcL, head).
  device_mlp(const model_options& shape, int batch, const parameter_set& host,
             const std::vector<linear_layer_info>& linears, const precision_policy& policy,
             const fp8::gemm_recipe& recipe, bool with_shadow, cudaStream_t stream,
             fp8::cuda::device_amax_reducer* amax_reducer = nullptr);

 private:
  double forward_pass(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind) override;
  void backward_pass() override;

  // Notation: N = B * T predictions, W window, E embedding width, M hidden width, V vocabulary.
  int batch_, context_, window_, embed_, hidden_, layers_, vocab_;
  std::size_t wte_;
  std::vector<std::size_t> weights_;  // fc1 .. fcL, head

  std::vector<std::int32_t> windows_host_;         // [N, W] the bytes each prediction reads
  device_buffer<std::int32_t> windows_, targets_;  // [N * W], [N]
  device_buffer<float> concat_;                    // [N, W * E] = [N * W, E] embedding rows
  std::vector<device_buffer<float>> pre_, post_;   // per hidden layer: [N, M] before and after GELU
  device_buffer<float> dpost_, dpre_, dconcat_;    // [N, M], [N, M], [N, W * E]
  device_loss loss_;
};

}  // namespace trainer::cuda

// A small MLP language model over bytes (Bengio et al. 2003 style): the embeddings of the last W
// bytes, concatenated, through GELU hidden layers to next-byte logits.
#pragma once

#include <cstdint>
#include <vector>

#include "model.hpp"

namespace trainer {

// The byte that prediction n (sequence n / T, position t = n % T) reads at window slot w of its W:
// byte t - W + 1 + w of its sequence in `inputs` ([B, T]), or 0 (a byte plain text never holds)
// before the sequence starts. Shared with the device model (cuda/mlp.cu).
std::int32_t mlp_window_byte(const std::int32_t* inputs, int context, int window, int n, int w);

class mlp final : public model {
 public:
  // Throws std::invalid_argument on a bad shape option.
  mlp(const model_options& options, int batch_size);

  parameter_set& parameters() override { return params_; }
  const parameter_set& parameters() const override { return params_; }
  const std::vector<linear_layer_info>& linear_layers() const override { return linears_; }
  int unit_count() const override { return int(linears_.size()); }  // one unit per linear layer
  std::string unit_name(int unit) const override { return linears_[std::size_t(unit)].name; }
  std::vector<std::pair<std::string, std::string>> shape_description() const override;

  void init_weights(rng& generator) override;
  double forward(const pass_context& pass, const std::int32_t* inputs, const std::int32_t* targets) override;
  void backward(const pass_context& pass) override;

 private:
  // Notation: N = B * T predictions, W window, E embedding width, M hidden width, V vocabulary.
  // Prediction n (sequence b, position t) reads bytes t-W+1 .. t of its sequence; positions before
  // the start read byte 0, which plain text never contains, as padding.
  std::int32_t window_byte(int n, int w) const;

  int batch_, context_, window_, embed_, hidden_, layers_, vocab_;
  parameter_set params_;
  std::size_t wte_;
  std::vector<std::size_t> weights_;  // fc1 .. fcL, head
  std::vector<linear_layer_info> linears_;

  std::vector<std::int32_t> inputs_, targets_;  // [N]
  std::vector<float> concat_;                   // [N, W*E]
  std::vector<std::vector<float>> pre_, post_;  // per hidden layer: [N, M] before and after GELU
  std::vector<float> logits_, probs_, losses_;  // [N, V], [N, V], [N]
  std::vector<float> dlogits_, dpost_, dpre_, dconcat_;
};

}  // namespace trainer

// What the training loop sees of a model: its parameters, its linear layers (for the FP8 scaling
// state and the per-layer precision switches), and a forward pass with a loss and a backward pass.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "parameters.hpp"
#include "pass_context.hpp"
#include "rng.hpp"

namespace trainer {

// A linear layer as the scaling state and the logs name it, e.g. {"blocks.1.w_down", 1}: the name of
// its weight tensor in the model's parameters.
struct linear_layer_info {
  std::string name;
  int unit = 0;  // precision unit: a transformer block or the head; an MLP layer
};

struct model_options {
  std::string kind = "transformer";  // or "mlp"
  int vocab = 256;                   // bytes
  int context = 128;                 // T: tokens per sequence
  int channels = 128;                // transformer d_model; MLP byte-embedding width
  int layers = 4;                    // transformer blocks; MLP hidden layers
  int heads = 4;                     // transformer attention heads
  int hidden = 384;                  // transformer SwiGLU width; MLP hidden width
  int window = 8;                    // MLP: bytes of context per prediction
};

class model {
 public:
  virtual ~model() = default;

  virtual parameter_set& parameters() = 0;
  virtual const parameter_set& parameters() const = 0;
  virtual const std::vector<linear_layer_info>& linear_layers() const = 0;
  // Precision units (see linear_layer_info) and their names ("block 0", "head", "fc1", ...).
  virtual int unit_count() const = 0;
  virtual std::string unit_name(int unit) const = 0;
  // The model's shape as (key, value) pairs: printed, and stored in checkpoints to check on load.
  virtual std::vector<std::pair<std::string, std::string>> shape_description() const = 0;

  // Draws initial master weights.
  virtual void init_weights(rng& generator) = 0;
  // inputs, targets: [B, T] bytes. Returns the mean cross-entropy in nats; keeps activations.
  virtual double forward(const pass_context& pass, const std::int32_t* inputs,
                         const std::int32_t* targets) = 0;
  // Accumulates parameter gradients of the last forward pass into parameters().grad.
  virtual void backward(const pass_context& pass) = 0;

 protected:
  model() = default;
  model(const model&) = default;
  model& operator=(const model&) = default;
};

// Builds the model `options.kind` for batches of `batch_size` sequences; throws std::invalid_argument
// naming a bad option.
std::unique_ptr<model> make_model(const model_options& options, int batch_size);

}  // namespace trainer

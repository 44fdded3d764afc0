// A trainer checkpoint read for inference: the model shape from its metadata and the FP32 master
// weights by name (the optimizer state is not read). Everything is checked before it is returned.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "safetensors.hpp"

namespace generate {

// The trainer's transformer shape (see examples/trainer/transformer.hpp).
struct model_shape {
  int vocab = 0, context = 0, channels = 0, layers = 0, heads = 0, hidden = 0;
  int head_dim() const { return channels / heads; }
};

struct checkpoint_model {
  std::string path;
  model_shape shape;
  std::map<std::string, std::vector<float>> weights;  // "wte", "blocks.0.wqkv", ... (FP32)
  std::map<std::string, std::string> metadata;

  // The weight called `name` (throws fp8::checkpoint_error if absent).
  const std::vector<float>& weight(const std::string& name) const;
};

// The parameter names and shapes of a transformer of `shape`, in the trainer's order.
std::vector<std::pair<std::string, std::vector<int>>> parameter_table(const model_shape& shape);

// The trainer's checksum of a file's tensors (FNV-1a over names and bytes in name order), as stored
// in its metadata 'checksum.fnv1a64' (16 hex digits).
std::string checkpoint_checksum(const trainer::safetensors_file& file);

// Reads a checkpoint written by fp8_trainer. Throws fp8::checkpoint_error naming the file and the
// problem: not readable / not safetensors, not a trainer checkpoint, corrupted (checksum), not a
// transformer, a shape field missing or out of range, a parameter missing or of another shape.
checkpoint_model load_checkpoint_model(const std::string& path);

}  // namespace generate

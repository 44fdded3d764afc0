// All parameters of a model in one allocation, with their gradients, AdamW moments and the compute
// copy (the weights the GEMMs read) as parallel buffers of the same layout, as in llm.c.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "precision.hpp"

namespace trainer {

// One named parameter tensor, e.g. {"blocks.0.wqkv", {384, 128}, true}.
struct tensor_spec {
  std::string name;
  std::vector<int> shape;
  bool weight_decay = false;  // AdamW decays matrices, not norm gains

  std::size_t size() const;
};

class parameter_set {
 public:
  explicit parameter_set(std::vector<tensor_spec> specs);

  const std::vector<tensor_spec>& specs() const { return specs_; }
  std::size_t tensor_count() const { return specs_.size(); }
  std::size_t offset(std::size_t tensor) const { return offsets_[tensor]; }
  std::size_t size() const { return master.size(); }
  // Index of the tensor called `name`; throws std::out_of_range if there is none.
  std::size_t index_of(const std::string& name) const;

  // compute = master, rounded to BF16 in bf16 and fp8 runs (called after every optimizer step).
  void refresh_compute(storage compute_storage);
  void zero_grad();

  std::vector<float> master;   // FP32 master weights          [size()]
  std::vector<float> compute;  // weights as the GEMMs read them [size()]
  std::vector<float> grad;     // FP32 gradients                [size()]
  std::vector<float> adam_m;   // AdamW first moment            [size()]
  std::vector<float> adam_v;   // AdamW second moment           [size()]

 private:
  std::vector<tensor_spec> specs_;
  std::vector<std::size_t> offsets_;
};

}  // namespace trainer

// The parameter buffers and their table of named tensors.
#include "parameters.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace trainer {

std::size_t tensor_spec::size() const {
  std::size_t n = 1;
  for (int extent : shape) n *= std::size_t(extent);
  return n;
}

parameter_set::parameter_set(std::vector<tensor_spec> specs) : specs_(std::move(specs)) {
  std::size_t total = 0;
  for (const tensor_spec& spec : specs_) {
    offsets_.push_back(total);
    total += spec.size();
  }
  master.assign(total, 0.0f);
  compute.assign(total, 0.0f);
  grad.assign(total, 0.0f);
  adam_m.assign(total, 0.0f);
  adam_v.assign(total, 0.0f);
}

std::size_t parameter_set::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].name == name) return i;
  }
  throw std::out_of_range("no parameter tensor named '" + name + "'");
}

void parameter_set::refresh_compute(storage compute_storage) {
  compute = master;
  store(compute_storage, compute.data(), compute.size());
}

void parameter_set::zero_grad() { std::fill(grad.begin(), grad.end(), 0.0f); }

}  // namespace trainer

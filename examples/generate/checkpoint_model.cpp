// Checkpoint loading for inference, on top of the trainer's safetensors reader.
#include "checkpoint_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "checkpoint.hpp"
#include "hash.hpp"

namespace generate {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw fp8::checkpoint_error("checkpoint '" + path + "': " + problem);
}

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::uint64_t tensor_checksum(const trainer::safetensors_file& file) {
  std::vector<const trainer::named_tensor*> sorted;
  for (const trainer::named_tensor& t : file.tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  std::uint64_t hash = trainer::fnv1a_offset;
  for (const trainer::named_tensor* t : sorted) {
    hash = trainer::fnv1a(t->name.data(), t->name.size(), hash);
    hash = trainer::fnv1a(t->bytes.data(), t->bytes.size(), hash);
  }
  return hash;
}

int shape_field(const std::string& path, const std::map<std::string, std::string>& meta,
                const std::string& key, int low, int high) {
  const auto it = meta.find("model." + key);
  if (it == meta.end())
    fail(path, "metadata 'model." + key + "' is missing: not a transformer checkpoint of fp8_trainer");
  long value = 0;
  try {
    std::size_t used = 0;
    value = std::stol(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("trailing characters");
  } catch (const std::exception&) {
    fail(path, "metadata 'model." + key + "' is '" + it->second + "', not an integer");
  }
  if (value < low || value > high) {
    fail(path, "metadata 'model." + key + "' is " + std::to_string(value) + ", outside [" +
                   std::to_string(low) + ", " + std::to_string(high) + "]");
  }
  return int(value);
}

}  // namespace

std::string checkpoint_checksum(const trainer::safetensors_file& file) { return hex(tensor_checksum(file)); }

const std::vector<float>& checkpoint_model::weight(const std::string& name) const {
  const auto it = weights.find(name);
  if (it == weights.end()) fail(path, "no parameter '" + name + "'");
  return it->second;
}

std::vector<std::pair<std::string, std::vector<int>>> parameter_table(const model_shape& s) {
  std::vector<std::pair<std::string, std::vector<int>>> table;
  table.push_back({"wte", {s.vocab, s.channels}});
  for (int l = 0; l < s.layers; ++l) {
    const std::string prefix = "blocks." + std::to_string(l) + ".";
    table.push_back({prefix + "attn_norm", {s.channels}});
    table.push_back({prefix + "wqkv", {3 * s.channels, s.channels}});
    table.push_back({prefix + "wo", {s.channels, s.channels}});
    table.push_back({prefix + "mlp_norm", {s.channels}});
    table.push_back({prefix + "w_gate_up", {2 * s.hidden, s.channels}});
    table.push_back({prefix + "w_down", {s.channels, s.hidden}});
  }
  table.push_back({"final_norm", {s.channels}});
  table.push_back({"lm_head", {s.vocab, s.channels}});
  return table;
}

checkpoint_model load_checkpoint_model(const std::string& path) {
  const trainer::safetensors_file file = trainer::read_safetensors(path);  // validates the container
  const auto meta = [&](const std::string& key) {
    const auto it = file.metadata.find(key);
    return it == file.metadata.end() ? std::string() : it->second;
  };
  if (meta("format") != trainer::checkpoint_format) {
    fail(path, "a safetensors file, but not a checkpoint of fp8_trainer (metadata 'format' is '" +
                   meta("format") + "')");
  }
  if (meta("format_version") != std::to_string(trainer::checkpoint_version)) {
    fail(path, "checkpoint format version '" + meta("format_version") + "'; this build reads version " +
                   std::to_string(trainer::checkpoint_version));
  }
  if (meta("checksum.fnv1a64") != hex(tensor_checksum(file))) {
    fail(path, "the tensor data does not match its checksum: the file is corrupted");
  }
  if (meta("model.model") != "transformer") {
    fail(path, "the checkpoint holds a '" + meta("model.model") +
                   "' model; fp8_generate serves the transformer only");
  }
  checkpoint_model result;
  result.path = path;
  result.metadata = file.metadata;
  model_shape& s = result.shape;
  s.vocab = shape_field(path, file.metadata, "vocab", 1, 1 << 20);
  s.context = shape_field(path, file.metadata, "context", 1, 1 << 16);
  s.channels = shape_field(path, file.metadata, "d_model", 1, 1 << 16);
  s.layers = shape_field(path, file.metadata, "layers", 1, 1024);
  s.heads = shape_field(path, file.metadata, "heads", 1, 1024);
  s.hidden = shape_field(path, file.metadata, "hidden", 1, 1 << 18);
  if (s.vocab != 256)
    fail(path, "vocabulary " + std::to_string(s.vocab) + ": fp8_generate works on bytes (256)");
  if (s.channels % s.heads != 0 || s.head_dim() % 2 != 0) {
    fail(path, "d_model " + std::to_string(s.channels) + " is not heads (" + std::to_string(s.heads) +
                   ") times an even head dimension");
  }
  for (const auto& [name, shape] : parameter_table(s)) {
    const trainer::named_tensor* t = file.find("params/" + name);
    if (t == nullptr) fail(path, "tensor 'params/" + name + "' is missing: the file is incomplete");
    const std::vector<std::int64_t> want(shape.begin(), shape.end());
    if (t->dtype != trainer::tensor_dtype::f32) fail(path, "tensor 'params/" + name + "' is not F32");
    if (t->shape != want) {
      fail(path, "tensor 'params/" + name +
                     "' does not have the shape its metadata describes: the checkpoint belongs to "
                     "a model of another shape");
    }
    std::vector<float> values(t->bytes.size() / sizeof(float));
    std::memcpy(values.data(), t->bytes.data(), t->bytes.size());
    for (float v : values) {
      if (!std::isfinite(v)) fail(path, "tensor 'params/" + name + "' holds NaN or Inf: the run diverged");
    }
    result.weights.emplace(name, std::move(values));
  }
  return result;
}

}  // namespace generate

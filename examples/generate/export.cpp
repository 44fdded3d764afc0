// The quantized safetensors writer: BF16, F32 and F8_E4M3 tensors (the trainer's writer knows
// neither BF16 nor FP8 dtypes, so this file writes the container itself).
#include "export.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "precision.hpp"

namespace generate {

namespace {

struct raw_tensor {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

raw_tensor f32(const std::string& name, std::vector<std::int64_t> shape, const std::vector<float>& values) {
  raw_tensor t{name, "F32", std::move(shape), std::vector<std::uint8_t>(values.size() * 4)};
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// BF16: the upper half of each float (the values are already BF16, so nothing is rounded here).
raw_tensor bf16(const std::string& name, std::vector<std::int64_t> shape, const std::vector<float>& values) {
  raw_tensor t{name, "BF16", std::move(shape), std::vector<std::uint8_t>(values.size() * 2)};
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t bits = 0;
    const float v = trainer::round_to_bf16(values[i]);
    std::memcpy(&bits, &v, 4);
    const std::uint16_t half = std::uint16_t(bits >> 16);
    std::memcpy(t.bytes.data() + 2 * i, &half, 2);
  }
  return t;
}

void add_linear(std::vector<raw_tensor>& out, const prepared_linear& layer, bool static_input) {
  const std::vector<std::int64_t> shape{layer.rows, layer.cols};
  if (!layer.quantized) {
    out.push_back(bf16(layer.name, shape, layer.weight));
    return;
  }
  const auto& q = *layer.quantized;
  out.push_back({layer.name, "F8_E4M3", shape, q.codes});
  out.push_back(f32(layer.name + ".weight_scale_inv", {std::int64_t(q.scale_inv.size())}, q.scale_inv));
  if (static_input) out.push_back(f32(layer.name + ".input_scale_inv", {1}, {1.0f / layer.input_scale}));
}

void write_file(const std::string& path, const std::vector<raw_tensor>& tensors,
                const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const raw_tensor& t : tensors) {
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file)
      throw std::runtime_error("cannot write '" + temporary +
                               "': check that the directory exists and is writable");
    const std::uint64_t length = text.size();
    std::uint8_t prefix[8];
    for (int i = 0; i < 8; ++i) prefix[i] = std::uint8_t(length >> (8 * i));
    file.write(reinterpret_cast<const char*>(prefix), 8);
    file.write(text.data(), std::streamsize(text.size()));
    for (const raw_tensor& t : tensors)
      file.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
    file.flush();
    if (!file) {
      file.close();
      std::remove(temporary.c_str());
      throw std::runtime_error("writing '" + temporary + "' failed (disk full?); nothing was written at '" +
                               path + "'");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw std::runtime_error("cannot rename '" + temporary + "' to '" + path + "'");
  }
}

}  // namespace

void write_quantized_model(const std::string& path, const engine& model, const checkpoint_model& source) {
  const model_shape& s = model.shape();
  const quant_config& config = model.config();
  const bool static_input = config.activations == activation_mode::static_scale;
  std::vector<raw_tensor> tensors;
  tensors.push_back(bf16("wte", {s.vocab, s.channels}, model.embedding()));
  for (int l = 0; l < s.layers; ++l) {
    const std::string prefix = "blocks." + std::to_string(l) + ".";
    tensors.push_back(f32(prefix + "attn_norm", {s.channels}, model.norm(l, false)));
    tensors.push_back(f32(prefix + "mlp_norm", {s.channels}, model.norm(l, true)));
    for (int k = 0; k < 4; ++k) add_linear(tensors, model.linears()[std::size_t(4 * l + k)], static_input);
    if (config.kv == kv_mode::fp8) {
      for (const bool values : {false, true}) {
        std::vector<float> inverse;
        for (int h = 0; h < s.heads; ++h)
          inverse.push_back(1.0f / model.kv_scales(values)[std::size_t(l * s.heads + h)]);
        tensors.push_back(f32(prefix + (values ? "v" : "k") + "_cache_scale_inv", {s.heads}, inverse));
      }
    }
  }
  tensors.push_back(f32("final_norm", {s.channels}, model.final_norm()));
  add_linear(tensors, model.head(), false);

  std::map<std::string, std::string> metadata;
  metadata["format"] = quantized_format;
  metadata["format_version"] = "1";
  for (const char* key : {"model", "vocab", "context", "d_model", "layers", "heads", "hidden"}) {
    const auto it = source.metadata.find(std::string("model.") + key);
    if (it != source.metadata.end()) metadata[it->first] = it->second;
  }
  metadata["quant.weights"] = to_string(config.weights);
  metadata["quant.activations"] = to_string(config.activations);
  metadata["quant.kv_cache"] = to_string(config.kv);
  if (config.kv == kv_mode::fp8) metadata["quant.kv_scales"] = fp8::inference::to_string(config.kv_scales);
  if (static_input) metadata["quant.calibration"] = fp8::inference::to_string(config.method);
  metadata["quant.fp8_format"] = "E4M3";
  metadata["source.checkpoint"] = source.path;
  write_file(path, tensors, metadata);
}

}  // namespace generate

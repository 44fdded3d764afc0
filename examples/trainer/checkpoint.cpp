// Checkpoint layout and validation on top of the safetensors reader and writer.
#include "checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "hash.hpp"

namespace trainer {

namespace {

constexpr std::size_t rng_words = std::tuple_size<rng::state_type>::value;

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// FNV-1a over every tensor's name and bytes, in name order (independent of the header's key order).
std::uint64_t tensor_checksum(const safetensors_file& file) {
  std::vector<const named_tensor*> sorted;
  for (const named_tensor& t : file.tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const named_tensor* a, const named_tensor* b) { return a->name < b->name; });
  std::uint64_t hash = fnv1a_offset;
  for (const named_tensor* t : sorted) {
    hash = fnv1a(t->name.data(), t->name.size(), hash);
    hash = fnv1a(t->bytes.data(), t->bytes.size(), hash);
  }
  return hash;
}

std::vector<std::int64_t> shape_of(const tensor_spec& spec) {
  return std::vector<std::int64_t>(spec.shape.begin(), spec.shape.end());
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw fp8::checkpoint_error("checkpoint '" + path + "': " + problem);
}

const named_tensor& require(const safetensors_file& file, const std::string& path, const std::string& name,
                            tensor_dtype dtype, const std::vector<std::int64_t>& shape) {
  const named_tensor* t = file.find(name);
  if (t == nullptr)
    fail(path, "tensor '" + name + "' is missing: the file is incomplete or not a trainer checkpoint");
  if (t->dtype != dtype) {
    fail(path, "tensor '" + name + "' is " + dtype_name(t->dtype) + ", expected " + dtype_name(dtype));
  }
  if (!shape.empty() && t->shape != shape) {
    fail(path, "tensor '" + name + "' has shape " + shape_text(t->shape) + " but this model needs " +
                   shape_text(shape) + ": the checkpoint belongs to a model of another shape");
  }
  return *t;
}

template <class T>
std::vector<T> values_of(const named_tensor& t) {
  std::vector<T> values(t.bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), t.bytes.data(), t.bytes.size());
  return values;
}

}  // namespace

void save_checkpoint(const std::string& path, const model& m, long step, const data_position& data,
                     const std::vector<std::uint8_t>& scaling_state, const text_data& text,
                     const std::map<std::string, std::string>& info) {
  const parameter_set& params = m.parameters();
  safetensors_file file;
  for (std::size_t i = 0; i < params.tensor_count(); ++i) {
    const tensor_spec& spec = params.specs()[i];
    const std::size_t at = params.offset(i);
    file.tensors.push_back(make_tensor("params/" + spec.name, shape_of(spec), params.master.data() + at));
    file.tensors.push_back(make_tensor("adam_m/" + spec.name, shape_of(spec), params.adam_m.data() + at));
    file.tensors.push_back(make_tensor("adam_v/" + spec.name, shape_of(spec), params.adam_v.data() + at));
  }
  const std::int64_t step_value = step;
  file.tensors.push_back(make_tensor("train/step", {1}, &step_value));
  const std::uint64_t epoch = data.epoch, index = data.index;
  file.tensors.push_back(make_tensor("data/epoch", {1}, &epoch));
  file.tensors.push_back(make_tensor("data/index", {1}, &index));
  file.tensors.push_back(make_tensor("rng/data_epoch", {std::int64_t(rng_words)}, data.epoch_rng.data()));
  file.tensors.push_back(
      make_tensor("scaling/state", {std::int64_t(scaling_state.size())}, scaling_state.data()));

  file.metadata = info;
  file.metadata["format"] = checkpoint_format;
  file.metadata["format_version"] = std::to_string(checkpoint_version);
  for (const auto& [key, value] : m.shape_description()) file.metadata["model." + key] = value;
  file.metadata["data.fingerprint"] = hex(text.fingerprint);
  file.metadata["data.description"] = text.description;
  file.metadata["checksum.fnv1a64"] = hex(tensor_checksum(file));
  write_safetensors(path, file);
}

checkpoint_contents read_checkpoint(const std::string& path, const model& m, const text_data& text) {
  return check_checkpoint(read_safetensors(path), path, m, text);
}

checkpoint_contents read_checkpoint(const std::uint8_t* bytes, std::size_t size, const std::string& name,
                                    const model& m, const text_data& text) {
  return check_checkpoint(parse_safetensors(bytes, size, name), name, m, text);
}

checkpoint_contents check_checkpoint(const safetensors_file& file, const std::string& path, const model& m,
                                     const text_data& text) {
  const auto meta = [&](const std::string& key) {
    const auto it = file.metadata.find(key);
    return it == file.metadata.end() ? std::string() : it->second;
  };
  if (meta("format") != checkpoint_format) {
    fail(path, "a safetensors file, but not a checkpoint of this trainer (metadata 'format' is '" +
                   meta("format") + "')");
  }
  if (meta("format_version") != std::to_string(checkpoint_version)) {
    fail(path, "checkpoint format version '" + meta("format_version") + "'; this build reads version " +
                   std::to_string(checkpoint_version));
  }
  if (meta("checksum.fnv1a64") != hex(tensor_checksum(file))) {
    fail(path, "the tensor data does not match its checksum (stored " + meta("checksum.fnv1a64") +
                   ", computed " + hex(tensor_checksum(file)) + "): the file is corrupted");
  }
  std::string mismatches;
  for (const auto& [key, value] : m.shape_description()) {
    const std::string saved = meta("model." + key);
    if (saved != value)
      mismatches +=
          "\n  " + key + ": checkpoint " + (saved.empty() ? "(none)" : saved) + ", this run " + value;
  }
  if (!mismatches.empty()) {
    fail(path,
         "the checkpoint's model differs from this run's:" + mismatches +
             "\npass the model options the checkpoint was trained with (--model, --d-model, --layers, ...)");
  }
  if (meta("data.fingerprint") != hex(text.fingerprint)) {
    fail(path, "it was trained on other data ('" + meta("data.description") + "', fingerprint " +
                   meta("data.fingerprint") + ") than this run reads ('" + text.description +
                   "', fingerprint " + hex(text.fingerprint) + "): pass the same --data to resume");
  }

  checkpoint_contents contents;
  contents.metadata = file.metadata;
  const parameter_set& params = m.parameters();
  std::size_t expected_tensors = 0;
  const std::pair<const char*, std::vector<float>*> groups[] = {
      {"params/", &contents.master}, {"adam_m/", &contents.adam_m}, {"adam_v/", &contents.adam_v}};
  for (const auto& [group, target] : groups) {
    target->resize(params.size());
    for (std::size_t i = 0; i < params.tensor_count(); ++i) {
      const tensor_spec& spec = params.specs()[i];
      // Named, not temporaries: the reference that require returns points into the file, and
      // GCC 13's dangling-reference check cannot tell that from one into an argument.
      const std::string name = group + spec.name;
      const std::vector<std::int64_t> shape = shape_of(spec);
      const named_tensor& t = require(file, path, name, tensor_dtype::f32, shape);
      std::memcpy(target->data() + params.offset(i), t.bytes.data(), t.bytes.size());
      ++expected_tensors;
    }
  }
  const auto step = values_of<std::int64_t>(require(file, path, "train/step", tensor_dtype::i64, {1}));
  if (step[0] < 0)
    fail(path, "train/step is negative (" + std::to_string(step[0]) + "): the file is corrupted");
  contents.step = long(step[0]);
  contents.data.epoch =
      values_of<std::uint64_t>(require(file, path, "data/epoch", tensor_dtype::u64, {1}))[0];
  contents.data.index =
      values_of<std::uint64_t>(require(file, path, "data/index", tensor_dtype::u64, {1}))[0];
  const auto words = values_of<std::uint64_t>(
      require(file, path, "rng/data_epoch", tensor_dtype::u64, {std::int64_t(rng_words)}));
  std::copy(words.begin(), words.end(), contents.data.epoch_rng.begin());
  contents.scaling_state =
      values_of<std::uint8_t>(require(file, path, "scaling/state", tensor_dtype::u8, {}));
  expected_tensors += 5;
  if (file.tensors.size() != expected_tensors) {
    for (const named_tensor& t : file.tensors) {
      const std::string& name = t.name;
      const auto slash = name.find('/');
      const std::string group = slash == std::string::npos ? "" : name.substr(0, slash + 1);
      bool known = name == "train/step" || name == "data/epoch" || name == "data/index" ||
                   name == "rng/data_epoch" || name == "scaling/state";
      if (group == "params/" || group == "adam_m/" || group == "adam_v/") {
        const std::string param = name.substr(slash + 1);
        known = std::any_of(params.specs().begin(), params.specs().end(),
                            [&](const tensor_spec& s) { return s.name == param; });
      }
      if (!known) fail(path, "unexpected tensor '" + name + "': the checkpoint belongs to another model");
    }
  }
  return contents;
}

}  // namespace trainer

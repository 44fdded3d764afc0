// The safetensors reader and writer, with nlohmann::json for the header.
#include "safetensors.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "file_io.hpp"

namespace trainer {

namespace {

constexpr std::size_t length_field_bytes = 8;
constexpr std::size_t header_alignment = 8;
// The reference implementation refuses headers above 100 MB; so do we (it also bounds allocations).
constexpr std::uint64_t max_header_bytes = 100'000'000;
// The largest checkpoint read: far above any model this CPU trainer trains, far below a size whose
// allocation could take a machine down.
constexpr std::uint64_t max_file_bytes = std::uint64_t(64) << 30;

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw fp8::checkpoint_error("checkpoint '" + path + "': " + problem);
}

bool dtype_from_name(const std::string& name, tensor_dtype& dtype) {
  for (tensor_dtype d : {tensor_dtype::f32, tensor_dtype::i64, tensor_dtype::u64, tensor_dtype::u8}) {
    if (name == dtype_name(d)) {
      dtype = d;
      return true;
    }
  }
  return false;
}

template <class T>
named_tensor make_any(const std::string& name, std::vector<std::int64_t> shape, const T* values,
                      tensor_dtype dtype) {
  std::size_t count = 1;
  for (std::int64_t extent : shape) count *= std::size_t(extent);
  named_tensor tensor{name, dtype, std::move(shape), std::vector<std::uint8_t>(count * sizeof(T))};
  if (count != 0) std::memcpy(tensor.bytes.data(), values, count * sizeof(T));
  return tensor;
}

}  // namespace

const named_tensor* safetensors_file::find(const std::string& name) const {
  for (const named_tensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::size_t element_size(tensor_dtype dtype) {
  switch (dtype) {
    case tensor_dtype::f32: return 4;
    case tensor_dtype::i64:
    case tensor_dtype::u64: return 8;
    case tensor_dtype::u8: return 1;
  }
  return 1;
}

const char* dtype_name(tensor_dtype dtype) {
  switch (dtype) {
    case tensor_dtype::f32: return "F32";
    case tensor_dtype::i64: return "I64";
    case tensor_dtype::u64: return "U64";
    case tensor_dtype::u8: return "U8";
  }
  return "?";
}

named_tensor make_tensor(const std::string& name, std::vector<std::int64_t> shape, const float* values) {
  return make_any(name, std::move(shape), values, tensor_dtype::f32);
}
named_tensor make_tensor(const std::string& name, std::vector<std::int64_t> shape,
                         const std::uint64_t* values) {
  return make_any(name, std::move(shape), values, tensor_dtype::u64);
}
named_tensor make_tensor(const std::string& name, std::vector<std::int64_t> shape,
                         const std::int64_t* values) {
  return make_any(name, std::move(shape), values, tensor_dtype::i64);
}
named_tensor make_tensor(const std::string& name, std::vector<std::int64_t> shape,
                         const std::uint8_t* values) {
  return make_any(name, std::move(shape), values, tensor_dtype::u8);
}

void write_safetensors(const std::string& path, const safetensors_file& file) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::uint64_t offset = 0;
  for (const named_tensor& t : file.tensors) {
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.resize((text.size() + header_alignment - 1) / header_alignment * header_alignment, ' ');

  std::uint8_t length[length_field_bytes];
  for (std::size_t i = 0; i < length_field_bytes; ++i)
    length[i] = std::uint8_t(std::uint64_t(text.size()) >> (8 * i));
  std::vector<byte_range> parts{{length, sizeof(length)}, {text.data(), text.size()}};
  for (const named_tensor& t : file.tensors) parts.push_back({t.bytes.data(), t.bytes.size()});
  try {
    write_file_atomically(path, parts);
  } catch (const file_error& e) {
    fail(path, std::string(e.what()) + " (does the directory exist, is it writable, is the disk full?)");
  }
}

safetensors_file read_safetensors(const std::string& path) {
  if (ends_with(path, temporary_suffix)) {
    fail(path,
         "this is the temporary file of an unfinished save (it is renamed only once complete): resume "
         "from a checkpoint without the '" +
             std::string(temporary_suffix) + "' suffix");
  }
  std::vector<std::uint8_t> bytes;
  try {
    bytes = read_regular_file(path, max_file_bytes);
  } catch (const file_error& e) { fail(path, std::string(e.what()) + " (check the path given to --resume)"); }
  return parse_safetensors(bytes.data(), bytes.size(), path);
}

namespace {

safetensors_file parse_header_and_data(const std::uint8_t* bytes, std::size_t size, const std::string& path) {
  if (size < length_field_bytes) {
    fail(path, "the file has " + std::to_string(size) +
                   " bytes, fewer than the 8-byte header length: "
                   "it is truncated or not a safetensors file");
  }
  std::uint64_t header_bytes = 0;
  for (std::size_t i = 0; i < length_field_bytes; ++i) header_bytes |= std::uint64_t(bytes[i]) << (8 * i);
  const std::uint64_t available = size - length_field_bytes;
  if (header_bytes > available || header_bytes > max_header_bytes || header_bytes < 2) {
    fail(path, "the header length field says " + std::to_string(header_bytes) + " bytes but the file holds " +
                   std::to_string(available) + " after it: the file is truncated or not a safetensors file");
  }
  const std::string text(reinterpret_cast<const char*>(bytes) + length_field_bytes,
                         std::size_t(header_bytes));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    fail(path, std::string("the header is not valid JSON (") + e.what() + "): the file is corrupted");
  }
  if (!header.is_object()) fail(path, "the header is not a JSON object: the file is corrupted");

  const std::size_t data_begin = length_field_bytes + std::size_t(header_bytes);
  const std::uint64_t data_bytes = size - data_begin;
  safetensors_file file;
  struct range {
    std::uint64_t begin, end;
    std::string name;
  };
  std::vector<range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& entry = it.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path, "__metadata__ is not a JSON object");
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        if (!m.value().is_string()) fail(path, "__metadata__ entry '" + m.key() + "' is not a string");
        file.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "': ";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      fail(path, where + "needs dtype, shape and data_offsets");
    }
    named_tensor tensor;
    tensor.name = name;
    if (!entry.at("dtype").is_string() ||
        !dtype_from_name(entry.at("dtype").get<std::string>(), tensor.dtype)) {
      fail(path, where + "unsupported dtype " + entry.at("dtype").dump() +
                     " (this trainer writes F32, I64, U64, U8)");
    }
    const nlohmann::json& shape = entry.at("shape");
    const nlohmann::json& offsets = entry.at("data_offsets");
    if (!shape.is_array()) fail(path, where + "shape is not an array");
    std::uint64_t elements = 1;
    for (const nlohmann::json& extent : shape) {
      if (!extent.is_number_unsigned()) fail(path, where + "shape entries must be non-negative integers");
      const std::uint64_t e = extent.get<std::uint64_t>();
      if (e != 0 && elements > data_bytes / e)
        fail(path, where + "shape " + shape.dump() + " exceeds the data section");
      elements *= e;
      tensor.shape.push_back(std::int64_t(e));
    }
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      fail(path, where + "data_offsets must be two non-negative integers");
    }
    const std::uint64_t begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
    if (begin > end || end > data_bytes) {
      fail(path, where + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] lie outside the " + std::to_string(data_bytes) +
                     "-byte data section: the file is truncated");
    }
    if (end - begin != elements * element_size(tensor.dtype)) {
      fail(path, where + "holds " + std::to_string(end - begin) + " bytes but shape " + shape.dump() +
                     " of " + dtype_name(tensor.dtype) + " needs " +
                     std::to_string(elements * element_size(tensor.dtype)));
    }
    const std::uint8_t* first = bytes + data_begin + begin;
    tensor.bytes.assign(first, first + (end - begin));
    ranges.push_back({begin, end, name});
    file.tensors.push_back(std::move(tensor));
  }
  // The byte ranges must tile the data section: no gaps, no overlaps, nothing after the last tensor.
  std::sort(ranges.begin(), ranges.end(), [](const range& a, const range& b) { return a.begin < b.begin; });
  std::uint64_t expected = 0;
  for (const range& r : ranges) {
    if (r.begin != expected) {
      fail(path, "tensor '" + r.name + "' starts at byte " + std::to_string(r.begin) + " where " +
                     std::to_string(expected) +
                     " was expected (tensors overlap or leave a gap): the file is corrupted");
    }
    expected = r.end;
  }
  if (expected != data_bytes) {
    fail(path, "the data section has " + std::to_string(data_bytes) + " bytes but the tensors cover " +
                   std::to_string(expected) + ": the file is corrupted or has trailing bytes");
  }
  return file;
}

}  // namespace

safetensors_file parse_safetensors(const std::uint8_t* bytes, std::size_t size, const std::string& name) {
  try {
    return parse_header_and_data(bytes, size, name);
  } catch (const nlohmann::json::exception& e) {
    // The checks above test every value's type before reading it; this is the net under them.
    fail(name,
         std::string("the header has an unexpected structure (") + e.what() + "): the file is corrupted");
  }
}

}  // namespace trainer

// Reading and writing safetensors files (the format of Hugging Face's `safetensors`): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range, then
// the raw little-endian tensor bytes. Reading validates everything before returning anything.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <fp8/scaling/checkpoint.hpp>  // fp8::checkpoint_error: a saved file that cannot be used

namespace trainer {

enum class tensor_dtype { f32, i64, u64, u8 };

struct named_tensor {
  std::string name;
  tensor_dtype dtype = tensor_dtype::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;  // little-endian element bytes, shape's product x element size
};

struct safetensors_file {
  std::map<std::string, std::string> metadata;  // "__metadata__": string to string
  std::vector<named_tensor> tensors;

  // The tensor called `name`, or nullptr.
  const named_tensor* find(const std::string& name) const;
};

std::size_t element_size(tensor_dtype dtype);
const char* dtype_name(tensor_dtype dtype);  // "F32", "I64", "U64", "U8"

// Builds tensors from host values (this machine is little-endian, as safetensors requires).
named_tensor make_tensor(const std::string& name, std::vector<std::int64_t> shape, const float* values);
named_tensor make_tensor(const std::string& name, std::vector<std::int64_t> shape,
                         const std::uint64_t* values);
named_tensor make_tensor(const std::string& name, std::vector<std::int64_t> shape,
                         const std::int64_t* values);
named_tensor make_tensor(const std::string& name, std::vector<std::int64_t> shape,
                         const std::uint8_t* values);

// Writes the file atomically (to `path`.tmp, synced, then renamed), header padded to 8 bytes with
// spaces as the reference implementation does. Throws fp8::checkpoint_error if the file cannot be
// written.
void write_safetensors(const std::string& path, const safetensors_file& file);

// Reads and validates a file: a regular file (not a directory, device or FIFO, not the *.tmp of an
// unfinished save), header length within the file, valid JSON, known dtypes, byte ranges that match
// the shapes and tile the data section exactly. Throws fp8::checkpoint_error naming the file and the
// problem otherwise, and no other exception (std::bad_alloc aside: nothing read from the file sizes
// an allocation beyond the file's own size).
safetensors_file read_safetensors(const std::string& path);

// The same checks on bytes already in memory; `name` stands for the file in messages. The entry
// point of the fuzz target: it throws fp8::checkpoint_error and nothing else.
safetensors_file parse_safetensors(const std::uint8_t* bytes, std::size_t size, const std::string& name);

}  // namespace trainer

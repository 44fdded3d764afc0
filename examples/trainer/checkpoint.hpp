// Trainer checkpoints in the safetensors format: master weights, AdamW moments, the step, the data
// position with its random state, and the FP8 scaling state, with the model shape, the data
// fingerprint and a checksum in the metadata so that a corrupt or mismatched file is refused.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data.hpp"
#include "model.hpp"
#include "safetensors.hpp"

namespace trainer {

inline constexpr const char* checkpoint_format = "fp8-trainer-checkpoint";
inline constexpr int checkpoint_version = 1;

// Everything a checkpoint restores, read and validated but not yet applied to a live run.
struct checkpoint_contents {
  long step = 0;  // optimizer steps completed
  data_position data;
  std::vector<float> master, adam_m, adam_v;  // in the model's parameter layout
  std::vector<std::uint8_t> scaling_state;    // fp8::save_scaling_state bytes
  std::map<std::string, std::string> metadata;
};

// Tensors: params/<name>, adam_m/<name>, adam_v/<name> (F32, the parameter's shape); train/step
// (I64 [1]); data/epoch, data/index (U64 [1]); rng/data_epoch (U64 [4], the xoshiro state the
// epoch's order was drawn from); scaling/state (U8, the library's scaling-state format).
// `info` adds descriptive metadata (precision, recipe, ...). Throws fp8::checkpoint_error on I/O
// failure (the previous file at `path`, if any, is then left as it was).
void save_checkpoint(const std::string& path, const model& m, long step, const data_position& data,
                     const std::vector<std::uint8_t>& scaling_state, const text_data& text,
                     const std::map<std::string, std::string>& info);

// Reads `path` and checks it against the live model and data: format and version, every tensor's
// presence, dtype and shape, the model shape, the data fingerprint, and the checksum of the tensor
// bytes. Throws fp8::checkpoint_error naming the file, the first problem and what to do about it,
// and no other exception.
checkpoint_contents read_checkpoint(const std::string& path, const model& m, const text_data& text);
// The same on the bytes of a file already in memory (`name` stands for the file in messages): the
// entry point of the fuzz target.
checkpoint_contents read_checkpoint(const std::uint8_t* bytes, std::size_t size, const std::string& name,
                                    const model& m, const text_data& text);
// The checks of a parsed file against the live model and data.
checkpoint_contents check_checkpoint(const safetensors_file& file, const std::string& path, const model& m,
                                     const text_data& text);

}  // namespace trainer

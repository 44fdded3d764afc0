// Saving and loading a delayed_scaling_state (config, scales, amax histories) in a versioned binary
// format with a CRC-32, so that a resumed run continues with exactly the scales it stopped with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <istream>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "../error.hpp"
#include "checksum.hpp"
#include "delayed_scaling_state.hpp"

namespace fp8 {

// Why a saved state was refused; the live state is untouched when this is thrown.
class checkpoint_error : public error {
 public:
  using error::error;
};

// The format, all integers little-endian, floats as their IEEE bit patterns:
//   magic "FP8SCALE" (8 bytes) | u32 version (1) | u64 payload size in bytes |
//   payload: u8 format_mix | u8 amax_algorithm | u8 power_of_two | u8 0 | i32 margin |
//            u64 history_length | u64 tensor count |
//            per tensor: u8 fp8_format | 3 bytes 0 | f32 scale | f32 scale_inv |
//                        history_length x f32 amax, newest first |
//   u32 CRC-32 of every byte before it.
inline constexpr char scaling_state_magic[8] = {'F', 'P', '8', 'S', 'C', 'A', 'L', 'E'};
inline constexpr std::uint32_t scaling_state_version = 1;

namespace detail {

inline constexpr std::size_t checkpoint_header_bytes = sizeof(scaling_state_magic) + 4 + 8;
inline constexpr std::size_t checkpoint_config_bytes = 4 + 4 + 8 + 8;
inline constexpr std::size_t checkpoint_tensor_fixed_bytes = 4 + 4 + 4;
inline constexpr std::size_t checkpoint_checksum_bytes = 4;

class byte_writer {
 public:
  void bytes(const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    out_.insert(out_.end(), p, p + size);
  }
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
  void f32(float v) { u32(bit_cast<std::uint32_t>(v)); }
  std::vector<unsigned char>& data() { return out_; }

 private:
  std::vector<unsigned char> out_;
};

// The start of every message about a saved state: "fp8 scaling state 'run/scaling.bin': ".
inline std::string state_prefix(const std::string& source) { return "fp8 scaling state '" + source + "': "; }

class byte_reader {
 public:
  byte_reader(const unsigned char* data, std::size_t size, const std::string& source)
      : data_(data), size_(size), source_(source) {}
  std::uint8_t u8() { return take(1)[0]; }
  std::uint32_t u32() {
    const unsigned char* p = take(4);
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t(p[i]) << (8 * i);
    return v;
  }
  std::uint64_t u64() {
    const unsigned char* p = take(8);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t(p[i]) << (8 * i);
    return v;
  }
  float f32() { return bit_cast<float>(u32()); }

 private:
  const unsigned char* take(std::size_t n) {
    if (size_ - offset_ < n)
      throw checkpoint_error(state_prefix(source_) + "payload shorter than its contents");
    const unsigned char* p = data_ + offset_;
    offset_ += n;
    return p;
  }
  const unsigned char* data_;
  std::size_t size_;
  const std::string& source_;
  std::size_t offset_ = 0;
};

// Reads exactly n bytes, growing the buffer as data arrives so that a corrupted size field cannot
// make us allocate more than the stream holds.
inline void read_exactly(std::istream& in, std::vector<unsigned char>& buffer, std::size_t n,
                         const char* what, const std::string& source) {
  constexpr std::size_t chunk = std::size_t(1) << 20;
  std::size_t done = 0;
  while (done < n) {
    const std::size_t step = n - done < chunk ? n - done : chunk;
    const std::size_t old_size = buffer.size();
    buffer.resize(old_size + step);
    in.read(reinterpret_cast<char*>(buffer.data() + old_size), std::streamsize(step));
    const auto got = std::size_t(in.gcount());
    if (got != step) {
      throw checkpoint_error(state_prefix(source) + "truncated while reading the " + std::string(what) +
                             " (" + std::to_string(done + got) + " of " + std::to_string(n) +
                             " bytes present)");
    }
    done += step;
  }
}

// An amax as saved: amax_history holds every amax without a sign bit and every NaN as the canonical
// one, so a saved state has no other bits. Others (-0, a NaN with a sign or a payload) are refused,
// not made canonical, so that each state has exactly one encoding. Negative values are left to
// amax_history, whose message names them.
inline void expect_canonical_amax(float amax, const std::string& record, std::size_t steps_ago,
                                  const std::string& source) {
  const std::uint32_t bits = bit_cast<std::uint32_t>(amax);
  if (amax < 0.0f || bits == bit_cast<std::uint32_t>(canonical_amax(amax))) return;
  char hex[11];
  std::snprintf(hex, sizeof hex, "0x%08X", unsigned(bits));
  throw checkpoint_error(state_prefix(source) + record + ": the amax " + std::to_string(steps_ago) +
                         " steps ago has the bits " + hex +
                         ", which no saved state holds (amaxes are saved without a sign bit, every NaN "
                         "as 0x7FC00000)");
}

// Reserved bytes are written as 0 and must read as 0, so that every state has exactly one encoding.
inline void expect_reserved_zero(std::uint8_t byte, const char* where, const std::string& source) {
  if (byte != 0) {
    throw checkpoint_error(state_prefix(source) + "a reserved byte of " + where + " is " +
                           std::to_string(byte) + " instead of 0");
  }
}

// Checks the history_length and tensor count fields against the bytes that follow the config block
// (`room`), without overflow, before anything is sized by them. Every tensor record is
// 12 + 4 * history_length bytes, so with tensors present the history length is bounded by the room;
// with none, the history length is only a config value and nothing is allocated for it.
inline void check_counts(std::uint64_t history_length, std::uint64_t count, std::uint64_t room,
                         const std::string& source) {
  const std::string prefix = state_prefix(source);
  if (count == 0) {
    if (room != 0) {
      throw checkpoint_error(prefix + "field tensor count is 0 but " + std::to_string(room) +
                             " bytes of tensor records follow (the payload size does not match)");
    }
    return;
  }
  if (room < checkpoint_tensor_fixed_bytes || history_length > (room - checkpoint_tensor_fixed_bytes) / 4) {
    throw checkpoint_error(prefix + "field history_length (" + std::to_string(history_length) +
                           ") does not match the payload: one tensor record would not fit in the " +
                           std::to_string(room) + " bytes of tensor records");
  }
  const std::uint64_t per_tensor =
      checkpoint_tensor_fixed_bytes + 4 * history_length;  // <= room: no overflow
  if (room % per_tensor != 0 || room / per_tensor != count) {
    throw checkpoint_error(prefix + "field tensor count (" + std::to_string(count) + ") does not match the " +
                           std::to_string(room) + " bytes of tensor records of " +
                           std::to_string(per_tensor) + " bytes each");
  }
}

inline std::string config_difference(const delayed_scaling& saved, const delayed_scaling& live) {
  if (saved.mix != live.mix) return "format_mix";
  if (saved.margin != live.margin) {
    return "margin (saved " + std::to_string(saved.margin) + ", live " + std::to_string(live.margin) + ")";
  }
  if (saved.history_length != live.history_length) {
    return "history_length (saved " + std::to_string(saved.history_length) + ", live " +
           std::to_string(live.history_length) + ")";
  }
  if (saved.algorithm != live.algorithm) return "amax_algorithm";
  return "power_of_two_scales";
}

}  // namespace detail

// Writes the whole state. Throws fp8::checkpoint_error if the stream fails.
inline void save_scaling_state(std::ostream& out, const delayed_scaling_state& state) {
  const delayed_scaling& config = state.config();
  detail::byte_writer payload;
  payload.u8(std::uint8_t(config.mix));
  payload.u8(std::uint8_t(config.algorithm));
  payload.u8(config.power_of_two_scales ? 1 : 0);
  payload.u8(0);
  payload.u32(std::uint32_t(config.margin));
  payload.u64(config.history_length);
  payload.u64(state.size());
  for (const auto& t : state.tensors()) {
    payload.u8(std::uint8_t(t.format));
    payload.u8(0);
    payload.u8(0);
    payload.u8(0);
    payload.f32(t.scales.scale);
    payload.f32(t.scales.scale_inv);
    for (const float amax : t.history.newest_first()) payload.f32(amax);
  }

  detail::byte_writer file;
  file.bytes(scaling_state_magic, sizeof(scaling_state_magic));
  file.u32(scaling_state_version);
  file.u64(payload.data().size());
  file.bytes(payload.data().data(), payload.data().size());
  file.u32(detail::crc32(file.data().data(), file.data().size()));
  out.write(reinterpret_cast<const char*>(file.data().data()), std::streamsize(file.data().size()));
  if (!out) throw checkpoint_error("fp8 scaling state: writing to the stream failed");
}

// Reads a saved state as it was saved (its own config and tensors). Throws fp8::checkpoint_error on
// a truncated stream, a wrong magic or version, a checksum mismatch, or inconsistent contents; the
// message starts with "fp8 scaling state '<source>': " and names the field. Every length and count
// is checked against the bytes actually present before anything is sized by it, so a short file
// with lying fields (and a recomputed checksum) costs no more memory than its own size.
inline delayed_scaling_state read_scaling_state(std::istream& in, const std::string& source = "<stream>") {
  const std::string prefix = detail::state_prefix(source);
  std::vector<unsigned char> bytes;
  detail::read_exactly(in, bytes, detail::checkpoint_header_bytes, "header", source);
  if (std::memcmp(bytes.data(), scaling_state_magic, sizeof(scaling_state_magic)) != 0) {
    throw checkpoint_error(prefix + "not a saved scaling state (the magic \"FP8SCALE\" is missing)");
  }
  detail::byte_reader header(bytes.data() + sizeof(scaling_state_magic), 12, source);
  const std::uint32_t version = header.u32();
  if (version != scaling_state_version) {
    throw checkpoint_error(prefix + "unsupported version " + std::to_string(version) +
                           " (this build reads version " + std::to_string(scaling_state_version) + ")");
  }
  const std::uint64_t payload_bytes = header.u64();
  if (payload_bytes >
      std::numeric_limits<std::size_t>::max() - bytes.size() - detail::checkpoint_checksum_bytes) {
    throw checkpoint_error(prefix + "field payload size (" + std::to_string(payload_bytes) +
                           ") does not fit in this machine's size_t");
  }
  detail::read_exactly(in, bytes, std::size_t(payload_bytes) + detail::checkpoint_checksum_bytes, "payload",
                       source);
  const std::size_t checked = bytes.size() - detail::checkpoint_checksum_bytes;
  detail::byte_reader trailer(bytes.data() + checked, detail::checkpoint_checksum_bytes, source);
  const std::uint32_t stored = trailer.u32();
  const std::uint32_t computed = detail::crc32(bytes.data(), checked);
  if (stored != computed) {
    throw checkpoint_error(prefix + "checksum mismatch (the data is corrupted): stored " +
                           std::to_string(stored) + ", computed " + std::to_string(computed));
  }

  detail::byte_reader payload(bytes.data() + detail::checkpoint_header_bytes, std::size_t(payload_bytes),
                              source);
  delayed_scaling config;
  config.mix = format_mix(payload.u8());
  config.algorithm = amax_algorithm(payload.u8());
  const std::uint8_t power_of_two = payload.u8();
  detail::expect_reserved_zero(payload.u8(), "the config block", source);
  config.margin = int(std::int32_t(payload.u32()));
  const std::uint64_t history_length = payload.u64();
  const std::uint64_t count = payload.u64();
  if (power_of_two > 1)
    throw checkpoint_error(prefix + "bad power_of_two flag " + std::to_string(power_of_two));
  config.power_of_two_scales = power_of_two == 1;
  if (history_length > std::numeric_limits<std::size_t>::max()) {
    throw checkpoint_error(prefix + "field history_length (" + std::to_string(history_length) +
                           ") does not fit in this machine's size_t");
  }
  config.history_length = std::size_t(history_length);
  try {
    config.validate();
  } catch (const invalid_argument& e) { throw checkpoint_error(prefix + "bad config: " + e.what()); }
  // payload_bytes >= the config block: the reads above would have thrown otherwise.
  detail::check_counts(history_length, count, payload_bytes - detail::checkpoint_config_bytes, source);

  // From here on count and history_length are backed by bytes that were read: the allocations below
  // are no larger than the payload.
  std::vector<delayed_scaling_state::tensor> tensors;
  tensors.reserve(std::size_t(count));
  std::vector<float> amaxes(count == 0 ? 0 : config.history_length);
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto format = fp8_format(payload.u8());
    const std::string record = "tensor " + std::to_string(i);
    for (int k = 0; k < 3; ++k) detail::expect_reserved_zero(payload.u8(), record.c_str(), source);
    const float scale = payload.f32();
    const float scale_inv = payload.f32();
    for (std::size_t k = 0; k < amaxes.size(); ++k) {
      amaxes[k] = payload.f32();
      detail::expect_canonical_amax(amaxes[k], record, k, source);
    }
    try {
      tensors.push_back({format, amax_history::from_values(amaxes), scale_pair{scale, scale_inv}});
    } catch (const invalid_argument& e) {
      throw checkpoint_error(prefix + "tensor " + std::to_string(i) + ": " + e.what());
    }
  }
  try {
    return delayed_scaling_state::from_parts(config, std::move(tensors));
  } catch (const invalid_argument& e) { throw checkpoint_error(prefix + e.what()); }
}

// Restores `live` from a saved state. The saved state must have the same config (format mix, margin,
// history length, algorithm, power-of-two) and the same tensors (count and formats); otherwise, and
// on any corruption, fp8::checkpoint_error (naming `source`) says what differs and `live` is left
// exactly as it was.
inline void load_scaling_state(std::istream& in, delayed_scaling_state& live,
                               const std::string& source = "<stream>") {
  delayed_scaling_state saved = read_scaling_state(in, source);
  const std::string prefix = detail::state_prefix(source);
  if (saved.config() != live.config()) {
    throw checkpoint_error(prefix + "the saved config differs from the live one in " +
                           detail::config_difference(saved.config(), live.config()));
  }
  if (saved.size() != live.size()) {
    throw checkpoint_error(prefix + "shape mismatch: the saved state has " + std::to_string(saved.size()) +
                           " tensors, the live one " + std::to_string(live.size()));
  }
  for (std::size_t i = 0; i < saved.size(); ++i) {
    if (saved.format(i) != live.format(i)) {
      throw checkpoint_error(prefix + "shape mismatch: tensor " + std::to_string(i) + " is " +
                             format_name(saved.format(i)) + " in the saved state and " +
                             format_name(live.format(i)) + " in the live one");
    }
  }
  live = std::move(saved);
}

}  // namespace fp8

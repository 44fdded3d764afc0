// Saved scaling states: round trips (and identical training afterwards), then every way a saved
// state can be wrong: each truncation, each flipped bit, a wrong version, inconsistent fields behind a
// valid checksum, a different shape or config. Each gives fp8::checkpoint_error and changes nothing.
#include <doctest/doctest.h>

#include <fp8/scaling.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

fp8::delayed_scaling small_config() {
  fp8::delayed_scaling config;
  config.history_length = 8;
  config.margin = 1;
  return config;
}

// A state that has lived a while: several tensors, some NaN / Inf / 0 amaxes in its histories.
fp8::delayed_scaling_state trained_state(unsigned seed, const fp8::delayed_scaling& config = small_config()) {
  fp8::delayed_scaling_state state{config};
  state.add_tensor(fp8::gemm_operand::fprop_input);
  state.add_tensor(fp8::gemm_operand::fprop_weight);
  state.add_tensor(fp8::gemm_operand::dgrad_grad_output);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exponent(-20.0f, 20.0f);
  for (int step = 0; step < 21; ++step) {
    for (std::size_t i = 0; i < state.size(); ++i) {
      float amax = std::exp2(exponent(rng));
      if (step == 3 && i == 1) amax = std::numeric_limits<float>::quiet_NaN();
      if (step == 17 && i == 2) amax = std::numeric_limits<float>::infinity();
      state.record(i, amax);
    }
    state.update();
  }
  state.record(0, 0.75f);  // a step in progress is saved too
  return state;
}

std::string saved_bytes(const fp8::delayed_scaling_state& state) {
  std::ostringstream out;
  fp8::save_scaling_state(out, state);
  return out.str();
}

bool same_state(const fp8::delayed_scaling_state& a, const fp8::delayed_scaling_state& b) {
  return saved_bytes(a) == saved_bytes(b);
}

std::string load_error(const std::string& bytes, fp8::delayed_scaling_state& live) {
  std::istringstream in(bytes);
  try {
    fp8::load_scaling_state(in, live);
  } catch (const fp8::checkpoint_error& e) { return e.what(); }
  return "";
}

// Little-endian field access in a saved state, and a checksum that makes an edited state valid again.
void put_u32(std::string& bytes, std::size_t offset, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[offset + std::size_t(i)] = char((v >> (8 * i)) & 0xFFu);
}
void put_u64(std::string& bytes, std::size_t offset, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[offset + std::size_t(i)] = char((v >> (8 * i)) & 0xFFu);
}
void reseal(std::string& bytes) {
  const std::size_t body = bytes.size() - 4;
  put_u32(bytes, body, fp8::detail::crc32(reinterpret_cast<const unsigned char*>(bytes.data()), body));
}

// Offsets of the format: header 20 bytes, config 24, then per tensor 12 + 4 * history_length.
constexpr std::size_t version_offset = 8;
constexpr std::size_t payload_size_offset = 12;
constexpr std::size_t mix_offset = 20;
constexpr std::size_t algorithm_offset = 21;
constexpr std::size_t power_of_two_offset = 22;
constexpr std::size_t margin_offset = 24;
constexpr std::size_t history_length_offset = 28;
constexpr std::size_t count_offset = 36;
constexpr std::size_t first_tensor_offset = 44;

}  // namespace

TEST_CASE("CRC-32 check value") {
  const std::string check = "123456789";
  CHECK(fp8::detail::crc32(reinterpret_cast<const unsigned char*>(check.data()), check.size()) ==
        0xCBF43926u);
}

TEST_CASE("round trip: the loaded state is identical and trains identically") {
  const fp8::delayed_scaling_state original = trained_state(1);
  fp8::delayed_scaling_state live{small_config()};
  for (std::size_t i = 0; i < original.size(); ++i) live.add_tensor(original.format(i));
  const std::string bytes = saved_bytes(original);
  CHECK(bytes.size() == 20 + 24 + 3 * (12 + 4 * 8) + 4);
  CHECK(load_error(bytes, live).empty());
  CHECK(same_state(live, original));
  for (std::size_t i = 0; i < original.size(); ++i) {
    CHECK(live.scale(i) == original.scale(i));
    CHECK(live.history(i) == original.history(i));
  }
  fp8::delayed_scaling_state continued = original;
  for (int step = 0; step < 12; ++step) {
    for (std::size_t i = 0; i < live.size(); ++i) {
      live.record(i, float(step + 1) * float(i + 1));
      continued.record(i, float(step + 1) * float(i + 1));
    }
    live.update();
    continued.update();
    CHECK(same_state(live, continued));
  }
}

TEST_CASE("read_scaling_state returns the saved state with its own config; states can share a stream") {
  fp8::delayed_scaling other_config = small_config();
  other_config.history_length = 3;
  other_config.algorithm = fp8::amax_algorithm::most_recent;
  const fp8::delayed_scaling_state a = trained_state(2);
  const fp8::delayed_scaling_state b = trained_state(3, other_config);
  const fp8::delayed_scaling_state empty{fp8::delayed_scaling{}};
  std::stringstream stream;
  fp8::save_scaling_state(stream, a);
  fp8::save_scaling_state(stream, b);
  fp8::save_scaling_state(stream, empty);
  stream << "trailing";
  CHECK(same_state(fp8::read_scaling_state(stream), a));
  const fp8::delayed_scaling_state b2 = fp8::read_scaling_state(stream);
  CHECK(b2.config() == other_config);
  CHECK(same_state(b2, b));
  CHECK(fp8::read_scaling_state(stream).size() == 0);
  std::string rest;
  stream >> rest;
  CHECK(rest == "trailing");
}

TEST_CASE("every truncation is refused and leaves the live state untouched") {
  const std::string bytes = saved_bytes(trained_state(4));
  fp8::delayed_scaling_state live = trained_state(5);
  const std::string before = saved_bytes(live);
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    CAPTURE(length);
    const std::string message = load_error(bytes.substr(0, length), live);
    CHECK(message.find("truncated") != std::string::npos);
  }
  CHECK(saved_bytes(live) == before);
}

TEST_CASE("every flipped bit is refused and leaves the live state untouched") {
  const std::string bytes = saved_bytes(trained_state(6));
  fp8::delayed_scaling_state live = trained_state(7);
  const std::string before = saved_bytes(live);
  for (std::size_t byte = 0; byte < bytes.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string corrupted = bytes;
      corrupted[byte] = char(corrupted[byte] ^ (1 << bit));
      CAPTURE(byte);
      CAPTURE(bit);
      const std::string message = load_error(corrupted, live);
      // The magic, the version, the size (too long: truncated) or, for everything else, the checksum.
      const bool named =
          message.find("magic") != std::string::npos || message.find("version") != std::string::npos ||
          message.find("truncated") != std::string::npos || message.find("checksum") != std::string::npos;
      CHECK(named);
    }
  }
  CHECK(saved_bytes(live) == before);
}

TEST_CASE("a wrong version is named, even with a valid checksum") {
  std::string bytes = saved_bytes(trained_state(8));
  put_u32(bytes, version_offset, 2);
  reseal(bytes);
  fp8::delayed_scaling_state live = trained_state(9);
  const std::string before = saved_bytes(live);
  CHECK(load_error(bytes, live).find("unsupported version 2") != std::string::npos);
  CHECK(saved_bytes(live) == before);
}

TEST_CASE("inconsistent contents behind a valid checksum are refused") {
  const std::string good = saved_bytes(trained_state(10));
  fp8::delayed_scaling_state live = trained_state(11);
  const std::string before = saved_bytes(live);
  const auto refused = [&](auto&& edit, const char* expected) {
    std::string bytes = good;
    edit(bytes);
    reseal(bytes);
    const std::string message = load_error(bytes, live);
    CAPTURE(message);
    CHECK(message.find(expected) != std::string::npos);
  };
  refused([](std::string& b) { b[mix_offset] = 7; }, "format_mix");
  refused([](std::string& b) { b[algorithm_offset] = 5; }, "amax_algorithm");
  refused([](std::string& b) { b[power_of_two_offset] = 2; }, "power_of_two");
  refused([](std::string& b) { put_u32(b, margin_offset, std::uint32_t(-3)); }, "margin");
  refused([](std::string& b) { put_u64(b, history_length_offset, 0); }, "history_length");
  refused([](std::string& b) { put_u64(b, history_length_offset, 9); }, "does not match");
  refused([](std::string& b) { put_u64(b, history_length_offset, std::uint64_t(1) << 62); },
          "does not match");
  refused([](std::string& b) { put_u64(b, count_offset, 4); }, "does not match");
  refused([](std::string& b) { put_u64(b, count_offset, std::uint64_t(-1)); }, "does not match");
  refused([](std::string& b) { b[first_tensor_offset] = 3; }, "fp8_format");
  // Reserved bytes are 0: one encoding per state, so a loaded state saves back to the same bytes.
  refused([](std::string& b) { b[power_of_two_offset + 1] = 1; }, "reserved");
  refused([](std::string& b) { b[first_tensor_offset + 2] = char(0x80); }, "reserved");
  refused([](std::string& b) { put_u32(b, first_tensor_offset + 4, 0x7FC00000u); }, "scale");  // NaN scale
  refused([](std::string& b) { put_u32(b, first_tensor_offset + 4, 0u); }, "scale");           // zero scale
  refused([](std::string& b) { put_u32(b, first_tensor_offset + 8, 0x7F800000u); },
          "scale_inv");  // Inf scale_inv
  refused([](std::string& b) { put_u32(b, first_tensor_offset + 12, 0xBF800000u); }, "negative");  // amax -1
  // amaxes are saved without a sign and with the one NaN: other bits of a "zero" or a NaN are refused
  // (as the state would otherwise save back to other bytes), naming the bits.
  refused([](std::string& b) { put_u32(b, first_tensor_offset + 12, 0x80000000u); }, "0x80000000");  // -0
  refused([](std::string& b) { put_u32(b, first_tensor_offset + 16, 0xFFC00000u); }, "0xFFC00000");  // -NaN
  refused([](std::string& b) { put_u32(b, first_tensor_offset + 16, 0x7F800001u); },
          "1 steps ago");  // payload
  refused(
      [](std::string& b) {  // a payload too short for its own config block
        b.resize(first_tensor_offset - 24 + 10 + 4);
        put_u64(b, payload_size_offset, 10);
      },
      "shorter");
  CHECK(saved_bytes(live) == before);
}

TEST_CASE("a different shape or config is refused, naming the difference") {
  const std::string bytes = saved_bytes(trained_state(12));
  // Fewer tensors.
  fp8::delayed_scaling_state two{small_config()};
  two.add_tensor(fp8::fp8_format::e4m3);
  two.add_tensor(fp8::fp8_format::e4m3);
  CHECK(load_error(bytes, two).find("3 tensors, the live one 2") != std::string::npos);
  // Same count, another format.
  fp8::delayed_scaling_state formats{small_config()};
  for (int i = 0; i < 3; ++i) formats.add_tensor(fp8::fp8_format::e4m3);
  CHECK(load_error(bytes, formats).find("tensor 2 is e5m2") != std::string::npos);
  // Another history length or margin.
  fp8::delayed_scaling longer = small_config();
  longer.history_length = 16;
  fp8::delayed_scaling_state longer_state{longer};
  CHECK(load_error(bytes, longer_state).find("history_length (saved 8, live 16)") != std::string::npos);
  fp8::delayed_scaling margin = small_config();
  margin.margin = 0;
  fp8::delayed_scaling_state margin_state{margin};
  CHECK(load_error(bytes, margin_state).find("margin (saved 1, live 0)") != std::string::npos);
  CHECK(two.size() == 2);
  CHECK(two.scale(0) == 1.0f);
}

TEST_CASE("not a saved state at all") {
  fp8::delayed_scaling_state live{small_config()};
  CHECK(load_error(std::string(100, 'x'), live).find("magic") != std::string::npos);
}

TEST_CASE("a failing output stream is reported") {
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  CHECK_THROWS_AS(fp8::save_scaling_state(out, trained_state(13)), fp8::checkpoint_error);
}

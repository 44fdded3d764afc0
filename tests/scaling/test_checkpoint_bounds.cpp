// Saved scaling states whose length fields lie, behind a valid checksum: a file of a few bytes that
// claims a history of 2^30 amaxes or 2^61 tensors. Nothing may be allocated beyond what the file can
// hold, and every refusal is an fp8::checkpoint_error naming the source and the field (never
// std::bad_alloc or std::length_error). The binary's operator new refuses allocations above 64 MiB
// (allocation_cap.cpp), so a loader that sizes anything by such a field fails here at once.
#include <doctest/doctest.h>

#include <fp8/scaling.hpp>

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "allocation_cap.hpp"

namespace {

void put_u32(std::string& bytes, std::size_t offset, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[offset + std::size_t(i)] = char((v >> (8 * i)) & 0xFFu);
}
void put_u64(std::string& bytes, std::size_t offset, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[offset + std::size_t(i)] = char((v >> (8 * i)) & 0xFFu);
}

// A state file with the given history length and tensor count fields and `tensor_bytes` bytes of
// tensor records after the config, with a valid payload size and checksum.
std::string forged_state(std::uint64_t history_length, std::uint64_t count, std::size_t tensor_bytes = 0) {
  std::string bytes(20 + 24 + tensor_bytes + 4, '\0');
  bytes.replace(0, 8, "FP8SCALE");
  put_u32(bytes, 8, 1);
  put_u64(bytes, 12, 24 + tensor_bytes);
  put_u64(bytes, 28, history_length);
  put_u64(bytes, 36, count);
  const std::size_t body = bytes.size() - 4;
  put_u32(bytes, body, fp8::detail::crc32(reinterpret_cast<const unsigned char*>(bytes.data()), body));
  return bytes;
}

// The message of the checkpoint_error that reading `bytes` gives ("" if it loads). Any other
// exception (bad_alloc, length_error) escapes and fails the test case.
std::string read_error(const std::string& bytes) {
  std::istringstream in(bytes);
  try {
    fp8::read_scaling_state(in, "run/scaling.bin");
  } catch (const fp8::checkpoint_error& e) { return e.what(); }
  return "";
}

}  // namespace

TEST_CASE("the 48-byte state with a history length of 2^30 and no tensors allocates nothing for it") {
  const std::string bytes = forged_state(std::uint64_t(1) << 30, 0);
  REQUIRE(bytes.size() == 48);
  std::istringstream in(bytes);
  fp8_test::largest_allocation = 0;
  const fp8::delayed_scaling_state state = fp8::read_scaling_state(in, "run/scaling.bin");
  CHECK(fp8_test::largest_allocation < 4096);
  // It is a valid state (the library writes exactly this for a config with that history and no
  // tensors), so it reads back as it was saved.
  CHECK(state.size() == 0);
  CHECK(state.config().history_length == std::size_t(1) << 30);
  std::ostringstream out;
  fp8::save_scaling_state(out, state);
  CHECK(out.str() == bytes);
}

TEST_CASE("larger history lengths with no tensors: no allocation, and no foreign exception") {
  for (const std::uint64_t length : {std::uint64_t(1) << 32, std::uint64_t(1) << 40, std::uint64_t(1) << 62,
                                     std::uint64_t(1) << 63, std::numeric_limits<std::uint64_t>::max()}) {
    CAPTURE(length);
    fp8_test::largest_allocation = 0;
    const std::string message = read_error(forged_state(length, 0));
    CHECK(fp8_test::largest_allocation < 4096);
    if (length > std::numeric_limits<std::size_t>::max()) {
      CHECK(message.find("history_length") != std::string::npos);
    } else {
      CHECK(message.empty());
    }
  }
}

TEST_CASE("a history length the tensor records cannot hold is refused by name") {
  // One tensor record of 12 + 4 * 2 bytes, but a history length that claims far more.
  for (const std::uint64_t length : {std::uint64_t(3), std::uint64_t(1) << 30, std::uint64_t(1) << 62,
                                     std::numeric_limits<std::uint64_t>::max()}) {
    CAPTURE(length);
    const std::string message = read_error(forged_state(length, 1, 12 + 4 * 2));
    CAPTURE(message);
    CHECK(message.find("run/scaling.bin") != std::string::npos);
    CHECK(message.find("history_length") != std::string::npos);
  }
}

TEST_CASE("a tensor count the payload cannot hold is refused by name before anything is reserved") {
  for (const std::uint64_t count : {std::uint64_t(2), std::uint64_t(1) << 30, std::uint64_t(1) << 61,
                                    std::numeric_limits<std::uint64_t>::max()}) {
    CAPTURE(count);
    fp8_test::largest_allocation = 0;
    const std::string message = read_error(forged_state(2, count, 12 + 4 * 2));
    CAPTURE(message);
    CHECK(fp8_test::largest_allocation < 4096);
    CHECK(message.find("run/scaling.bin") != std::string::npos);
    CHECK(message.find("tensor count") != std::string::npos);
  }
  // Tensor records but a count of zero.
  CHECK(read_error(forged_state(2, 0, 12 + 4 * 2)).find("tensor count") != std::string::npos);
}

TEST_CASE("a payload size beyond the stream is refused without allocating it") {
  std::string bytes = forged_state(2, 0);
  put_u64(bytes, 12, std::uint64_t(1) << 40);
  fp8_test::largest_allocation = 0;
  const std::string message = read_error(bytes);
  CHECK(fp8_test::largest_allocation <= (std::size_t(1) << 21));
  CHECK(message.find("run/scaling.bin") != std::string::npos);
  CHECK(message.find("truncated") != std::string::npos);
}

TEST_CASE("errors name the source; a stream without a name is called a stream") {
  std::istringstream in("FP8SCALX" + std::string(40, '\0'));
  try {
    fp8::read_scaling_state(in);
    FAIL("no error");
  } catch (const fp8::checkpoint_error& e) {
    CHECK(std::string(e.what()).find("magic") != std::string::npos);
    CHECK(std::string(e.what()).find("<stream>") != std::string::npos);
  }
}

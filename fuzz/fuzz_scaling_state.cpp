// Fuzzes fp8::read_scaling_state with arbitrary bytes. Findings: a sanitizer report, an allocation
// beyond libFuzzer's -malloc_limit_mb (a length field trusted before it was checked), any exception
// other than fp8::checkpoint_error, or a state that does not save back to exactly the bytes it was
// read from (the format has one encoding per state). Each input is read as it is and with its
// checksum recomputed.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>

#include <fp8/scaling.hpp>

namespace {

void read_back(const std::string& bytes) {
  std::istringstream in(bytes);
  try {
    const fp8::delayed_scaling_state state = fp8::read_scaling_state(in, "fuzz input");
    const std::size_t consumed =
        std::size_t(in.tellg() < 0 ? std::streamoff(bytes.size()) : std::streamoff(in.tellg()));
    std::ostringstream out;
    fp8::save_scaling_state(out, state);
    if (out.str() != bytes.substr(0, consumed)) {
      std::fprintf(stderr, "fuzz: a loaded state saves to other bytes than it was read from\n");
      std::abort();
    }
  } catch (const fp8::checkpoint_error&) {
    // The documented refusal.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: an exception other than fp8::checkpoint_error escaped: %s\n", e.what());
    std::abort();
  }
}

// The input with its checksum recomputed (where the payload size field says it is), so that fuzzing
// reaches the fields behind a valid checksum: anyone can recompute a CRC, so they are untrusted too.
std::string resealed(std::string bytes) {
  constexpr std::size_t header = 20;
  if (bytes.size() < header) return bytes;
  std::uint64_t payload = 0;
  for (int i = 0; i < 8; ++i) payload |= std::uint64_t(std::uint8_t(bytes[12 + std::size_t(i)])) << (8 * i);
  if (payload > bytes.size() - header || bytes.size() - header - payload < 4) return bytes;
  const std::size_t body = header + std::size_t(payload);
  const std::uint32_t crc = fp8::detail::crc32(reinterpret_cast<const unsigned char*>(bytes.data()), body);
  for (int i = 0; i < 4; ++i) bytes[body + std::size_t(i)] = char((crc >> (8 * i)) & 0xFFu);
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  read_back(bytes);
  read_back(resealed(bytes));
  return 0;
}

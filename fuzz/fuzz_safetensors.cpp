// Fuzzes the trainer's safetensors reader (trainer::read_safetensors) with arbitrary files. Findings:
// a sanitizer report, an allocation beyond -malloc_limit_mb, or an exception that is not the
// reader's documented error (an fp8::error).
#include <cstddef>
#include <cstdint>
#include <exception>

#include <fp8/error.hpp>

#include "input_file.hpp"
#include "safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fp8_fuzz::input_file file("fp8_fuzz_safetensors");
  const std::string& path = file.write(data, size);
  try {
    const trainer::safetensors_file loaded = trainer::read_safetensors(path);
    (void)loaded;
  } catch (const fp8::error&) {
    // The documented refusal.
  } catch (const std::exception& e) { fp8_fuzz::foreign_exception(e.what()); }
  return 0;
}

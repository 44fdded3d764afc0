// Fuzzes the trainer's checkpoint loader (trainer::training_run::load, which reads the safetensors
// file, checks it against the model and restores weights, optimizer and scaling state) with arbitrary
// files. The run is a tiny FP8 model on the test text, built once. Findings: a sanitizer report, an
// allocation beyond -malloc_limit_mb, or an exception that is not the loader's documented error.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>

#include <fp8/error.hpp>

#include "input_file.hpp"
#include "tiny_run.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fp8_fuzz::input_file file("fp8_fuzz_checkpoint");
  static const std::unique_ptr<trainer::training_run> run =
      std::make_unique<trainer::training_run>(fp8_fuzz::tiny_run());
  const std::string& path = file.write(data, size);
  try {
    run->load(path);
  } catch (const fp8::error&) {
    // The documented refusal.
  } catch (const std::exception& e) { fp8_fuzz::foreign_exception(e.what()); }
  return 0;
}

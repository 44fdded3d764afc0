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
#include "trainer.hpp"

namespace {

trainer::run_options tiny_run() {
  trainer::run_options o;
  o.data_file = FP8_FUZZ_TRAINER_TEXT;
  o.base_precision = trainer::precision::fp8;
  o.model.context = 8;
  o.model.channels = 8;
  o.model.layers = 1;
  o.model.heads = 2;
  o.model.hidden = 16;
  o.batch = 1;
  o.steps = 2;
  o.eval_batches = 1;
  o.threads = 1;
  o.recipe.amax_history_length = 4;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fp8_fuzz::input_file file("fp8_fuzz_checkpoint");
  static const std::unique_ptr<trainer::training_run> run =
      std::make_unique<trainer::training_run>(tiny_run());
  const std::string& path = file.write(data, size);
  try {
    run->load(path);
  } catch (const fp8::error&) {
    // The documented refusal.
  } catch (const std::exception& e) { fp8_fuzz::foreign_exception(e.what()); }
  return 0;
}

// The tiny transformer runs of the trainer's and fp8_generate's tests: one definition of the options
// they share, with the sizes that differ between them passed in. Each test adds what it is about
// (precision, device, recipe, files) to the options returned here.
#pragma once

#include <string>

#include "options.hpp"

namespace trainer_tests {

// The model of a tiny run, and how many validation batches measure it. Two heads throughout.
struct tiny_sizes {
  int context;
  int channels;
  int layers;
  int hidden;
  int eval_batches;
};

// Two layers of 32 channels over 32 bytes: the loss falls clearly within a few dozen steps, seconds on
// one CPU thread.
inline constexpr tiny_sizes two_layers_of_32{32, 32, 2, 64, 2};
// One layer of 16 channels over 16 bytes: for tests that need a run to exist, not to learn.
inline constexpr tiny_sizes one_layer_of_16{16, 16, 1, 32, 1};

// A transformer of `sizes` trained on `data_file` for `steps` steps of `batch` windows, on one thread
// (test binaries run side by side under ctest -j) and without the progress bar.
inline trainer::run_options tiny_options(const std::string& data_file, const tiny_sizes& sizes, int batch,
                                         long steps) {
  trainer::run_options o;
  o.data_file = data_file;
  o.model.context = sizes.context;
  o.model.channels = sizes.channels;
  o.model.layers = sizes.layers;
  o.model.heads = 2;
  o.model.hidden = sizes.hidden;
  o.batch = batch;
  o.steps = steps;
  o.eval_batches = sizes.eval_batches;
  o.threads = 1;
  o.progress_bar = false;
  return o;
}

}  // namespace trainer_tests

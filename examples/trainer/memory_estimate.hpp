// How much memory a model and batch need, computed from the options alone, so that a shape too
// large for the machine is a usage error before anything is allocated (not an out-of-memory kill).
#pragma once

#include "model.hpp"

namespace trainer {

// Bytes of the parameter set (master, compute, gradient and two AdamW moments, all float) and of
// the activations and backward buffers the model keeps for a batch of `batch` sequences. A lower
// bound: transient buffers of the FP8 casts and the attention loop are not counted.
double estimated_memory_bytes(const model_options& options, int batch);

// The machine's physical memory in bytes, or 0 if it cannot be told.
double physical_memory_bytes();

}  // namespace trainer

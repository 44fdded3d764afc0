// Umbrella for FP8 inference on the CPU: calibration observers, weight and activation quantization
// for W8A8 linear layers, and an FP8 KV cache.
#pragma once

#include "inference/activations.hpp"
#include "inference/kv_cache.hpp"
#include "inference/observers.hpp"
#include "inference/weights.hpp"

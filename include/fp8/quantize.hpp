// Umbrella for CPU quantization: FP8 data + scale_inv (+ amax) from float, bfloat16 or half buffers,
// per tensor or blockwise, with a transposed copy on request, and back (AVX-512 / AVX2 / scalar).
#pragma once

#include "quantize/bfloat16_bulk.hpp"
#include "quantize/blockwise.hpp"
#include "quantize/checks.hpp"
#include "quantize/isa.hpp"
#include "quantize/kernels.hpp"
#include "quantize/per_tensor.hpp"
#include "quantize/sized.hpp"
#include "quantize/span.hpp"
#include "quantize/transpose.hpp"

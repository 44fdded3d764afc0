// Umbrella for CPU quantization: FP8 data + scale_inv (+ amax) from float, bfloat16 or half buffers,
// per tensor or blockwise, with a transposed copy on request, and back (AVX-512 / AVX2 / scalar).
#pragma once

#include "quantize/isa.hpp"
#include "quantize/checks.hpp"
#include "quantize/kernels.hpp"
#include "quantize/per_tensor.hpp"
#include "quantize/blockwise.hpp"
#include "quantize/transpose.hpp"
#include "quantize/bfloat16_bulk.hpp"
#include "quantize/span.hpp"
#include "quantize/sized.hpp"

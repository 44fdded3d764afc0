// A linear layer's operand written as the layer's FP8 codes by the kernel that computes it
// (fp8::cuda::linear_layer::fp8_input), instead of as BF16 values that the layer would then cast:
// the FP8 forms of the transformer's RMSNorm forward (wqkv's and w_gate_up's X) and SwiGLU
// (w_down's X, and backward w_gate_up's dY). Host-visible: no nvcc needed.
#pragma once

#include <cstddef>
#include <cstdint>

#include <fp8/quantize/checks.hpp>
#include <fp8/scaling/fp8_format.hpp>

namespace trainer::cuda {

// Where and how a producer writes the codes. Each element: the value the producer's BF16 form would
// store (rounded to BF16), times *scale, converted to `format` rounding to nearest even and
// saturating: the codes the layer's delayed cast of the BF16 form's output makes, bit for bit.
// amax: that BF16 tensor's amax, max-accumulated (the layer's slot), or null in calls that record
// none (evaluation). Device pointers, from the layer (device_linears::fp8_output_of).
struct fp8_output {
  std::uint8_t* codes = nullptr;  // [rows, cols] row-major, as the BF16 form's tensor
  const float* scale = nullptr;   // the scaling state's (one float)
  float* amax = nullptr;
  fp8::fp8_format format = fp8::fp8_format::e4m3;
};

// What every launcher that writes an fp8_output checks before it launches, when it writes `count`
// elements: a known format (always), and a scale to read (where it writes any), or
// fp8::invalid_argument naming `function`. The codes are checked by each launcher as the buffer
// they are, with its shape.
inline void check_fp8_output(const fp8_output& out, std::size_t count, const char* function) {
  fp8::detail::check_format(out.format, function);
  if (count > 0) fp8::detail::check_pointer(out.scale, 1, function, "the FP8 output's scale");
}

}  // namespace trainer::cuda

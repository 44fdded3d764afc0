// A linear layer's operand written as the layer's FP8 codes by the kernel that computes it
// (fp8::cuda::linear_layer::fp8_input), instead of as BF16 values that the layer would then cast:
// the FP8 forms of the transformer's RMSNorm forward (wqkv's and w_gate_up's X) and SwiGLU
// (w_down's X, and backward w_gate_up's dY). Host-visible: no nvcc needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <fp8/error.hpp>
#include <fp8/quantize/checks.hpp>
#include <fp8/scaling/fp8_format.hpp>

namespace trainer::cuda {

// Where and how a producer writes the codes. Each element: the value the producer's BF16 form would
// store (rounded to BF16), times *scale, converted to `format` rounding to nearest even and
// saturating: the codes the layer's delayed cast of the BF16 form's output makes, bit for bit.
// amax: that BF16 tensor's amax, max-accumulated (the layer's slot), or null in calls that record
// none (evaluation). Device pointers, from the layer (device_linears::fp8_output_of), with the shape
// of the layer's copy for the call (its m tokens), which the launchers hold what they write to.
struct fp8_output {
  std::uint8_t* codes = nullptr;  // [rows, cols] row-major, as the BF16 form's tensor
  const float* scale = nullptr;   // the scaling state's (one float)
  float* amax = nullptr;
  fp8::fp8_format format = fp8::fp8_format::e4m3;
  std::int64_t rows = 0;  // the call's tokens
  std::int64_t cols = 0;  // the layer's in_features (X) or out_features (dY)
};

// What every launcher that writes an fp8_output checks before it launches, when it writes `count`
// elements in rows of `width` (0: a flat copy, whose rows it does not see): a known format (always);
// where it writes any, a scale to read and a copy of exactly that shape ([count / width, width], or
// count elements), since a launcher that wrote more would write past the layer's copy and one that
// wrote fewer would leave codes of another call in it. fp8::invalid_argument naming `function`
// otherwise. The codes are checked by each launcher as the buffer they are.
inline void check_fp8_output(const fp8_output& out, std::size_t count, std::size_t width,
                             const char* function) {
  fp8::detail::check_format(out.format, function);
  if (count == 0) return;
  fp8::detail::check_pointer(out.scale, 1, function, "the FP8 output's scale");
  const bool known = out.rows >= 0 && out.cols >= 0;
  const bool same = known && std::size_t(out.rows) * std::size_t(out.cols) == count &&
                    (width == 0 || std::size_t(out.cols) == width);
  if (!same) {
    throw fp8::invalid_argument(std::string(function) + ": the FP8 output is a copy of [" +
                                std::to_string(out.rows) + ", " + std::to_string(out.cols) +
                                "] codes, but this writes " + std::to_string(count) + " codes" +
                                (width != 0 ? " in rows of " + std::to_string(width) : std::string()));
  }
}

}  // namespace trainer::cuda

// The precision policy's decisions and the BF16 rounding of stored values.
#include "precision.hpp"

#include <cstdint>
#include <cstring>

#include <fp8/format.hpp>

namespace trainer {

gemm_mode precision_policy::linear_mode(int unit, gemm_class which) const {
  switch (base) {
    case precision::fp32: return gemm_mode::fp32;
    case precision::bf16: return gemm_mode::bf16;
    case precision::fp8: break;
  }
  if (unit >= 0 && std::size_t(unit) < bf16_units.size() && bf16_units[std::size_t(unit)]) {
    return gemm_mode::bf16;
  }
  return linear_modes[std::size_t(which)];
}

bool precision_policy::uses_fp8() const {
  if (base != precision::fp8) return false;
  for (gemm_mode mode : linear_modes) {
    if (mode == gemm_mode::fp8 || mode == gemm_mode::fake_fp8) return true;
  }
  return false;
}

precision_policy bf16_policy_like(const precision_policy& policy) {
  precision_policy shadow = policy;
  shadow.base = precision::bf16;
  return shadow;
}

float round_to_bf16(float value) {
  // Round to nearest even on the float's bits: add just under half of BF16's last place (0x7FFF),
  // plus one when the kept part is odd, then clear the 16 dropped bits. A carry out of the mantissa
  // moves to the next binade (and from the largest finite values to Inf), exactly as rounding does.
  // Example: 1.00390625f = 0x3F808000 (1 + 2^-8, a tie, kept part even) -> 0x3F800000 = 1.0f;
  //          1.01171875f = 0x3F818000 (a tie, kept part odd)            -> 0x3F820000 = 1.015625f.
  // NaN becomes BF16's canonical NaN, as fp8::bfloat16(float) does; test_precision.cpp checks every
  // exponent and rounding case against fp8::bfloat16.
  using float_traits = fp8::format_traits<fp8::binary32_format>;
  using bf16_traits = fp8::format_traits<fp8::bf16_format>;
  constexpr int dropped_bits = float_traits::mantissa_bits - bf16_traits::mantissa_bits;  // 16
  constexpr std::uint32_t half_minus_one = (std::uint32_t(1) << (dropped_bits - 1)) - 1;  // 0x7FFF
  constexpr std::uint32_t kept_mask = ~((std::uint32_t(1) << dropped_bits) - 1);           // 0xFFFF0000
  constexpr std::uint32_t canonical_nan = std::uint32_t(fp8::bf16_format::canonical_nan) << dropped_bits;
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const bool is_nan = (bits & float_traits::magnitude_mask) > float_traits::infinity_code;
  const std::uint32_t rounded = (bits + half_minus_one + ((bits >> dropped_bits) & 1u)) & kept_mask;
  const std::uint32_t result = is_nan ? canonical_nan : rounded;
  float out;
  std::memcpy(&out, &result, sizeof(out));
  return out;
}

void round_to_bf16(float* data, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) data[i] = round_to_bf16(data[i]);
}

const char* to_string(precision value) {
  switch (value) {
    case precision::fp32: return "fp32";
    case precision::bf16: return "bf16";
    case precision::fp8: return "fp8";
  }
  return "?";
}
const char* to_string(gemm_mode value) {
  switch (value) {
    case gemm_mode::fp32: return "fp32";
    case gemm_mode::bf16: return "bf16";
    case gemm_mode::fp8: return "fp8";
    case gemm_mode::fake_fp8: return "fake";
  }
  return "?";
}
const char* to_string(gemm_class value) {
  switch (value) {
    case gemm_class::fprop: return "fprop";
    case gemm_class::dgrad: return "dgrad";
    case gemm_class::wgrad: return "wgrad";
  }
  return "?";
}
const char* to_string(scaling_recipe value) {
  return value == scaling_recipe::delayed ? "delayed" : "current";
}
const char* to_string(fp8::amax_algorithm value) {
  return value == fp8::amax_algorithm::max ? "max" : "most_recent";
}
const char* to_string(fp8::format_mix value) { return value == fp8::format_mix::hybrid ? "hybrid" : "e4m3"; }
const char* to_string(fp8::granularity value) {
  switch (value) {
    case fp8::granularity::per_tensor: return "tensor";
    case fp8::granularity::per_row: return "row";
    case fp8::granularity::tile_1x128: return "block";
    case fp8::granularity::mx_1x32: return "mx";
    case fp8::granularity::block_128x128: break;
  }
  return fp8::granularity_name(value);
}

}  // namespace trainer

// The precision policy's decisions; BF16 rounding is the library's bulk conversion.
#include "precision.hpp"

#include <fp8/quantize/bfloat16_bulk.hpp>

namespace trainer {

gemm_mode precision_policy::linear_mode(int unit, fp8::gemm_kind which) const {
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
  fp8::round_to_bfloat16(&value, 1);
  return value;
}

void round_to_bf16(float* data, std::size_t count) { fp8::round_to_bfloat16(data, count); }

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
const char* to_string(fp8::gemm_kind value) {
  switch (value) {
    case fp8::gemm_kind::fprop: return "fprop";
    case fp8::gemm_kind::dgrad: return "dgrad";
    case fp8::gemm_kind::wgrad: return "wgrad";
  }
  return "?";
}
const char* to_string(fp8::scaling_mode value) {
  return value == fp8::scaling_mode::delayed ? "delayed" : "current";
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

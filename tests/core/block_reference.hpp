// A plain scalar model of MX and NVFP4 block quantization for the tests, written from the rules in
// mx.hpp / nvfp4.hpp: one element at a time, the MX scale by ilogb and the elements divided in double,
// no SIMD, no packing tricks (codes one per byte). Element rounding uses the scalar conversion routine,
// which tests/core checks exhaustively against its own independent reference.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fp8/types.hpp>

namespace block_reference {

struct result {
  std::vector<std::uint8_t> codes;   // one per element, row-major
  std::vector<std::uint8_t> scales;  // one per block
  float tensor_decode = 1.0f;        // NVFP4 only
};

inline bool finite_block(const float* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

template <class Element>
std::uint8_t element_code(double value, const std::uint32_t* random_bits, std::size_t index) {
  if (random_bits == nullptr)
    return fp8::convert_bits<Element, fp8::rounding::nearest_even, fp8::overflow::saturate>(value);
  return fp8::convert_bits<Element, fp8::rounding::stochastic, fp8::overflow::saturate>(value,
                                                                                        random_bits[index]);
}

// MX: X = 2^(floor(log2 amax) - emax), clamped to [2^-127, ...]; X = 1 for an all-zero block.
template <class Element>
result mx(const std::vector<float>& in, std::size_t rows, std::size_t cols,
          const std::uint32_t* random_bits) {
  const int emax = std::ilogb(static_cast<double>(std::numeric_limits<fp8::minifloat<Element>>::max()));
  result r;
  r.codes.resize(rows * cols);
  for (std::size_t first = 0; first < rows * cols; first += 32) {
    const float* block = in.data() + first;
    if (!finite_block(block, 32)) {
      r.scales.push_back(0xFF);
      for (std::size_t i = 0; i < 32; ++i) r.codes[first + i] = 0;
      continue;
    }
    double amax = 0;
    for (std::size_t i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(double(block[i])));
    int e = amax == 0 ? 0 : std::ilogb(amax) - emax;
    if (e < -127) e = -127;
    r.scales.push_back(std::uint8_t(e + 127));
    for (std::size_t i = 0; i < 32; ++i) {
      r.codes[first + i] =
          element_code<Element>(double(block[i]) / std::ldexp(1.0, e), random_bits, first + i);
    }
  }
  return r;
}

// NVFP4, the float arithmetic of nvfp4.hpp's header comment written out. `tile_rows` = 1 for 1x16
// blocks, 16 for 16x16 tiles (scales then one per tile).
inline result nvfp4(const std::vector<float>& in, std::size_t rows, std::size_t cols, std::size_t tile_rows,
                    const std::uint32_t* random_bits) {
  float amax_tensor = 0;
  for (const float x : in)
    if (std::isfinite(x)) amax_tensor = std::fmax(amax_tensor, std::fabs(x));
  float s_enc = std::fmin(448.0f * 6.0f / amax_tensor, FLT_MAX);
  if (amax_tensor == 0.0f || s_enc == 0.0f) s_enc = 1.0f;
  const float s_dec = 1.0f / s_enc;
  result r;
  r.tensor_decode = s_dec;
  r.codes.resize(rows * cols);
  for (std::size_t r0 = 0; r0 < rows; r0 += tile_rows) {
    const std::size_t r1 = std::min(rows, r0 + tile_rows);
    for (std::size_t c0 = 0; c0 < cols; c0 += 16) {
      bool finite = true;
      float amax = 0;
      for (std::size_t row = r0; row < r1; ++row) {
        finite = finite && finite_block(in.data() + row * cols + c0, 16);
        for (std::size_t c = c0; c < c0 + 16; ++c) amax = std::fmax(amax, std::fabs(in[row * cols + c]));
      }
      std::uint8_t scale = 0x7F;
      float multiplier = 0;
      if (finite) {
        scale = fp8::convert_bits<fp8::ue4m3_format>(amax * (s_enc * (1.0f / 6.0f)));
        multiplier = std::fmin(1.0f / (fp8::decode<float, fp8::ue4m3_format>(scale) * s_dec), FLT_MAX);
      }
      r.scales.push_back(scale);
      for (std::size_t row = r0; row < r1; ++row) {
        for (std::size_t c = c0; c < c0 + 16; ++c) {
          const std::size_t index = row * cols + c;
          r.codes[index] =
              finite ? element_code<fp8::e2m1_format>(in[index] * multiplier, random_bits, index) : 0;
        }
      }
    }
  }
  return r;
}

}  // namespace block_reference

// Device code of the formats beyond OCP FP8 (FP4, FP6, fnuz, E3M4, IEEE-style E4M3, UE4M3): the one
// conversion routine, decoding, numeric_limits, packed storage and the MX scale helpers, run in a kernel
// and compared with the same calls on the host, bit for bit. Inputs: every 257th float bit pattern
// (16.7 million, both signs, Inf and NaN included) in all eight policies.
#include <cuda_runtime.h>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <fp8/cuda/error.hpp>
#include <fp8/quantize/block_scaled_ops.hpp>
#include <fp8/types.hpp>

#include "gpu_skip.hpp"

namespace {

using fp8::overflow;
using fp8::rounding;

constexpr std::uint32_t stride = 257;
constexpr std::uint64_t inputs = ((std::uint64_t(1) << 32) + stride - 1) / stride;
constexpr int policies = 8;

__host__ __device__ inline std::uint32_t random_bits_for(std::uint32_t bits) {
  std::uint32_t h = bits * 0x9E3779B1u;
  h ^= h >> 15;
  return h * 0x85EBCA77u;
}

// All eight policies of one input, the same function on both sides.
template <class Format>
__host__ __device__ void convert_all(std::uint32_t bits, std::uint8_t* out) {
  const float x = fp8::detail::bit_cast<float>(bits);
  const std::uint32_t r = random_bits_for(bits);
  out[0] = fp8::convert_bits<Format, rounding::nearest_even, overflow::saturate>(x);
  out[1] = fp8::convert_bits<Format, rounding::nearest_even, overflow::nonsaturating>(x);
  out[2] = fp8::convert_bits<Format, rounding::toward_zero, overflow::saturate>(x);
  out[3] = fp8::convert_bits<Format, rounding::toward_zero, overflow::nonsaturating>(x);
  out[4] = fp8::convert_bits<Format, rounding::upward, overflow::saturate>(x);
  out[5] = fp8::convert_bits<Format, rounding::upward, overflow::nonsaturating>(x);
  out[6] = fp8::convert_bits<Format, rounding::stochastic, overflow::saturate>(x, r);
  out[7] = fp8::convert_bits<Format, rounding::stochastic, overflow::nonsaturating>(x, r);
}

template <class Format>
__global__ void convert_kernel(std::uint8_t* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < inputs;
       i += std::uint64_t(gridDim.x) * blockDim.x) {
    convert_all<Format>(std::uint32_t(i * stride), out + i * policies);
  }
}

// Per code: the decoded float's bits, the classification, negation, and numeric_limits.
template <class Format>
__host__ __device__ void describe_code(std::uint32_t code, std::uint32_t* out) {
  using T = fp8::minifloat<Format>;
  const T x = T::from_bits(std::uint8_t(code));
  out[0] = fp8::detail::bit_cast<std::uint32_t>(static_cast<float>(x));
  out[1] = std::uint32_t(fp8::isnan(x)) | std::uint32_t(fp8::isinf(x)) << 1 |
           std::uint32_t(fp8::iszero(x)) << 2 | std::uint32_t(fp8::signbit(x)) << 3;
  out[2] = (-x).bits() | std::uint32_t(fp8::abs(x).bits()) << 8;
  out[3] = std::numeric_limits<T>::max().bits() |
           std::uint32_t(std::numeric_limits<T>::denorm_min().bits()) << 8 |
           std::uint32_t(std::numeric_limits<T>::epsilon().bits()) << 16;
}

template <class Format>
__global__ void describe_kernel(std::uint32_t* out) {
  const std::uint32_t code = blockIdx.x * blockDim.x + threadIdx.x;
  if (code < 256) describe_code<Format>(code, out + 4 * code);
}

// Packing on the device: pack 64 codes, unpack them, and read three with packed_get.
template <class Format>
__global__ void pack_kernel(const std::uint8_t* codes, std::uint8_t* packed, std::uint8_t* back) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  fp8::pack<Format>(codes, 64, packed);
  fp8::unpack<Format>(packed, 64, back);
  back[64] = fp8::packed_get<Format>(packed, 5);
  back[65] = fp8::packed_get<Format>(packed, 63);
}

template <class Format>
void check_format() {
  std::uint8_t* device_out = nullptr;
  FP8_CUDA_CHECK(cudaMalloc(&device_out, inputs * policies));
  convert_kernel<Format><<<1024, 256>>>(device_out);
  FP8_CUDA_CHECK(cudaGetLastError());
  std::vector<std::uint8_t> device(inputs * policies);
  FP8_CUDA_CHECK(cudaMemcpy(device.data(), device_out, device.size(), cudaMemcpyDeviceToHost));
  FP8_CUDA_CHECK(cudaFree(device_out));
  std::uint64_t mismatches = 0;
  std::uint8_t host[policies];
  for (std::uint64_t i = 0; i < inputs; ++i) {
    convert_all<Format>(std::uint32_t(i * stride), host);
    for (int p = 0; p < policies; ++p) {
      if (host[p] != device[i * policies + p] && mismatches++ < 5) {
        CAPTURE(i * stride);
        CAPTURE(p);
        CHECK(int(host[p]) == int(device[i * policies + p]));
      }
    }
  }
  CHECK(mismatches == 0);

  std::uint32_t* device_codes = nullptr;
  FP8_CUDA_CHECK(cudaMalloc(&device_codes, 256 * 4 * sizeof(std::uint32_t)));
  describe_kernel<Format><<<1, 256>>>(device_codes);
  FP8_CUDA_CHECK(cudaGetLastError());
  std::vector<std::uint32_t> described(256 * 4);
  FP8_CUDA_CHECK(cudaMemcpy(described.data(), device_codes, described.size() * 4, cudaMemcpyDeviceToHost));
  FP8_CUDA_CHECK(cudaFree(device_codes));
  for (std::uint32_t code = 0; code < (1u << fp8::format_traits<Format>::total_bits); ++code) {
    std::uint32_t expected[4];
    describe_code<Format>(code, expected);
    CAPTURE(code);
    for (int k = 0; k < 4; ++k) CHECK(described[4 * code + k] == expected[k]);
  }

  if constexpr (fp8::packed_bits<Format> == 4 || fp8::packed_bits<Format> == 6) {
    std::vector<std::uint8_t> codes(64);
    for (int i = 0; i < 64; ++i) codes[i] = std::uint8_t((i * 37 + 11) & ((1 << fp8::packed_bits<Format>)-1));
    std::uint8_t *d_codes = nullptr, *d_packed = nullptr, *d_back = nullptr;
    FP8_CUDA_CHECK(cudaMalloc(&d_codes, 64));
    FP8_CUDA_CHECK(cudaMalloc(&d_packed, 48));
    FP8_CUDA_CHECK(cudaMalloc(&d_back, 66));
    FP8_CUDA_CHECK(cudaMemcpy(d_codes, codes.data(), 64, cudaMemcpyHostToDevice));
    pack_kernel<Format><<<1, 1>>>(d_codes, d_packed, d_back);
    FP8_CUDA_CHECK(cudaGetLastError());
    std::vector<std::uint8_t> packed(fp8::packed_bytes<Format>(64)), back(66), host_packed(packed.size());
    FP8_CUDA_CHECK(cudaMemcpy(packed.data(), d_packed, packed.size(), cudaMemcpyDeviceToHost));
    FP8_CUDA_CHECK(cudaMemcpy(back.data(), d_back, 66, cudaMemcpyDeviceToHost));
    fp8::pack<Format>(codes.data(), 64, host_packed.data());
    CHECK(packed == host_packed);
    CHECK(std::vector<std::uint8_t>(back.begin(), back.begin() + 64) == codes);
    CHECK(back[64] == codes[5]);
    CHECK(back[65] == codes[63]);
    FP8_CUDA_CHECK(cudaFree(d_codes));
    FP8_CUDA_CHECK(cudaFree(d_packed));
    FP8_CUDA_CHECK(cudaFree(d_back));
  }
}

__global__ void mx_scale_kernel(const std::uint32_t* amax_bits, std::uint8_t* codes, float* multipliers,
                                int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  codes[i] = fp8::detail::mx_scale_code_from_amax_bits(amax_bits[i], 2);
  multipliers[i] = fp8::detail::mx_element_multiplier(codes[i]);
}

}  // namespace

TEST_CASE_TEMPLATE("device conversions, decoding, limits and packing equal the host's", Format,
                   fp8::e2m1_format, fp8::e2m3_format, fp8::e3m2_format, fp8::e4m3fnuz_format,
                   fp8::e5m2fnuz_format, fp8::e3m4_format, fp8::e4m3_ieee_format, fp8::ue4m3_format) {
  check_format<Format>();
}

TEST_CASE("the MX scale helpers give the host's codes and multipliers on the device") {
  std::vector<std::uint32_t> amax;
  for (std::uint32_t bits = 0; bits < 0x7F800000u; bits += 0x00012345u) amax.push_back(bits);
  const int n = int(amax.size());
  std::uint32_t* d_amax = nullptr;
  std::uint8_t* d_codes = nullptr;
  float* d_multipliers = nullptr;
  FP8_CUDA_CHECK(cudaMalloc(&d_amax, n * sizeof(std::uint32_t)));
  FP8_CUDA_CHECK(cudaMalloc(&d_codes, n));
  FP8_CUDA_CHECK(cudaMalloc(&d_multipliers, n * sizeof(float)));
  FP8_CUDA_CHECK(cudaMemcpy(d_amax, amax.data(), n * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
  mx_scale_kernel<<<(n + 255) / 256, 256>>>(d_amax, d_codes, d_multipliers, n);
  FP8_CUDA_CHECK(cudaGetLastError());
  std::vector<std::uint8_t> codes(n);
  std::vector<float> multipliers(n);
  FP8_CUDA_CHECK(cudaMemcpy(codes.data(), d_codes, n, cudaMemcpyDeviceToHost));
  FP8_CUDA_CHECK(cudaMemcpy(multipliers.data(), d_multipliers, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    CHECK(codes[i] == fp8::detail::mx_scale_code_from_amax_bits(amax[i], 2));
    CHECK(multipliers[i] == fp8::detail::mx_element_multiplier(codes[i]));
  }
  FP8_CUDA_CHECK(cudaFree(d_amax));
  FP8_CUDA_CHECK(cudaFree(d_codes));
  FP8_CUDA_CHECK(cudaFree(d_multipliers));
}

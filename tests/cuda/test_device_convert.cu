// Device conversions equal the host routine for every input: all 2^32 floats through the hardware
// cvt path (single, x2, x4), the software path, the minifloat constructor and fp8::convert, for every
// format and policy; all 65536 half and bfloat16 inputs; a sample of doubles.
#include <cuda_bf16.h>  // first: makes fp8's __half / __nv_bfloat16 sources available in float8.hpp
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <fp8/cuda/convert.cuh>
#include <fp8/cuda/error.hpp>
#include <fp8/fp8.hpp>

#include "device_buffer.hpp"
#include "gpu_skip.hpp"

namespace {

using fp8::overflow;
using fp8::rounding;

// The random bits stochastic rounding reads, as a function of the input (the same on both sides).
__host__ __device__ inline std::uint32_t random_bits_for(std::uint32_t bits) {
  std::uint32_t h = bits * 0x9E3779B1u;
  h ^= h >> 15;
  h *= 0x85EBCA77u;
  h ^= h >> 13;
  return h;
}

__host__ __device__ inline float float_from_bits(std::uint32_t bits) {
  return fp8::detail::bit_cast<float>(bits);
}

constexpr int block_size = 256;
constexpr std::uint64_t chunk = std::uint64_t(1) << 28;  // inputs per round trip
constexpr std::uint64_t all_floats = std::uint64_t(1) << 32;

int grid_for(std::uint64_t count) {
  return int(std::min<std::uint64_t>((count + block_size - 1) / block_size, 65535u * 8));
}

// --- Kernels: one per device path; each converts inputs first .. first + count - 1 (float bits). ---

template <class Format, rounding R, overflow O>
__global__ void software_path(std::uint64_t first, std::uint64_t count, typename Format::storage* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::uint64_t(gridDim.x) * blockDim.x) {
    const std::uint32_t bits = std::uint32_t(first + i);
    // round_and_pack itself: convert_bits would take the cvt instruction on sm_89+ for the default
    // policy, and the software path would then never run on the device.
    out[i] = fp8::detail::round_and_pack<Format, R, O>(
        fp8::detail::source_traits<float>::unpack(float_from_bits(bits)), random_bits_for(bits));
  }
}

template <class Format, rounding R, overflow O>
__global__ void dispatching_path(std::uint64_t first, std::uint64_t count, typename Format::storage* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::uint64_t(gridDim.x) * blockDim.x) {
    const std::uint32_t bits = std::uint32_t(first + i);
    out[i] = fp8::cuda::convert<Format, R, O>(float_from_bits(bits), random_bits_for(bits));
  }
}

template <class Format, rounding R, overflow O>
__global__ void minifloat_path(std::uint64_t first, std::uint64_t count, typename Format::storage* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::uint64_t(gridDim.x) * blockDim.x) {
    const std::uint32_t bits = std::uint32_t(first + i);
    const float x = float_from_bits(bits);
    if constexpr (R == rounding::nearest_even && O == Format::default_overflow) {
      out[i] = fp8::minifloat<Format>(x).bits();  // the explicit constructor: the default policy
    } else {
      out[i] = fp8::convert<fp8::minifloat<Format>, R, O>(x, random_bits_for(bits)).bits();
    }
  }
}

template <class Format, rounding R, overflow O>
__global__ void packed_x2_path(std::uint64_t first, std::uint64_t count, std::uint16_t* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; 2 * i < count;
       i += std::uint64_t(gridDim.x) * blockDim.x) {
    const std::uint32_t lo = std::uint32_t(first + 2 * i);
    const std::uint32_t hi = lo + 1;
    out[i] = fp8::cuda::convert_x2<Format, R, O>(float_from_bits(lo), float_from_bits(hi),
                                                 random_bits_for(lo), random_bits_for(hi));
  }
}

template <class Format, rounding R, overflow O>
__global__ void packed_x4_path(std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; 4 * i < count;
       i += std::uint64_t(gridDim.x) * blockDim.x) {
    const std::uint32_t b0 = std::uint32_t(first + 4 * i);
    const float4 v{float_from_bits(b0), float_from_bits(b0 + 1), float_from_bits(b0 + 2),
                   float_from_bits(b0 + 3)};
    const uint4 r{random_bits_for(b0), random_bits_for(b0 + 1), random_bits_for(b0 + 2),
                  random_bits_for(b0 + 3)};
    out[i] = fp8::cuda::convert_x4<Format, R, O>(v, r);
  }
}

using fp8_test::device_buffer;

struct variant {
  std::string name;
  std::function<void(std::uint64_t first, std::uint64_t count, void* out)> launch;
};

template <class Format, rounding R, overflow O>
std::vector<variant> device_variants() {
  using storage = typename Format::storage;
  std::vector<variant> variants;
  variants.push_back(
      {"round_and_pack (software) on the device", [](std::uint64_t first, std::uint64_t count, void* out) {
         software_path<Format, R, O>
             <<<grid_for(count), block_size>>>(first, count, static_cast<storage*>(out));
       }});
  variants.push_back({"fp8::cuda::convert (hardware where it applies)",
                      [](std::uint64_t first, std::uint64_t count, void* out) {
                        dispatching_path<Format, R, O>
                            <<<grid_for(count), block_size>>>(first, count, static_cast<storage*>(out));
                      }});
  variants.push_back({"minifloat constructor / fp8::convert on the device",
                      [](std::uint64_t first, std::uint64_t count, void* out) {
                        minifloat_path<Format, R, O>
                            <<<grid_for(count), block_size>>>(first, count, static_cast<storage*>(out));
                      }});
  if constexpr (sizeof(storage) == 1) {
    variants.push_back({"fp8::cuda::convert_x2", [](std::uint64_t first, std::uint64_t count, void* out) {
                          packed_x2_path<Format, R, O><<<grid_for(count / 2), block_size>>>(
                              first, count, static_cast<std::uint16_t*>(out));
                        }});
    variants.push_back({"fp8::cuda::convert_x4", [](std::uint64_t first, std::uint64_t count, void* out) {
                          packed_x4_path<Format, R, O><<<grid_for(count / 4), block_size>>>(
                              first, count, static_cast<std::uint32_t*>(out));
                        }});
  }
  return variants;
}

// The host routine over [first, first + count), on all cores.
template <class Format, rounding R, overflow O>
void host_reference(std::uint64_t first, std::uint64_t count, typename Format::storage* out) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> workers;
  const std::uint64_t per_thread = (count + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([=] {
      const std::uint64_t begin = t * per_thread;
      const std::uint64_t end = std::min(count, begin + per_thread);
      for (std::uint64_t i = begin; i < end; ++i) {
        const std::uint32_t bits = std::uint32_t(first + i);
        out[i] = fp8::convert_bits<Format, R, O>(float_from_bits(bits), random_bits_for(bits));
      }
    });
  }
  for (auto& worker : workers) worker.join();
}

// Every float through every device path, compared code by code with the host.
template <class Format, rounding R, overflow O>
void sweep_all_floats(const char* policy) {
  using storage = typename Format::storage;
  const auto variants = device_variants<Format, R, O>();
  std::vector<std::unique_ptr<device_buffer<storage>>> outputs;
  for (std::size_t v = 0; v < variants.size(); ++v)
    outputs.push_back(std::make_unique<device_buffer<storage>>(chunk));
  std::vector<storage> expected(chunk);
  std::vector<storage> got(chunk);

  std::vector<std::uint64_t> mismatches(variants.size(), 0);
  for (std::uint64_t first = 0; first < all_floats; first += chunk) {
    for (std::size_t v = 0; v < variants.size(); ++v) variants[v].launch(first, chunk, outputs[v]->data());
    FP8_CUDA_CHECK(cudaGetLastError());
    host_reference<Format, R, O>(first, chunk, expected.data());  // overlaps the kernels
    FP8_CUDA_CHECK(cudaDeviceSynchronize());
    for (std::size_t v = 0; v < variants.size(); ++v) {
      FP8_CUDA_CHECK(
          cudaMemcpy(got.data(), outputs[v]->data(), chunk * sizeof(storage), cudaMemcpyDeviceToHost));
      if (std::memcmp(got.data(), expected.data(), chunk * sizeof(storage)) == 0) continue;
      for (std::uint64_t i = 0; i < chunk; ++i) {
        if (got[i] == expected[i]) continue;
        if (mismatches[v]++ == 0) {
          CAPTURE(Format::name);
          CAPTURE(policy);
          CAPTURE(variants[v].name);
          CAPTURE(std::uint32_t(first + i));
          CAPTURE(unsigned(got[i]));
          CAPTURE(unsigned(expected[i]));
          FAIL_CHECK("device and host codes differ (first mismatch of this path shown)");
        }
      }
    }
  }
  for (std::size_t v = 0; v < variants.size(); ++v) {
    CAPTURE(Format::name);
    CAPTURE(policy);
    CAPTURE(variants[v].name);
    CHECK(mismatches[v] == 0);
  }
}

// --- 16-bit sources: every half and bfloat16 code through the hardware path and the software path. ---

template <class Half>
__device__ Half half_from_bits(std::uint16_t bits) {
  if constexpr (std::is_same_v<Half, __half>) {
    __half_raw raw;
    raw.x = bits;
    return __half(raw);
  } else {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __nv_bfloat16(raw);
  }
}

template <class Format, class Half>
__global__ void convert_16bit_sources(typename Format::storage* hardware,
                                      typename Format::storage* software) {
  const std::uint32_t bits = blockIdx.x * blockDim.x + threadIdx.x;
  if (bits > 0xFFFFu) return;
  const Half x = half_from_bits<Half>(std::uint16_t(bits));
  hardware[bits] = fp8::cuda::convert<Format>(x);
  software[bits] = fp8::convert_bits<Format>(x);
}

template <class Format, class Half, class HostHalf>
void sweep_16bit_sources(const char* source) {
  using storage = typename Format::storage;
  constexpr std::size_t codes = 1u << 16;
  device_buffer<storage> hardware(codes);
  device_buffer<storage> software(codes);
  convert_16bit_sources<Format, Half>
      <<<int(codes / block_size), block_size>>>(hardware.data(), software.data());
  FP8_CUDA_CHECK(cudaGetLastError());
  std::vector<storage> got_hardware(codes), got_software(codes);
  FP8_CUDA_CHECK(cudaMemcpy(got_hardware.data(), hardware.data(), codes, cudaMemcpyDeviceToHost));
  FP8_CUDA_CHECK(cudaMemcpy(got_software.data(), software.data(), codes, cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (std::uint32_t bits = 0; bits < codes; ++bits) {
    const storage expected = fp8::convert_bits<Format>(HostHalf::from_bits(std::uint16_t(bits)));
    if (got_hardware[bits] != expected || got_software[bits] != expected) {
      if (wrong++ < 5) {
        CAPTURE(Format::name);
        CAPTURE(source);
        CAPTURE(bits);
        CAPTURE(unsigned(expected));
        CAPTURE(unsigned(got_hardware[bits]));
        CAPTURE(unsigned(got_software[bits]));
        FAIL_CHECK("16-bit source converts differently on the device");
      }
    }
  }
  CHECK(wrong == 0);
}

// --- Doubles: rounded once from their own bits on both sides (a sample: 2^64 inputs is too many). ---

template <class Format, rounding R, overflow O>
__global__ void convert_doubles(const double* in, std::size_t count, typename Format::storage* out) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < count) out[i] = fp8::convert_bits<Format, R, O>(in[i], random_bits_for(std::uint32_t(i)));
}

template <class Format, rounding R, overflow O>
void sample_doubles(const std::vector<double>& inputs) {
  using storage = typename Format::storage;
  const device_buffer<double> in(inputs);
  device_buffer<storage> out(inputs.size());
  convert_doubles<Format, R, O><<<int((inputs.size() + block_size - 1) / block_size), block_size>>>(
      in.data(), inputs.size(), out.data());
  FP8_CUDA_CHECK(cudaGetLastError());
  const std::vector<storage> got = out.download();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const storage expected = fp8::convert_bits<Format, R, O>(inputs[i], random_bits_for(std::uint32_t(i)));
    if (got[i] != expected && wrong++ < 5) {
      CAPTURE(Format::name);
      CAPTURE(inputs[i]);
      CAPTURE(unsigned(expected));
      CAPTURE(unsigned(got[i]));
      FAIL_CHECK("double converts differently on the device");
    }
  }
  CHECK(wrong == 0);
}

}  // namespace

__global__ void hardware_conversion_built(int* out) { *out = FP8_HARDWARE_CONVERSION; }

TEST_CASE("the device reports a compute capability with the FP8 cvt instruction, and the build uses it") {
  int device = 0;
  FP8_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  FP8_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  MESSAGE("device: " << properties.name << " (sm_" << properties.major << properties.minor << ")");
  // The tests are built for sm_90: an older device would run none of the kernels below.
  CHECK(properties.major * 10 + properties.minor >= 89);
  // Code built for an older architecture runs on this device through its PTX, with the cvt path
  // compiled out: every sweep below would then test the software path twice and pass.
  device_buffer<int> flag(1);
  hardware_conversion_built<<<1, 1>>>(flag.data());
  FP8_CUDA_CHECK(cudaGetLastError());
  CHECK_MESSAGE(flag.download()[0] == 1,
                "the kernels were built without the cvt path (CMAKE_CUDA_ARCHITECTURES below 89)");
}

__global__ void pack_powers_of_two(std::uint32_t* out) {
  out[0] = fp8::cuda::convert_x4<fp8::e4m3_format>(float4{1.0f, 2.0f, 4.0f, 8.0f});
  out[1] = fp8::cuda::convert_x2<fp8::e5m2_format>(1.0f, -2.0f);
  out[2] = fp8::cuda::convert<fp8::e4m3_format>(500.0f);
  out[3] = fp8::cuda::scaled_codes_x4<fp8::e4m3_format>(float4{0.5f, 1.0f, 2.0f, 4.0f}, 2.0f);
  out[4] = fp8::cuda::scaled_codes_x4<fp8::e4m3_format>(float4{1.0f, 1.0f, 1.0f, 1.0f},
                                                        float4{1.0f, 2.0f, 4.0f, 8.0f});
  out[5] = fp8::cuda::scaled_code<fp8::e4m3_format>(250.0f, 2.0f);
}

TEST_CASE("packing order: x2 and x4 put the first value in the low byte") {
  device_buffer<std::uint32_t> out(6);
  pack_powers_of_two<<<1, 1>>>(out.data());
  FP8_CUDA_CHECK(cudaGetLastError());
  std::uint32_t got[6] = {};
  FP8_CUDA_CHECK(cudaMemcpy(got, out.data(), sizeof got, cudaMemcpyDeviceToHost));
  CHECK(got[0] == 0x50484038u);  // E4M3: 8 = 0x50, 4 = 0x48, 2 = 0x40, 1 = 0x38
  CHECK(got[1] == 0xC03Cu);      // E5M2: -2 = 0xC0, 1 = 0x3C
  CHECK(got[2] == 0x7Eu);        // 500 saturates to 448
  // The scaled forms: the products, then the same conversion (one scale, or one per value).
  CHECK(got[3] == 0x50484038u);
  CHECK(got[4] == 0x50484038u);
  CHECK(got[5] == 0x7Eu);  // 500 saturates to 448
  // The host's forms of the same calls (the software path) agree.
  CHECK(fp8::cuda::scaled_codes_x4<fp8::e4m3_format>(float4{0.5f, 1.0f, 2.0f, 4.0f}, 2.0f) == got[3]);
  CHECK(fp8::cuda::scaled_code<fp8::e4m3_format>(250.0f, 2.0f) == got[5]);
}

TEST_CASE("E4M3: every float, every policy, every device path") {
  using F = fp8::e4m3_format;
  sweep_all_floats<F, rounding::nearest_even, overflow::saturate>("nearest_even/saturate (hardware cvt)");
  sweep_all_floats<F, rounding::nearest_even, overflow::nonsaturating>("nearest_even/nonsaturating");
  sweep_all_floats<F, rounding::toward_zero, overflow::saturate>("toward_zero/saturate");
  sweep_all_floats<F, rounding::toward_zero, overflow::nonsaturating>("toward_zero/nonsaturating");
  sweep_all_floats<F, rounding::upward, overflow::saturate>("upward/saturate");
  sweep_all_floats<F, rounding::stochastic, overflow::saturate>("stochastic/saturate");
}

TEST_CASE("E5M2: every float, every policy, every device path") {
  using F = fp8::e5m2_format;
  sweep_all_floats<F, rounding::nearest_even, overflow::saturate>("nearest_even/saturate (hardware cvt)");
  sweep_all_floats<F, rounding::nearest_even, overflow::nonsaturating>("nearest_even/nonsaturating");
  sweep_all_floats<F, rounding::toward_zero, overflow::saturate>("toward_zero/saturate");
  sweep_all_floats<F, rounding::toward_zero, overflow::nonsaturating>("toward_zero/nonsaturating");
  sweep_all_floats<F, rounding::upward, overflow::saturate>("upward/saturate");
  sweep_all_floats<F, rounding::stochastic, overflow::saturate>("stochastic/saturate");
}

TEST_CASE("E8M0, bfloat16 and half: every float on the device path") {
  sweep_all_floats<fp8::e8m0_format, rounding::toward_zero, overflow::saturate>("toward_zero/saturate");
  sweep_all_floats<fp8::e8m0_format, rounding::upward, overflow::saturate>("upward/saturate");
  sweep_all_floats<fp8::e8m0_format, rounding::nearest_even, overflow::saturate>("nearest_even/saturate");
  sweep_all_floats<fp8::bf16_format, rounding::nearest_even, overflow::nonsaturating>("nearest_even");
  sweep_all_floats<fp8::bf16_format, rounding::stochastic, overflow::nonsaturating>("stochastic");
  sweep_all_floats<fp8::fp16_format, rounding::nearest_even, overflow::nonsaturating>("nearest_even");
  sweep_all_floats<fp8::fp16_format, rounding::toward_zero, overflow::nonsaturating>("toward_zero");
}

TEST_CASE("every half and bfloat16 input, hardware and software paths") {
  sweep_16bit_sources<fp8::e4m3_format, __half, fp8::float16>("half");
  sweep_16bit_sources<fp8::e5m2_format, __half, fp8::float16>("half");
  sweep_16bit_sources<fp8::e4m3_format, __nv_bfloat16, fp8::bfloat16>("bfloat16");
  sweep_16bit_sources<fp8::e5m2_format, __nv_bfloat16, fp8::bfloat16>("bfloat16");
}

TEST_CASE("doubles round once on the device, as on the host") {
  std::vector<double> inputs = {1.0625 + 0x1p-30,  464.0, 464.0000001, 0x1p-10, -0x1p-10, 61440.0,
                                57344.0 + 4095.99, 0.0,   -0.0,        1e300,   -1e-300};
  std::mt19937_64 generator(20261121);
  while (inputs.size() < (std::size_t(1) << 22)) {
    const std::uint64_t bits = generator();
    double x;
    std::memcpy(&x, &bits, sizeof x);
    inputs.push_back(x);
    // Values near the FP8 range, where rounding decisions happen.
    inputs.push_back(
        std::ldexp(double(generator() % (1u << 30)) / double(1u << 29), int(generator() % 40) - 24));
  }
  sample_doubles<fp8::e4m3_format, rounding::nearest_even, overflow::saturate>(inputs);
  sample_doubles<fp8::e5m2_format, rounding::nearest_even, overflow::nonsaturating>(inputs);
  sample_doubles<fp8::e4m3_format, rounding::stochastic, overflow::saturate>(inputs);
}

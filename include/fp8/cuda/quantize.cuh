// Per-tensor quantization on the device with a scale already in device memory (delayed scaling):
// the cast and the amax of the input in one pass; and dequantization. Bit-identical to fp8::quantize.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/quantize.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../format.hpp"
#include "../scaling/fp8_format.hpp"
#include "amax.cuh"
#include "convert.cuh"
#include "element.cuh"
#include "launch.cuh"
#include "scale.cuh"

namespace fp8::cuda {

// The device-side scalars of a per-tensor cast. All optional; all device memory.
struct tensor_scale {
  const float* scale = nullptr;  // multiplies each input before the cast; null means 1
  float* scale_inv = nullptr;    // receives 1 / scale (what GEMMs and dequantize read)
  float* amax = nullptr;         // max-accumulates the amax of the unscaled input (see compute_amax)
};

namespace detail {

// Elements per thread and step of the vector path: two 4-element loads, one 8-byte store.
inline constexpr std::size_t vector_elements = 8;

__device__ __forceinline__ float read_scale(const float* scale) { return scale != nullptr ? *scale : 1.0f; }

// Where a cast kernel gets its scale, resolved on the device so that no value goes through the host:
// a given scale (delayed scaling; null means 1), or one computed from an amax another kernel wrote
// (current scaling). Block 0 publishes the scale used and its inverse where asked.
struct scale_source {
  const float* scale = nullptr;
  const float* amax = nullptr;  // when set, the scale comes from this amax and `rule` (fallback 1)
  scale_rule rule{};
  float* scale_out = nullptr;
  float* scale_inv_out = nullptr;

  // Delayed scaling: the scale in device memory (null means 1); its inverse written to scale_inv_out.
  static scale_source given(const float* scale, float* scale_inv_out) {
    scale_source source{};
    source.scale = scale;
    source.scale_inv_out = scale_inv_out;
    return source;
  }
  // Current scaling: the scale computed on the device from an amax that an earlier kernel wrote.
  static scale_source from_amax(const float* amax, scale_rule rule, float* scale_inv_out) {
    scale_source source{};
    source.amax = amax;
    source.rule = rule;
    source.scale_inv_out = scale_inv_out;
    return source;
  }

  __device__ float resolve() const {
    const float s = amax != nullptr ? scale_from_amax(*amax, rule, 1.0f) : read_scale(scale);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      if (scale_out != nullptr) *scale_out = s;
      if (scale_inv_out != nullptr) *scale_inv_out = 1.0f / s;
    }
    return s;
  }
};

// out[i] = FP8(in[i] * scale), nearest even, saturating; the amax of in[] (unscaled) when WithAmax.
// `vector`: in is 16-byte aligned and out 8-byte aligned.
template <class Format, class T, bool WithAmax, int Threads>
__global__ void __launch_bounds__(Threads)
    quantize_kernel(const T* __restrict__ in, std::size_t count, bool vector, scale_source source,
                    float* amax, std::uint8_t* __restrict__ out) {
  const float scale = source.resolve();
  std::uint32_t bits = 0;
  const std::size_t thread = blockIdx.x * std::size_t(Threads) + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * Threads;
  std::size_t scalar_begin = 0;
  if (vector) {
    // Two octets per step (one `stride` apart) so that each thread keeps two loads in flight.
    const std::size_t octets = count / vector_elements;
    const auto cast_octet = [&](std::size_t o, float4 a, float4 b) {
      if constexpr (WithAmax) bits = max(bits, max(amax_bits(a), amax_bits(b)));
      const uint2 packed{scaled_codes_x4<Format>(a, scale), scaled_codes_x4<Format>(b, scale)};
      *reinterpret_cast<uint2*>(out + o * vector_elements) = packed;
    };
    std::size_t o = thread;
    for (; o + stride < octets; o += 2 * stride) {
      float4 a0, b0, a1, b1;
      load8(in + o * vector_elements, a0, b0);
      load8(in + (o + stride) * vector_elements, a1, b1);
      cast_octet(o, a0, b0);
      cast_octet(o + stride, a1, b1);
    }
    if (o < octets) {
      float4 a, b;
      load8(in + o * vector_elements, a, b);
      cast_octet(o, a, b);
    }
    scalar_begin = octets * vector_elements;
  }
  for (std::size_t i = scalar_begin + thread; i < count; i += stride) {
    const float x = widen(in[i]);
    if constexpr (WithAmax) bits = max(bits, amax_bits(x));
    out[i] = scaled_code<Format>(x, scale);
  }
  if constexpr (WithAmax) {
    bits = block_max<Threads>(bits);
    if (threadIdx.x == 0) atomic_max_amax(amax, bits);
  }
}

// Every code of an 8-bit format, the size of the decode table dequantize keeps in shared memory.
inline constexpr int byte_codes = 1 << format_traits<e4m3_format>::total_bits;

// The decoded value of every code: what dequantize multiplies by scale_inv.
template <class Format>
__device__ __forceinline__ void fill_decode_table(float* table) {
  static_assert(format_traits<Format>::total_bits == format_traits<e4m3_format>::total_bits, "8-bit formats");
  for (int code = int(threadIdx.x); code < byte_codes; code += int(blockDim.x)) {
    table[code] = decode<float, Format>(typename Format::storage(code));
  }
  __syncthreads();
}

// decode(code) * scale_inv as the CPU computes it. A NaN code keeps the decoded NaN (quiet, with the
// code's sign), which is what a host multiply returns for a NaN operand; the device's own multiply
// would give its canonical NaN instead.
template <class Format>
__device__ __forceinline__ float dequantize_one(const float* table, std::uint32_t code, float scale_inv) {
  const float value = table[code];
  return format_traits<Format>::is_nan_code(typename Format::storage(code)) ? value : value * scale_inv;
}

// Four codes packed in a word (lowest byte first) to four outputs: the one copy of the 4-code step of
// both dequantize kernels.
template <class Format, class T>
__device__ __forceinline__ void dequantize4(const float* table, std::uint32_t codes, float scale_inv,
                                            T* out) {
  store4(out, float4{dequantize_one<Format>(table, codes & 0xFFu, scale_inv),
                     dequantize_one<Format>(table, (codes >> 8) & 0xFFu, scale_inv),
                     dequantize_one<Format>(table, (codes >> 16) & 0xFFu, scale_inv),
                     dequantize_one<Format>(table, codes >> 24, scale_inv)});
}

template <class Format, class T, int Threads>
__global__ void __launch_bounds__(Threads)
    dequantize_kernel(const std::uint8_t* __restrict__ in, std::size_t count, bool vector,
                      const float* scale_inv_pointer, T* __restrict__ out) {
  __shared__ float table[byte_codes];
  fill_decode_table<Format>(table);
  const float scale_inv = read_scale(scale_inv_pointer);
  const std::size_t thread = blockIdx.x * std::size_t(Threads) + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * Threads;
  std::size_t scalar_begin = 0;
  if (vector) {
    const std::size_t quads = count / 4;
    for (std::size_t q = thread; q < quads; q += stride) {
      dequantize4<Format>(table, *reinterpret_cast<const std::uint32_t*>(in + 4 * q), scale_inv, out + 4 * q);
    }
    scalar_begin = quads * 4;
  }
  for (std::size_t i = scalar_begin + thread; i < count; i += stride) {
    out[i] = narrow<T>(dequantize_one<Format>(table, in[i], scale_inv));
  }
}

template <class T>
bool quantize_vector_path(const T* in, const std::uint8_t* out) {
  return is_aligned(in, 16) && is_aligned(out, vector_elements);
}

// Launches the per-tensor cast of `count` elements with the scale from `source`.
template <class T>
void launch_quantize(const T* in, std::size_t count, fp8_format format, const scale_source& source,
                     float* amax, std::uint8_t* out, cudaStream_t stream) {
  const bool vector = quantize_vector_path(in, out);
  const std::size_t work = vector ? count / vector_elements + count % vector_elements : count;
  const unsigned grid = grid_for(work);
  visit_format(format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    constexpr int threads = block_threads;
    if (amax != nullptr) {
      quantize_kernel<format_t, T, true, threads>
          <<<grid, threads, 0, stream>>>(in, count, vector, source, amax, out);
    } else {
      quantize_kernel<format_t, T, false, threads>
          <<<grid, threads, 0, stream>>>(in, count, vector, source, nullptr, out);
    }
  });
  check_launch("fp8::cuda::detail::quantize_kernel", count, grid, block_threads);
}

}  // namespace detail

// Delayed-scaling cast of a contiguous buffer, in one pass over it:
//   out[i] = FP8(in[i] * *s.scale), rounded to nearest even and saturated (the hardware cvt on sm_89+);
//   *s.amax = max(*s.amax, amax(in))   (unscaled; NaN > Inf > finite), when s.amax is set;
//   *s.scale_inv = 1 / *s.scale        when s.scale_inv is set.
// Bit-identical to fp8::quantize / fp8::cast_to_fp8 on the host. Pointers 16-byte aligned take the
// vector path (8 elements per thread and step); others work too, more slowly.
// Throws fp8::invalid_argument on null data pointers or an unknown format, fp8::cuda_error when the
// launch fails.
template <class T>
void quantize(const T* in, std::size_t count, fp8_format format, const tensor_scale& s, std::uint8_t* out,
              cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  constexpr const char* function = "fp8::cuda::quantize";
  detail::check_pointer(in, count, function, "in");
  detail::check_pointer(out, count, function, "out");
  detail::check_format(format, function);
  if (count == 0 && s.scale_inv == nullptr) return;
  detail::launch_quantize(in, count, format, detail::scale_source::given(s.scale, s.scale_inv), s.amax, out,
                          stream);
}

// out[i] = T(decode(in[i]) * *scale_inv) (scale_inv null means 1): the exact FP8 value times the
// inverse scale in float, rounded once to T. Bit-identical to fp8::dequantize on the host.
template <class T>
void dequantize(const std::uint8_t* in, std::size_t count, fp8_format format, const float* scale_inv, T* out,
                cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  constexpr const char* function = "fp8::cuda::dequantize";
  detail::check_pointer(in, count, function, "in");
  detail::check_pointer(out, count, function, "out");
  detail::check_format(format, function);
  if (count == 0) return;
  const bool vector = detail::is_aligned(in, 4) && detail::is_aligned(out, 4 * sizeof(T));
  const unsigned grid = detail::grid_for(vector ? count / 4 + count % 4 : count);
  visit_format(format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    detail::dequantize_kernel<format_t, T, detail::block_threads>
        <<<grid, detail::block_threads, 0, stream>>>(in, count, vector, scale_inv, out);
  });
  detail::check_launch("fp8::cuda::detail::dequantize_kernel", count, grid, detail::block_threads);
}

}  // namespace fp8::cuda

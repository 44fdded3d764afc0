// Element-wise BF16 rounding and staging-copy kernels (grid-stride loops).
#include "storage.hpp"

#include <cuda_bf16.h>

#include <fp8/cuda/amax_tracker.cuh>

#include "kernel_support.cuh"

namespace trainer::cuda {

namespace {
// out: [count] = store_value(where, in), in place when out == in.
__global__ void store_copy_kernel(float* out, const float* in, std::size_t count, storage where) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    out[i] = detail::store_value(where, in[i]);
  }
}

// out: [count] BF16 copies of in: [count] (round to nearest even; exact for BF16 values); with
// Track, max |out| max-accumulated into *amax. Blocks of block_threads.
template <bool Track>
__global__ void to_bf16_kernel(__nv_bfloat16* out, const float* in, std::size_t count, float* amax) {
  fp8::cuda::amax_tracker tracker;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const __nv_bfloat16 value = __float2bfloat16_rn(in[i]);
    out[i] = value;
    if constexpr (Track) tracker.add(value);
  }
  if constexpr (Track) tracker.record<detail::block_threads>(amax);
}

// out: [count] the FP8 codes a linear layer's cast makes of to_bf16_kernel's copy of in: [count]
// (each value rounded as that copy rounds it, then fp8::cuda::scaled_code with *scale); with Track,
// the copy's amax max-accumulated into *amax, as to_bf16_kernel records it. Blocks of block_threads.
template <class Format, bool Track>
__global__ void to_fp8_kernel(std::uint8_t* out, const float* in, std::size_t count, const float* scale,
                              float* amax) {
  const float s = *scale;
  fp8::cuda::amax_tracker tracker;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const __nv_bfloat16 value = __float2bfloat16_rn(in[i]);
    out[i] = fp8::cuda::scaled_code<Format>(__bfloat162float(value), s);
    if constexpr (Track) tracker.add(value);
  }
  if constexpr (Track) tracker.record<detail::block_threads>(amax);
}

// out: [count] = in: [count] widened to float (exact).
__global__ void from_bf16_kernel(float* out, const __nv_bfloat16* in, std::size_t count) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    out[i] = __bfloat162float(in[i]);
  }
}
}  // namespace

void store_copy(storage where, float* out, const float* in, std::size_t count, cudaStream_t stream) {
  detail::check_pointer(out, count, "trainer::cuda::store_copy", "out");
  detail::check_pointer(in, count, "trainer::cuda::store_copy", "in");
  if (count == 0 || (where == storage::fp32 && out == in)) return;
  store_copy_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(out, in, count, where);
  detail::check_launch("store_copy_kernel");
}

void round_to_bf16(float* data, std::size_t count, cudaStream_t stream) {
  store_copy(storage::bf16, data, data, count, stream);
}

void store(storage where, float* data, std::size_t count, cudaStream_t stream) {
  store_copy(where, data, data, count, stream);
}

void to_bf16(std::uint16_t* out, const float* in, std::size_t count, cudaStream_t stream, float* amax) {
  detail::check_pointer(out, count, "trainer::cuda::to_bf16", "out");
  detail::check_pointer(in, count, "trainer::cuda::to_bf16", "in");
  if (count == 0) return;
  auto* bf16 = reinterpret_cast<__nv_bfloat16*>(out);
  if (amax != nullptr) {
    to_bf16_kernel<true>
        <<<detail::grid_for(count), detail::block_threads, 0, stream>>>(bf16, in, count, amax);
  } else {
    to_bf16_kernel<false>
        <<<detail::grid_for(count), detail::block_threads, 0, stream>>>(bf16, in, count, nullptr);
  }
  detail::check_launch("to_bf16_kernel");
}

void to_fp8(const fp8_output& out, const float* in, std::size_t count, cudaStream_t stream) {
  constexpr const char* function = "trainer::cuda::to_fp8";
  detail::check_pointer(out.codes, count, function, "out.codes");
  detail::check_pointer(in, count, function, "in");
  check_fp8_output(out, count, 0, function);  // a flat copy of the layer's operand
  if (count == 0) return;
  fp8::visit_format(out.format, [&](auto format) {
    using format_type = decltype(format);
    if (out.amax != nullptr) {
      to_fp8_kernel<format_type, true><<<detail::grid_for(count), detail::block_threads, 0, stream>>>(
          out.codes, in, count, out.scale, out.amax);
    } else {
      to_fp8_kernel<format_type, false><<<detail::grid_for(count), detail::block_threads, 0, stream>>>(
          out.codes, in, count, out.scale, nullptr);
    }
  });
  detail::check_launch("to_fp8_kernel");
}

void from_bf16(float* out, const std::uint16_t* in, std::size_t count, cudaStream_t stream) {
  detail::check_pointer(out, count, "trainer::cuda::from_bf16", "out");
  detail::check_pointer(in, count, "trainer::cuda::from_bf16", "in");
  if (count == 0) return;
  from_bf16_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(
      out, reinterpret_cast<const __nv_bfloat16*>(in), count);
  detail::check_launch("from_bf16_kernel");
}

}  // namespace trainer::cuda

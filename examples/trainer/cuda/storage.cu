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

// out: [count] the staged copy of in: [count], each element as detail::store_element writes it to
// Out (BF16: round to nearest even, exact for BF16 values, NaN canonical as on the host; FP8 codes:
// the code a linear layer's cast makes of that BF16 value, with *scale); with Track, the BF16 copy's
// amax max-accumulated into *amax (the same for both forms). Blocks of block_threads.
template <class Out, bool Track>
__global__ void to_staged_kernel(Out* out, const float* in, std::size_t count, const float* scale,
                                 float* amax) {
  const detail::store_rule rule(storage::bf16, scale != nullptr ? *scale : 1.0f);
  fp8::cuda::amax_tracker tracker;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float stored = detail::store_element(out, i, in[i], rule);
    if constexpr (Track) tracker.add(stored);
  }
  if constexpr (Track) tracker.record<detail::block_threads>(amax);
}

// Launches to_staged_kernel over count elements, with or without an amax.
template <class Out>
void launch_staged(Out* out, const float* in, std::size_t count, const float* scale, float* amax,
                   cudaStream_t stream) {
  const unsigned grid = detail::grid_for(count);
  if (amax != nullptr) {
    to_staged_kernel<Out, true><<<grid, detail::block_threads, 0, stream>>>(out, in, count, scale, amax);
  } else {
    to_staged_kernel<Out, false><<<grid, detail::block_threads, 0, stream>>>(out, in, count, scale, nullptr);
  }
  detail::check_launch("to_staged_kernel");
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
  launch_staged(reinterpret_cast<__nv_bfloat16*>(out), in, count, nullptr, amax, stream);
}

void to_fp8(const fp8_output& out, const float* in, std::size_t count, cudaStream_t stream) {
  constexpr const char* function = "trainer::cuda::to_fp8";
  detail::check_pointer(out.codes, count, function, "out.codes");
  detail::check_pointer(in, count, function, "in");
  check_fp8_output(out, count, 0, function);  // a flat copy of the layer's operand
  if (count == 0) return;
  fp8::visit_format(out.format, [&](auto format) {
    using code = detail::fp8_code<decltype(format)>;
    launch_staged(reinterpret_cast<code*>(out.codes), in, count, out.scale, out.amax, stream);
  });
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

// SwiGLU: a block per token (grid-stride), its hidden units over the threads; the formulas in the
// CPU layer's order.
// One kernel per pass, templated over the buffers' element type: floats (any run) or BF16 (the
// MLP half of bf16 and fp8 runs). The arithmetic is in float either way, so both forms give the
// same values.
#include "swiglu.hpp"

#include <cuda_bf16.h>

#include <cstddef>
#include <initializer_list>
#include <string>

#include <fp8/quantize/checks.hpp>

#include <fp8/cuda/amax_tracker.cuh>

#include "kernel_support.cuh"

namespace trainer::cuda {

namespace {

// expf is the accurate exponential (the build does not use --use_fast_math).
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Rows go to blocks (grid-stride) and a row's columns to the block's threads in chunks of V
// elements: 16 bytes (8 BF16 or 4 floats, one vector load or store each) where every row of every
// buffer starts 16-byte aligned, else 1. No index is divided per element (a 64-bit division per
// element made these kernels bound by instructions, not memory), and each element's arithmetic is
// the same whatever V is.
template <class T, int V>
struct alignas(sizeof(T) * V) chunk {
  T v[V];
};

template <class T, int V>
__device__ __forceinline__ chunk<T, V> load_chunk(const T* p) {
  return *reinterpret_cast<const chunk<T, V>*>(p);
}

template <class T, int V>
__device__ __forceinline__ void store_chunk(T* p, const chunk<T, V>& c) {
  *reinterpret_cast<chunk<T, V>*>(p) = c;
}

// out: [N, F]; inp: [N, 2F]. out_amax (or null): max |out| as stored, max-accumulated (the down
// projection's x_amax); blocks of block_threads, as the backward kernel.
template <class T, int V>
__global__ void swiglu_forward_kernel(T* out, const T* inp, int n, int f, storage out_storage,
                                      float* out_amax) {
  fp8::cuda::amax_tracker amax;
  for (int row = int(blockIdx.x); row < n; row += int(gridDim.x)) {
    const T* gate = inp + std::size_t(row) * 2 * std::size_t(f);
    const T* up = gate + f;
    T* out_row = out + std::size_t(row) * std::size_t(f);
    for (int j = int(threadIdx.x) * V; j < f; j += int(blockDim.x) * V) {
      const chunk<T, V> g = load_chunk<T, V>(gate + j), u = load_chunk<T, V>(up + j);
      chunk<T, V> o;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float gv = detail::load_element(g.v, e), uv = detail::load_element(u.v, e);
        const float stored = detail::store_element(o.v, e, gv * sigmoid(gv) * uv, out_storage);
        if (out_amax != nullptr) amax.add(stored);
      }
      store_chunk<T, V>(out_row + j, o);
    }
  }
  if (out_amax != nullptr) amax.record<detail::block_threads>(out_amax);
}

// dinp: [N, 2F]; dout: [N, F]; inp: [N, 2F]. dinp_amax (or null): max |dinp| as stored (the
// gate/up projection's dy_amax).
template <class T, int V>
__global__ void swiglu_backward_kernel(T* dinp, const T* dout, const T* inp, int n, int f,
                                       storage dinp_storage, float* dinp_amax) {
  fp8::cuda::amax_tracker amax;
  for (int row = int(blockIdx.x); row < n; row += int(gridDim.x)) {
    const std::size_t wide = std::size_t(row) * 2 * std::size_t(f);
    const T* gate = inp + wide;
    const T* up = gate + f;
    const T* dout_row = dout + std::size_t(row) * std::size_t(f);
    T* dgate = dinp + wide;
    T* dup = dgate + f;
    for (int j = int(threadIdx.x) * V; j < f; j += int(blockDim.x) * V) {
      const chunk<T, V> g = load_chunk<T, V>(gate + j), u = load_chunk<T, V>(up + j);
      const chunk<T, V> d = load_chunk<T, V>(dout_row + j);
      chunk<T, V> dg, du;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float gv = detail::load_element(g.v, e), uv = detail::load_element(u.v, e);
        const float dy = detail::load_element(d.v, e);
        const float s = sigmoid(gv);
        const float stored_gate =
            detail::store_element(dg.v, e, dy * uv * s * (1.0f + gv * (1.0f - s)), dinp_storage);
        const float stored_up = detail::store_element(du.v, e, dy * gv * s, dinp_storage);
        if (dinp_amax != nullptr) {
          amax.add(stored_gate);
          amax.add(stored_up);
        }
      }
      store_chunk<T, V>(dgate + j, dg);
      store_chunk<T, V>(dup + j, du);
    }
  }
  if (dinp_amax != nullptr) amax.record<detail::block_threads>(dinp_amax);
}

// Elements per chunk for these buffers: 16 bytes of T when f keeps every row 16-byte aligned and
// the buffers start so; else 1.
template <class T>
constexpr int vector_elements = 16 / int(sizeof(T));

template <class T>
bool rows_vectorizable(int f, std::initializer_list<const void*> buffers) {
  if (f % vector_elements<T> != 0) return false;
  for (const void* p : buffers) {
    if (!fp8::detail::is_aligned(p, 16)) return false;
  }
  return true;
}

// wide: the [N, 2F] buffers (inp, and dinp in the backward pass); narrow: the [N, F] buffer.
void check(const char* function, const void* wide, const void* other_wide, const void* narrow, int n, int f) {
  detail::require(n >= 0 && f >= 0, function,
                  "needs n >= 0 and f >= 0 (got n " + std::to_string(n) + ", f " + std::to_string(f) + ")");
  const std::size_t count = std::size_t(n) * std::size_t(f);
  detail::check_pointer(wide, 2 * count, function, "inp");
  detail::check_pointer(other_wide, 2 * count, function, "the [N, 2F] buffer");
  detail::check_pointer(narrow, count, function, "the [N, F] buffer");
}

template <class T>
void launch_forward(const char* function, T* out, const T* inp, int n, int f, storage out_storage,
                    float* out_amax, cudaStream_t stream) {
  check(function, inp, inp, out, n, f);
  const std::size_t count = std::size_t(n) * std::size_t(f);
  if (count == 0) return;
  constexpr int V = vector_elements<T>;
  if (rows_vectorizable<T>(f, {out, inp})) {
    swiglu_forward_kernel<T, V><<<detail::grid_for_rows(std::size_t(n)), detail::block_threads, 0, stream>>>(
        out, inp, n, f, out_storage, out_amax);
  } else {
    swiglu_forward_kernel<T, 1><<<detail::grid_for_rows(std::size_t(n)), detail::block_threads, 0, stream>>>(
        out, inp, n, f, out_storage, out_amax);
  }
  detail::check_launch("swiglu_forward_kernel");
}

template <class T>
void launch_backward(const char* function, T* dinp, const T* dout, const T* inp, int n, int f,
                     storage dinp_storage, float* dinp_amax, cudaStream_t stream) {
  check(function, inp, dinp, dout, n, f);
  const std::size_t count = std::size_t(n) * std::size_t(f);
  if (count == 0) return;
  constexpr int V = vector_elements<T>;
  if (rows_vectorizable<T>(f, {dinp, dout, inp})) {
    swiglu_backward_kernel<T, V><<<detail::grid_for_rows(std::size_t(n)), detail::block_threads, 0, stream>>>(
        dinp, dout, inp, n, f, dinp_storage, dinp_amax);
  } else {
    swiglu_backward_kernel<T, 1><<<detail::grid_for_rows(std::size_t(n)), detail::block_threads, 0, stream>>>(
        dinp, dout, inp, n, f, dinp_storage, dinp_amax);
  }
  detail::check_launch("swiglu_backward_kernel");
}

const __nv_bfloat16* as_bf16(const std::uint16_t* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* as_bf16(std::uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

}  // namespace

void swiglu_forward(float* out, const float* inp, int n, int f, storage out_storage, cudaStream_t stream) {
  launch_forward("trainer::cuda::swiglu_forward", out, inp, n, f, out_storage, nullptr, stream);
}

void swiglu_backward(float* dinp, const float* dout, const float* inp, int n, int f, storage dinp_storage,
                     cudaStream_t stream) {
  launch_backward("trainer::cuda::swiglu_backward", dinp, dout, inp, n, f, dinp_storage, nullptr, stream);
}

void swiglu_forward(std::uint16_t* out, const std::uint16_t* inp, int n, int f, cudaStream_t stream,
                    float* out_amax) {
  launch_forward("trainer::cuda::swiglu_forward (BF16)", as_bf16(out), as_bf16(inp), n, f, storage::bf16,
                 out_amax, stream);
}

void swiglu_backward(std::uint16_t* dinp, const std::uint16_t* dout, const std::uint16_t* inp, int n, int f,
                     cudaStream_t stream, float* dinp_amax) {
  launch_backward("trainer::cuda::swiglu_backward (BF16)", as_bf16(dinp), as_bf16(dout), as_bf16(inp), n, f,
                  storage::bf16, dinp_amax, stream);
}

}  // namespace trainer::cuda

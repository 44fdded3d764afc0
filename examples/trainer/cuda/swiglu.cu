// SwiGLU: a block per token (grid-stride), its hidden units over the threads; the formulas in the
// CPU layer's order.
// One kernel per pass, templated over the buffers' element type: floats (any run) or BF16 (the
// MLP half of bf16 and fp8 runs), and the output's, which may instead be the FP8 codes of the linear
// layer that reads it. The arithmetic is in float either way, so every form gives the same values.
#include "swiglu.hpp"

#include <cuda_bf16.h>

#include <cstddef>
#include <initializer_list>
#include <string>

#include <fp8/quantize/checks.hpp>

#include <fp8/cuda/amax_tracker.cuh>

#include "fp8_output.hpp"
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

// out: [N, F]; inp: [N, 2F]. In: the inputs' element type; Out: the output's (In, or the FP8 codes
// of w_down's X: detail::fp8_code). out_scale (FP8 codes only, else null): the codes' scale, read
// once. out_amax (or null): max |out| as stored (the BF16 value, for codes), max-accumulated (the
// down projection's x_amax, or the layer's slot for codes); blocks of block_threads, as the backward
// kernel.
template <class In, class Out, int V>
__global__ void swiglu_forward_kernel(Out* out, const In* inp, int n, int f, storage out_storage,
                                      const float* out_scale, float* out_amax) {
  const detail::store_rule rule(out_storage, out_scale != nullptr ? *out_scale : 1.0f);
  fp8::cuda::amax_tracker amax;
  for (int row = int(blockIdx.x); row < n; row += int(gridDim.x)) {
    const In* gate = inp + std::size_t(row) * 2 * std::size_t(f);
    const In* up = gate + f;
    Out* out_row = out + std::size_t(row) * std::size_t(f);
    for (int j = int(threadIdx.x) * V; j < f; j += int(blockDim.x) * V) {
      const chunk<In, V> g = load_chunk<In, V>(gate + j), u = load_chunk<In, V>(up + j);
      chunk<Out, V> o;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float gv = detail::load_element(g.v, e), uv = detail::load_element(u.v, e);
        const float stored = detail::store_element(o.v, e, gv * sigmoid(gv) * uv, rule);
        if (out_amax != nullptr) amax.add(stored);
      }
      store_chunk<Out, V>(out_row + j, o);
    }
  }
  if (out_amax != nullptr) amax.record<detail::block_threads>(out_amax);
}

// dinp: [N, 2F]; dout: [N, F]; inp: [N, 2F]. In, Out, dinp_scale: as the forward kernel's (Out the
// FP8 codes of w_gate_up's dY). dinp_amax (or null): max |dinp| as stored (the gate/up projection's
// dy_amax, or the layer's slot for codes).
template <class In, class Out, int V>
__global__ void swiglu_backward_kernel(Out* dinp, const In* dout, const In* inp, int n, int f,
                                       storage dinp_storage, const float* dinp_scale, float* dinp_amax) {
  const detail::store_rule rule(dinp_storage, dinp_scale != nullptr ? *dinp_scale : 1.0f);
  fp8::cuda::amax_tracker amax;
  for (int row = int(blockIdx.x); row < n; row += int(gridDim.x)) {
    const std::size_t wide = std::size_t(row) * 2 * std::size_t(f);
    const In* gate = inp + wide;
    const In* up = gate + f;
    const In* dout_row = dout + std::size_t(row) * std::size_t(f);
    Out* dgate = dinp + wide;
    Out* dup = dgate + f;
    for (int j = int(threadIdx.x) * V; j < f; j += int(blockDim.x) * V) {
      const chunk<In, V> g = load_chunk<In, V>(gate + j), u = load_chunk<In, V>(up + j);
      const chunk<In, V> d = load_chunk<In, V>(dout_row + j);
      chunk<Out, V> dg, du;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float gv = detail::load_element(g.v, e), uv = detail::load_element(u.v, e);
        const float dy = detail::load_element(d.v, e);
        const float s = sigmoid(gv);
        const float stored_gate =
            detail::store_element(dg.v, e, dy * uv * s * (1.0f + gv * (1.0f - s)), rule);
        const float stored_up = detail::store_element(du.v, e, dy * gv * s, rule);
        if (dinp_amax != nullptr) {
          amax.add(stored_gate);
          amax.add(stored_up);
        }
      }
      store_chunk<Out, V>(dgate + j, dg);
      store_chunk<Out, V>(dup + j, du);
    }
  }
  if (dinp_amax != nullptr) amax.record<detail::block_threads>(dinp_amax);
}

// Elements per chunk for inputs of type In: 16 bytes of them (the output's chunk is as many of
// its elements: 8 bytes of FP8 codes beside 16 of BF16 inputs).
template <class In>
constexpr int vector_elements = 16 / int(sizeof(In));

// Whether every row of every buffer starts at a whole chunk: f a multiple of the chunk's elements,
// the inputs 16-byte aligned, the outputs aligned to their chunk's bytes.
template <class In, class Out>
bool rows_vectorizable(int f, std::initializer_list<const void*> inputs, const void* output) {
  constexpr int v = vector_elements<In>;
  if (f % v != 0) return false;
  for (const void* p : inputs) {
    if (!fp8::detail::is_aligned(p, 16)) return false;
  }
  return fp8::detail::is_aligned(output, std::size_t(v) * sizeof(Out));
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

template <class In, class Out>
void launch_forward(const char* function, Out* out, const In* inp, int n, int f, storage out_storage,
                    const float* out_scale, float* out_amax, cudaStream_t stream) {
  check(function, inp, inp, out, n, f);
  const std::size_t count = std::size_t(n) * std::size_t(f);
  if (count == 0) return;
  constexpr int V = vector_elements<In>;
  const unsigned grid = detail::grid_for_rows(std::size_t(n));
  if (rows_vectorizable<In, Out>(f, {inp}, out)) {
    swiglu_forward_kernel<In, Out, V>
        <<<grid, detail::block_threads, 0, stream>>>(out, inp, n, f, out_storage, out_scale, out_amax);
  } else {
    swiglu_forward_kernel<In, Out, 1>
        <<<grid, detail::block_threads, 0, stream>>>(out, inp, n, f, out_storage, out_scale, out_amax);
  }
  detail::check_launch("swiglu_forward_kernel");
}

template <class In, class Out>
void launch_backward(const char* function, Out* dinp, const In* dout, const In* inp, int n, int f,
                     storage dinp_storage, const float* dinp_scale, float* dinp_amax, cudaStream_t stream) {
  check(function, inp, dinp, dout, n, f);
  const std::size_t count = std::size_t(n) * std::size_t(f);
  if (count == 0) return;
  constexpr int V = vector_elements<In>;
  const unsigned grid = detail::grid_for_rows(std::size_t(n));
  if (rows_vectorizable<In, Out>(f, {dout, inp}, dinp)) {
    swiglu_backward_kernel<In, Out, V><<<grid, detail::block_threads, 0, stream>>>(
        dinp, dout, inp, n, f, dinp_storage, dinp_scale, dinp_amax);
  } else {
    swiglu_backward_kernel<In, Out, 1><<<grid, detail::block_threads, 0, stream>>>(
        dinp, dout, inp, n, f, dinp_storage, dinp_scale, dinp_amax);
  }
  detail::check_launch("swiglu_backward_kernel");
}

const __nv_bfloat16* as_bf16(const std::uint16_t* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* as_bf16(std::uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

// What check_fp8_output counts: SwiGLU's n x f products (a negative size counts as none; the
// launchers refuse it with their own message); the backward writes two gradients per product.
std::size_t product_count(int n, int f) { return std::size_t(n > 0 ? n : 0) * std::size_t(f > 0 ? f : 0); }

}  // namespace

void swiglu_forward(float* out, const float* inp, int n, int f, storage out_storage, cudaStream_t stream) {
  launch_forward("trainer::cuda::swiglu_forward", out, inp, n, f, out_storage, nullptr, nullptr, stream);
}

void swiglu_backward(float* dinp, const float* dout, const float* inp, int n, int f, storage dinp_storage,
                     cudaStream_t stream) {
  launch_backward("trainer::cuda::swiglu_backward", dinp, dout, inp, n, f, dinp_storage, nullptr, nullptr,
                  stream);
}

void swiglu_forward(std::uint16_t* out, const std::uint16_t* inp, int n, int f, cudaStream_t stream,
                    float* out_amax) {
  launch_forward("trainer::cuda::swiglu_forward (BF16)", as_bf16(out), as_bf16(inp), n, f, storage::bf16,
                 nullptr, out_amax, stream);
}

void swiglu_backward(std::uint16_t* dinp, const std::uint16_t* dout, const std::uint16_t* inp, int n, int f,
                     cudaStream_t stream, float* dinp_amax) {
  launch_backward("trainer::cuda::swiglu_backward (BF16)", as_bf16(dinp), as_bf16(dout), as_bf16(inp), n, f,
                  storage::bf16, nullptr, dinp_amax, stream);
}

void swiglu_forward(const fp8_output& out, const std::uint16_t* inp, int n, int f, cudaStream_t stream) {
  constexpr const char* function = "trainer::cuda::swiglu_forward (FP8 codes)";
  check_fp8_output(out, product_count(n, f), std::size_t(f > 0 ? f : 0), function);
  fp8::visit_format(out.format, [&](auto format) {
    using code = detail::fp8_code<decltype(format)>;
    launch_forward(function, reinterpret_cast<code*>(out.codes), as_bf16(inp), n, f, storage::bf16, out.scale,
                   out.amax, stream);
  });
}

void swiglu_backward(const fp8_output& dinp, const std::uint16_t* dout, const std::uint16_t* inp, int n,
                     int f, cudaStream_t stream) {
  constexpr const char* function = "trainer::cuda::swiglu_backward (FP8 codes)";
  check_fp8_output(dinp, 2 * product_count(n, f), 2 * std::size_t(f > 0 ? f : 0), function);
  fp8::visit_format(dinp.format, [&](auto format) {
    using code = detail::fp8_code<decltype(format)>;
    launch_backward(function, reinterpret_cast<code*>(dinp.codes), as_bf16(dout), as_bf16(inp), n, f,
                    storage::bf16, dinp.scale, dinp.amax, stream);
  });
}

}  // namespace trainer::cuda

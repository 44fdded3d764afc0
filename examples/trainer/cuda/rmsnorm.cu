// RMSNorm kernels: one block per row for the row statistics, and a two-pass column sum for the
// weight gradient. The forward kernel is templated over the output's element type: floats (any
// run), BF16 (the transformer's norms that feed linear layers, in bf16 and fp8 runs) or those
// layers' FP8 codes (fp8 runs whose layer takes them).
#include "rmsnorm.hpp"

#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include <fp8/cuda/amax_tracker.cuh>

#include "fp8_output.hpp"
#include "kernel_support.cuh"

namespace trainer::cuda {

namespace {

// out, inp: [N, C]; rstd: [N]; weight: [C]. Grid-stride over rows, one block per row; blockDim.x a
// multiple of 32 (block_sum). T: the output's element type, floats (stored per out_storage), BF16
// (the linear layers' inputs in bf16 and fp8 runs) or the FP8 codes of such a layer's X
// (detail::fp8_code, with out_scale their scale; null for the others); the arithmetic is the same
// either way. out_amax (or null): max |out| as stored (the BF16 value, for codes), max-accumulated
// (a linear layer's x_amax, or its slot for codes); blocks of block_threads.
template <class T>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const float* inp, const float* weight, int n,
                                       int c, storage out_storage, const float* out_scale, float* out_amax) {
  __shared__ float scratch[detail::warp_size];
  const detail::store_rule rule(out_storage, out_scale != nullptr ? *out_scale : 1.0f);
  fp8::cuda::amax_tracker amax;
  for (int row = int(blockIdx.x); row < n; row += int(gridDim.x)) {
    const float* x = inp + std::size_t(row) * std::size_t(c);
    T* y = out + std::size_t(row) * std::size_t(c);
    float partial = 0.0f;
    for (int j = int(threadIdx.x); j < c; j += int(blockDim.x)) partial += x[j] * x[j];
    const float sum_squares = detail::block_sum(partial, scratch);
    const float s = 1.0f / sqrtf(sum_squares / float(c) + rmsnorm_epsilon);
    if (threadIdx.x == 0) rstd[row] = s;
    for (int j = int(threadIdx.x); j < c; j += int(blockDim.x)) {
      const float stored = detail::store_element(y, std::size_t(j), x[j] * s * weight[j], rule);
      if (out_amax != nullptr) amax.add(stored);
    }
  }
  if (out_amax != nullptr) amax.record<detail::block_threads>(out_amax);
}

// dinp, dout, inp: [N, C]; weight: [C]; rstd: [N]. One block per row, as the forward pass. dout
// floats or BF16 (widened exactly: the values a staging copy would give).
template <class D>
__global__ void rmsnorm_backward_input_kernel(float* dinp, const D* dout, const float* inp,
                                              const float* weight, const float* rstd, int n, int c,
                                              storage dinp_storage) {
  __shared__ float scratch[detail::warp_size];
  for (int row = int(blockIdx.x); row < n; row += int(gridDim.x)) {
    const std::size_t at = std::size_t(row) * std::size_t(c);
    const float* x = inp + at;
    const D* dy = dout + at;
    float* dx = dinp + at;
    const float s = rstd[row];
    float partial = 0.0f;  // sum over channels of (dout * weight) * (inp * rstd)
    for (int j = int(threadIdx.x); j < c; j += int(blockDim.x)) {
      partial += detail::load_element(dy, std::size_t(j)) * weight[j] * x[j] * s;
    }
    const float mean_g_n = detail::block_sum(partial, scratch) / float(c);
    for (int j = int(threadIdx.x); j < c; j += int(blockDim.x)) {
      const float dy_j = detail::load_element(dy, std::size_t(j));
      dx[j] = detail::store_value(dinp_storage, dx[j] + s * (dy_j * weight[j] - x[j] * s * mean_g_n));
    }
  }
}

// partials: [ceil(N / 64), C]; partials[p, j] = sum over rows 64p .. 64p + 63 (in order) of
// dout * inp * rstd. Grid: x over columns, y over partial rows, both grid-stride.
template <class D>
__global__ void rmsnorm_weight_partials_kernel(float* partials, const D* dout, const float* inp,
                                               const float* rstd, int n, int c, int partial_count) {
  for (int p = int(blockIdx.y); p < partial_count; p += int(gridDim.y)) {
    for (int j = int(blockIdx.x * blockDim.x + threadIdx.x); j < c; j += int(gridDim.x * blockDim.x)) {
      const int first = p * rmsnorm_rows_per_partial;
      const int last = min(n, first + rmsnorm_rows_per_partial);
      float sum = 0.0f;
      for (int row = first; row < last; ++row) {
        const std::size_t at = std::size_t(row) * std::size_t(c) + std::size_t(j);
        sum += detail::load_element(dout, at) * inp[at] * rstd[row];
      }
      partials[std::size_t(p) * std::size_t(c) + std::size_t(j)] = sum;
    }
  }
}

// dweight: [C] += sum over p (in order) of partials[p, :]. Grid-stride over columns.
__global__ void rmsnorm_weight_sum_kernel(float* dweight, const float* partials, int c, int partial_count) {
  for (int j = int(blockIdx.x * blockDim.x + threadIdx.x); j < c; j += int(gridDim.x * blockDim.x)) {
    float sum = 0.0f;
    for (int p = 0; p < partial_count; ++p) sum += partials[std::size_t(p) * std::size_t(c) + std::size_t(j)];
    dweight[j] += sum;
  }
}

void check_shape(const char* function, int n, int c) {
  detail::require(
      n >= 0 && c > 0, function,
      "needs n >= 0 rows and c > 0 channels (got n " + std::to_string(n) + ", c " + std::to_string(c) + ")");
}

template <class T>
void launch_forward(const char* function, T* out, float* rstd, const float* inp, const float* weight, int n,
                    int c, storage out_storage, const float* out_scale, float* out_amax,
                    cudaStream_t stream) {
  check_shape(function, n, c);
  const std::size_t elements = std::size_t(n) * std::size_t(c);
  detail::check_pointer(out, elements, function, "out");
  detail::check_pointer(inp, elements, function, "inp");
  detail::check_pointer(rstd, std::size_t(n), function, "rstd");
  detail::check_pointer(weight, std::size_t(c), function, "weight");
  if (n == 0) return;
  rmsnorm_forward_kernel<<<detail::grid_for_rows(std::size_t(n)), detail::block_threads, 0, stream>>>(
      out, rstd, inp, weight, n, c, out_storage, out_scale, out_amax);
  detail::check_launch("rmsnorm_forward_kernel");
}

template <class D>
void launch_backward(const char* function, float* dinp, float* dweight, const D* dout, const float* inp,
                     const float* weight, const float* rstd, int n, int c, storage dinp_storage,
                     float* workspace, cudaStream_t stream) {
  check_shape(function, n, c);
  const std::size_t elements = std::size_t(n) * std::size_t(c);
  detail::check_pointer(dinp, elements, function, "dinp");
  detail::check_pointer(dout, elements, function, "dout");
  detail::check_pointer(inp, elements, function, "inp");
  detail::check_pointer(rstd, std::size_t(n), function, "rstd");
  detail::check_pointer(weight, std::size_t(c), function, "weight");
  detail::check_pointer(dweight, std::size_t(c), function, "dweight");
  detail::check_pointer(workspace, rmsnorm_backward_workspace_size(n, c), function,
                        "workspace (rmsnorm_backward_workspace_size floats)");
  if (n == 0) return;
  rmsnorm_backward_input_kernel<<<detail::grid_for_rows(std::size_t(n)), detail::block_threads, 0, stream>>>(
      dinp, dout, inp, weight, rstd, n, c, dinp_storage);
  detail::check_launch("rmsnorm_backward_input_kernel");

  const int partial_count = int((n + rmsnorm_rows_per_partial - 1) / rmsnorm_rows_per_partial);
  const std::size_t column_blocks = (std::size_t(c) + detail::block_threads - 1) / detail::block_threads;
  const dim3 grid = detail::grid_2d(column_blocks, std::size_t(partial_count));
  rmsnorm_weight_partials_kernel<<<grid, detail::block_threads, 0, stream>>>(workspace, dout, inp, rstd, n, c,
                                                                             partial_count);
  detail::check_launch("rmsnorm_weight_partials_kernel");
  rmsnorm_weight_sum_kernel<<<detail::grid_for(std::size_t(c)), detail::block_threads, 0, stream>>>(
      dweight, workspace, c, partial_count);
  detail::check_launch("rmsnorm_weight_sum_kernel");
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int n, int c,
                     storage out_storage, cudaStream_t stream) {
  launch_forward("trainer::cuda::rmsnorm_forward", out, rstd, inp, weight, n, c, out_storage, nullptr,
                 nullptr, stream);
}

void rmsnorm_forward(std::uint16_t* out, float* rstd, const float* inp, const float* weight, int n, int c,
                     cudaStream_t stream, float* out_amax) {
  launch_forward("trainer::cuda::rmsnorm_forward (BF16)", reinterpret_cast<__nv_bfloat16*>(out), rstd, inp,
                 weight, n, c, storage::bf16, nullptr, out_amax, stream);
}

void rmsnorm_forward(const fp8_output& out, float* rstd, const float* inp, const float* weight, int n, int c,
                     cudaStream_t stream) {
  constexpr const char* function = "trainer::cuda::rmsnorm_forward (FP8 codes)";
  check_fp8_output(out, n > 0 && c > 0 ? std::size_t(n) * std::size_t(c) : 0, std::size_t(c > 0 ? c : 0),
                   function);
  fp8::visit_format(out.format, [&](auto format) {
    launch_forward(function, reinterpret_cast<detail::fp8_code<decltype(format)>*>(out.codes), rstd, inp,
                   weight, n, c, storage::bf16, out.scale, out.amax, stream);
  });
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int n, int c, storage dinp_storage, float* workspace,
                      cudaStream_t stream) {
  launch_backward("trainer::cuda::rmsnorm_backward", dinp, dweight, dout, inp, weight, rstd, n, c,
                  dinp_storage, workspace, stream);
}

void rmsnorm_backward(float* dinp, float* dweight, const std::uint16_t* dout, const float* inp,
                      const float* weight, const float* rstd, int n, int c, storage dinp_storage,
                      float* workspace, cudaStream_t stream) {
  launch_backward("trainer::cuda::rmsnorm_backward (BF16 dout)", dinp, dweight,
                  reinterpret_cast<const __nv_bfloat16*>(dout), inp, weight, rstd, n, c, dinp_storage,
                  workspace, stream);
}

}  // namespace trainer::cuda

// One transformer layer's GEMM set with its quantization, FP8 against BF16: hidden 4096, FFN 16384,
// 15,872 tokens (the shape Transformer Engine publishes figures for), current per-tensor scaling, and
// the same with delayed-scaling casts (Transformer Engine publishes both: 1.58x and 1.69x on an H200).
//
//   bench_layer <output-folder> [--quick]
//
// Per linear (QKV 4096 -> 12288, projection 4096 -> 4096, FC1 4096 -> 16384, FC2 16384 -> 4096):
//  - BF16: fprop Y = X·Wᵀ, dgrad dX = dY·W, wgrad dW = dYᵀ·X, through fp8::cublaslt (any layout).
//  - FP8: the casts a training step makes — X and W to E4M3 with their transposes (one fused
//    cast + transpose each, scales from the current amax), dY to E5M2 with its transpose — then the
//    same three products in cuBLASLt's TN layout (split accumulation for the gradients).
//  - FP8 delayed: the same copies from given scales, one read of each tensor, then the products.
//  - FP8 with producer amaxes: current per-tensor scaling whose amaxes the kernels that wrote X, W
//    and dY recorded (fp8::cuda::amax_tracker; quantize_transpose_from_amax), one read of each
//    tensor, then the products. What recording costs those kernels is measured too: a stand-in
//    producer (a 16-byte-per-thread rewrite of the tensor in place, the memory traffic of a norm or
//    an activation) with and without the tracker; the difference is added to this variant's time.
// Inputs are random normal; about a second of warm-up; CUDA-event medians. The buffers (hundreds of
// MiB) are far larger than L2.
//
// layer.csv: linear,variant,ms — variants "bf16", "fp8 gemms", "fp8 casts", "fp8 total", "fp8 delayed
// total", "fp8 producer amax total" (the recording's cost included), "producer", "producer with
// amax"; a line "layer" sums the four linears.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fp8/cublaslt.hpp>
#include <fp8/cuda.cuh>

#include "bench_support.cuh"

namespace lt = fp8::cublaslt;

namespace {

using fp8_bench::device_memory;
using fp8_bench::fill_normal;
using fp8_bench::median_ms;
using fp8_bench::warm_up;

// The tensors of one linear layer: BF16 inputs and outputs, FP8 copies (both orientations) with
// their inverse scales and amaxes.
struct linear_buffers {
  std::size_t tokens, in, out;
  device_memory x, w, dy, y, dx, dw;          // bf16 (dw: both wgrads write bf16, in the first half)
  device_memory x8, x8t, w8, w8t, dy8, dy8t;  // fp8 codes
  device_memory scalars;                      // scale_inv and amax of x, w, dy
  linear_buffers(std::size_t t, std::size_t i, std::size_t o)
      : tokens(t),
        in(i),
        out(o),
        x(2 * t * i),
        w(2 * o * i),
        dy(2 * t * o),
        y(2 * t * o),
        dx(2 * t * i),
        dw(4 * o * i),
        x8(t * i),
        x8t(t * i),
        w8(o * i),
        w8t(o * i),
        dy8(t * o),
        dy8t(t * o),
        scalars(64 * sizeof(float)) {
    fill_normal(x.as<__nv_bfloat16>(), t * i, 1.0f, 1);
    fill_normal(w.as<__nv_bfloat16>(), o * i, 0.02f, 2);
    fill_normal(dy.as<__nv_bfloat16>(), t * o, 1e-3f, 3);
    // The delayed casts' given scales: 1 keeps these inputs from overflowing (X ~ N(0, 1) under
    // E4M3's 448, W ~ N(0, 0.02), dY ~ N(0, 1e-3) in E5M2's range). Most of W's codes are then
    // subnormal (below 2^-6): fine for timing, not data for accuracy.
    const float one = 1.0f;
    for (int which = 0; which < 3; ++which) {
      FP8_CUDA_CHECK(cudaMemcpy(scale(which), &one, sizeof(float), cudaMemcpyHostToDevice));
    }
  }
  // Each slot 16-byte aligned, as cuBLASLt needs a tensorwise scale (fp8::cublaslt's check).
  float* scale_inv(int which) const { return scalars.as<float>() + 16 * which; }
  float* scale_inv_t(int which) const { return scalars.as<float>() + 16 * which + 4; }
  float* amax(int which) const { return scalars.as<float>() + 16 * which + 8; }
  float* scale(int which) const { return scalars.as<float>() + 16 * which + 12; }  // delayed: given
  // (scale(3), past the three tensors' slots: the stand-in producer's amax, which nothing reads)
};

// BF16: the three products of one linear.
void bf16_step(lt::handle& handle, const linear_buffers& b) {
  const auto t = std::int64_t(b.tokens), i = std::int64_t(b.in), o = std::int64_t(b.out);
  lt::linear_problem fprop{};
  fprop.m = t;
  fprop.n = o;
  fprop.k = i;
  fprop.x = {b.x.as<void>(), lt::data_type::bf16};
  fprop.w = {b.w.as<void>(), lt::data_type::bf16};
  fprop.y = {b.y.as<void>(), lt::data_type::bf16};
  handle.linear(fprop);
  // dX[t, i] = dY[t, o] · W[o, i]: column-major dXᵀ[i, t] = Wᵀ[i, o] · dYᵀ[o, t], no transposes.
  lt::gemm_problem dgrad{};
  dgrad.m = i;
  dgrad.n = t;
  dgrad.k = o;
  dgrad.op_a = lt::operation::none;
  dgrad.op_b = lt::operation::none;
  dgrad.a = {b.w.as<void>(), lt::data_type::bf16, i};
  dgrad.b = {b.dy.as<void>(), lt::data_type::bf16, o};
  dgrad.d = {b.dx.as<void>(), lt::data_type::bf16, i};
  dgrad.options.purpose = lt::gemm_purpose::gradient;
  handle.gemm(dgrad);
  // dW[o, i] = dYᵀ[o, t] · X[t, i]: column-major dWᵀ[i, o] = Xᵀ[i, t] · dY[t, o] (op T on dYᵀ).
  lt::gemm_problem wgrad{};
  wgrad.m = i;
  wgrad.n = o;
  wgrad.k = t;
  wgrad.op_a = lt::operation::none;
  wgrad.op_b = lt::operation::transpose;
  wgrad.a = {b.x.as<void>(), lt::data_type::bf16, i};
  wgrad.b = {b.dy.as<void>(), lt::data_type::bf16, o};
  wgrad.d = {b.dw.as<void>(), lt::data_type::bf16, i};
  wgrad.options.purpose = lt::gemm_purpose::gradient;
  handle.gemm(wgrad);
}

// FP8 casts: X, W (E4M3) and dY (E5M2) with their transposes, current per-tensor scaling.
void fp8_casts(const linear_buffers& b) {
  const fp8::quantization e4m3{fp8::fp8_format::e4m3, fp8::granularity::per_tensor, 0, false};
  const fp8::quantization e5m2{fp8::fp8_format::e5m2, fp8::granularity::per_tensor, 0, false};
  fp8::cuda::quantize_transpose(b.x.as<__nv_bfloat16>(), b.tokens, b.in, e4m3, b.x8.as<std::uint8_t>(),
                                b.scale_inv(0), b.x8t.as<std::uint8_t>(), b.scale_inv_t(0), b.amax(0));
  fp8::cuda::quantize_transpose(b.w.as<__nv_bfloat16>(), b.out, b.in, e4m3, b.w8.as<std::uint8_t>(),
                                b.scale_inv(1), b.w8t.as<std::uint8_t>(), b.scale_inv_t(1), b.amax(1));
  fp8::cuda::quantize_transpose(b.dy.as<__nv_bfloat16>(), b.tokens, b.out, e5m2, b.dy8.as<std::uint8_t>(),
                                b.scale_inv(2), b.dy8t.as<std::uint8_t>(), b.scale_inv_t(2), b.amax(2));
}

// FP8 casts under delayed scaling: the same copies from given scales, one read of each tensor
// (scale_inv, one per tensor, written by the cast for both copies).
void fp8_casts_delayed(const linear_buffers& b) {
  const auto given = [&](int which) {
    return fp8::cuda::tensor_scale{b.scale(which), b.scale_inv(which), b.amax(which)};
  };
  fp8::cuda::quantize_transpose(b.x.as<__nv_bfloat16>(), b.tokens, b.in, fp8::fp8_format::e4m3, given(0),
                                b.x8.as<std::uint8_t>(), b.x8t.as<std::uint8_t>());
  fp8::cuda::quantize_transpose(b.w.as<__nv_bfloat16>(), b.out, b.in, fp8::fp8_format::e4m3, given(1),
                                b.w8.as<std::uint8_t>(), b.w8t.as<std::uint8_t>());
  fp8::cuda::quantize_transpose(b.dy.as<__nv_bfloat16>(), b.tokens, b.out, fp8::fp8_format::e5m2, given(2),
                                b.dy8.as<std::uint8_t>(), b.dy8t.as<std::uint8_t>());
}

// FP8 casts with the producers' amaxes (current per-tensor scaling, one read of each tensor): the
// amaxes are those the casts above computed, as a producer's tracker would have recorded them.
void fp8_casts_producer_amax(const linear_buffers& b) {
  const fp8::quantization e4m3{fp8::fp8_format::e4m3, fp8::granularity::per_tensor, 0, false};
  const fp8::quantization e5m2{fp8::fp8_format::e5m2, fp8::granularity::per_tensor, 0, false};
  fp8::cuda::quantize_transpose_from_amax(b.x.as<__nv_bfloat16>(), b.tokens, b.in, e4m3, b.amax(0),
                                          b.x8.as<std::uint8_t>(), b.scale_inv(0), b.x8t.as<std::uint8_t>(),
                                          b.scale_inv_t(0));
  fp8::cuda::quantize_transpose_from_amax(b.w.as<__nv_bfloat16>(), b.out, b.in, e4m3, b.amax(1),
                                          b.w8.as<std::uint8_t>(), b.scale_inv(1), b.w8t.as<std::uint8_t>(),
                                          b.scale_inv_t(1));
  fp8::cuda::quantize_transpose_from_amax(b.dy.as<__nv_bfloat16>(), b.tokens, b.out, e5m2, b.amax(2),
                                          b.dy8.as<std::uint8_t>(), b.scale_inv(2), b.dy8t.as<std::uint8_t>(),
                                          b.scale_inv_t(2));
}

// The stand-in producer: rewrites a BF16 tensor in place, 8 values (16 bytes) per thread per step,
// as a norm or an activation writes its output; with Track, recording their amax as it goes into
// `amax` (not the slot the casts read: the timing loop must not change their scales). `flip` is 0:
// the values stay as they are, but a store of what was just loaded would be no store at all to the
// compiler, which would drop it (and the load with it, without Track).
constexpr int producer_threads = 256;
template <bool Track>
__global__ void __launch_bounds__(producer_threads)
    produce(uint4* data, std::size_t chunks, unsigned flip, float* amax) {
  fp8::cuda::amax_tracker tracker;
  const std::size_t stride = std::size_t(gridDim.x) * producer_threads;
  for (std::size_t i = blockIdx.x * std::size_t(producer_threads) + threadIdx.x; i < chunks; i += stride) {
    uint4 v = data[i];
    v.x ^= flip;
    data[i] = v;
    if constexpr (Track) {
      const auto* values = reinterpret_cast<const __nv_bfloat16*>(&v);
      for (int k = 0; k < 8; ++k) tracker.add(values[k]);
    }
  }
  if constexpr (Track) tracker.record<producer_threads>(amax);
}

// The producers of X, W and dY, each as one kernel over its tensor (the element counts are multiples
// of 8: every shape here is).
void producers(const linear_buffers& b, bool track) {
  for (const auto& [tensor, count] : {std::pair{&b.x, b.tokens * b.in}, std::pair{&b.w, b.out * b.in},
                                      std::pair{&b.dy, b.tokens * b.out}}) {
    const std::size_t chunks = count / 8;
    const unsigned grid = fp8::cuda::detail::grid_for(chunks);
    if (track) {
      produce<true><<<grid, producer_threads>>>(tensor->as<uint4>(), chunks, 0u, b.scale(3));
    } else {
      produce<false><<<grid, producer_threads>>>(tensor->as<uint4>(), chunks, 0u, nullptr);
    }
    FP8_CUDA_CHECK(cudaGetLastError());
  }
}

// FP8: the three products in TN form from the cast copies; the transposed copies' inverse scales are
// their own (current scaling) or the tensor's one (delayed).
void fp8_gemms(lt::handle& handle, const linear_buffers& b, bool one_scale_per_tensor) {
  const auto t = std::int64_t(b.tokens), i = std::int64_t(b.in), o = std::int64_t(b.out);
  const auto operand = [](const device_memory& codes, lt::data_type type, const float* scale_inv) {
    return lt::input_matrix{codes.as<void>(), type, 0, lt::scale_mode::tensorwise, scale_inv};
  };
  const auto scale_inv_t = [&](int which) {
    return one_scale_per_tensor ? b.scale_inv(which) : b.scale_inv_t(which);
  };
  lt::linear_problem fprop{};  // Y[t, o] = X8[t, i] · W8[o, i]ᵀ
  fprop.m = t;
  fprop.n = o;
  fprop.k = i;
  fprop.x = operand(b.x8, lt::data_type::e4m3, b.scale_inv(0));
  fprop.w = operand(b.w8, lt::data_type::e4m3, b.scale_inv(1));
  fprop.y = {b.y.as<void>(), lt::data_type::bf16};
  handle.linear(fprop);
  lt::linear_problem dgrad{};  // dX[t, i] = dY8[t, o] · (W8ᵀ[i, o])ᵀ
  dgrad.m = t;
  dgrad.n = i;
  dgrad.k = o;
  dgrad.x = operand(b.dy8, lt::data_type::e5m2, b.scale_inv(2));
  dgrad.w = operand(b.w8t, lt::data_type::e4m3, scale_inv_t(1));
  dgrad.y = {b.dx.as<void>(), lt::data_type::bf16};
  dgrad.options.purpose = lt::gemm_purpose::gradient;
  handle.linear(dgrad);
  lt::linear_problem wgrad{};  // dW[o, i] = dY8ᵀ[o, t] · (X8ᵀ[i, t])ᵀ
  wgrad.m = o;
  wgrad.n = i;
  wgrad.k = t;
  wgrad.x = operand(b.dy8t, lt::data_type::e5m2, scale_inv_t(2));
  wgrad.w = operand(b.x8t, lt::data_type::e4m3, scale_inv_t(0));
  wgrad.y = {b.dw.as<void>(), lt::data_type::bf16};
  wgrad.options.purpose = lt::gemm_purpose::gradient;
  handle.linear(wgrad);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <output-folder> [--quick]\n", argv[0]);
    return 2;
  }
  const std::string folder = argv[1];
  const bool quick = argc > 2 && std::string(argv[2]) == "--quick";
  try {
    lt::handle handle;
    std::printf("device: %s (sm_%d%d)\n", handle.device().name.c_str(), handle.device().major,
                handle.device().minor);
    constexpr std::size_t tokens = 15872, hidden = 4096, ffn = 16384;
    struct linear {
      const char* name;
      std::size_t in, out;
    };
    const linear linears[] = {
        {"qkv", hidden, 3 * hidden}, {"proj", hidden, hidden}, {"fc1", hidden, ffn}, {"fc2", ffn, hidden}};
    std::ofstream csv(folder + "/layer.csv");
    csv << "linear,variant,ms\n";
    double total_bf16 = 0.0, total_gemms = 0.0, total_casts = 0.0, total_fp8 = 0.0, total_delayed = 0.0,
           total_given = 0.0, total_producer = 0.0, total_tracked = 0.0;
    bool warmed = false;
    const int repetitions = quick ? 5 : 11;
    for (const linear& l : linears) {
      const linear_buffers b(tokens, l.in, l.out);
      const std::function<void()> bf16 = [&] { bf16_step(handle, b); };
      const std::function<void()> casts = [&] { fp8_casts(b); };
      const std::function<void()> gemms = [&] { fp8_gemms(handle, b, false); };
      const std::function<void()> both = [&] {
        fp8_casts(b);
        fp8_gemms(handle, b, false);
      };
      const std::function<void()> delayed = [&] {
        fp8_casts_delayed(b);
        fp8_gemms(handle, b, true);
      };
      warm_up(both, warmed ? 0.1 : (quick ? 0.5 : 1.0));
      warm_up(bf16, 0.1);
      warmed = true;
      const double ms_bf16 = median_ms(bf16, repetitions);
      const double ms_casts = median_ms(casts, repetitions);
      const double ms_gemms = median_ms(gemms, repetitions);
      const double ms_fp8 = median_ms(both, repetitions);
      warm_up(delayed, 0.1);
      const double ms_delayed = median_ms(delayed, repetitions);
      // The amaxes of the current casts above are in their slots: the producers' amaxes.
      const std::function<void()> given = [&] {
        fp8_casts_producer_amax(b);
        fp8_gemms(handle, b, false);
      };
      const std::function<void()> producer = [&] { producers(b, false); };
      const std::function<void()> tracked = [&] { producers(b, true); };
      warm_up(given, 0.1);
      const double ms_given_casts = median_ms(given, repetitions);
      warm_up(producer, 0.05);
      const double ms_producer = median_ms(producer, repetitions);
      warm_up(tracked, 0.05);
      const double ms_tracked = median_ms(tracked, repetitions);
      // The recording's cost, never credited as a gain when the tracked run happens to be faster.
      const double ms_given = ms_given_casts + std::max(0.0, ms_tracked - ms_producer);
      csv << l.name << ",bf16," << ms_bf16 << '\n'
          << l.name << ",fp8 gemms," << ms_gemms << '\n'
          << l.name << ",fp8 casts," << ms_casts << '\n'
          << l.name << ",fp8 total," << ms_fp8 << '\n'
          << l.name << ",fp8 delayed total," << ms_delayed << '\n'
          << l.name << ",fp8 producer amax total," << ms_given << '\n'
          << l.name << ",producer," << ms_producer << '\n'
          << l.name << ",producer with amax," << ms_tracked << '\n';
      csv.flush();  // a run cut short by its time limit keeps the rows so far
      std::printf(
          "%-5s bf16 %8.3f ms | fp8 gemms %8.3f + casts %7.3f, together %8.3f ms | %.2fx"
          " | delayed casts: %8.3f ms, %.2fx | producer amaxes: %8.3f ms, %.2fx (producers %.3f ms, "
          "%.3f with amax)\n",
          l.name, ms_bf16, ms_gemms, ms_casts, ms_fp8, ms_bf16 / ms_fp8, ms_delayed, ms_bf16 / ms_delayed,
          ms_given, ms_bf16 / ms_given, ms_producer, ms_tracked);
      std::fflush(stdout);
      total_bf16 += ms_bf16;
      total_gemms += ms_gemms;
      total_casts += ms_casts;
      total_fp8 += ms_fp8;
      total_delayed += ms_delayed;
      total_given += ms_given;
      total_producer += ms_producer;
      total_tracked += ms_tracked;
    }
    csv << "layer,bf16," << total_bf16 << "\nlayer,fp8 gemms," << total_gemms << "\nlayer,fp8 casts,"
        << total_casts << "\nlayer,fp8 total," << total_fp8 << "\nlayer,fp8 delayed total," << total_delayed
        << "\nlayer,fp8 producer amax total," << total_given << "\nlayer,producer," << total_producer
        << "\nlayer,producer with amax," << total_tracked << '\n';
    std::printf(
        "layer: bf16 %.3f ms, fp8 with casts %.3f ms: %.2fx (casts %.0f%% of the fp8 time); with "
        "delayed-scaling casts %.3f ms: %.2fx; with the producers' amaxes %.3f ms: %.2fx (recording "
        "them: producers %.3f -> %.3f ms)\n",
        total_bf16, total_fp8, total_bf16 / total_fp8, 100.0 * total_casts / (total_casts + total_gemms),
        total_delayed, total_bf16 / total_delayed, total_given, total_bf16 / total_given, total_producer,
        total_tracked);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_layer: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Which instruction set the CPU quantize kernels use, chosen at compile time from the compiler's
// target flags (-mavx512f -mavx512bw -mavx512vl, or -mavx2 -mf16c, or neither).
#pragma once

// FP8_QUANTIZE_ISA_AVX512 / FP8_QUANTIZE_ISA_AVX2 / FP8_QUANTIZE_ISA_SCALAR: exactly one is 1.
// Define FP8_DISABLE_SIMD to force the scalar kernels (consistently in every translation unit).
#if !defined(FP8_DISABLE_SIMD) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define FP8_QUANTIZE_ISA_AVX512 1
#define FP8_QUANTIZE_ISA_AVX2 0
#define FP8_QUANTIZE_ISA_SCALAR 0
#define FP8_QUANTIZE_ISA_NAME "avx512"
#define FP8_QUANTIZE_ABI_NAMESPACE quantize_avx512
#elif !defined(FP8_DISABLE_SIMD) && defined(__AVX2__) && defined(__F16C__)
#define FP8_QUANTIZE_ISA_AVX512 0
#define FP8_QUANTIZE_ISA_AVX2 1
#define FP8_QUANTIZE_ISA_SCALAR 0
#define FP8_QUANTIZE_ISA_NAME "avx2"
#define FP8_QUANTIZE_ABI_NAMESPACE quantize_avx2
#else
#define FP8_QUANTIZE_ISA_AVX512 0
#define FP8_QUANTIZE_ISA_AVX2 0
#define FP8_QUANTIZE_ISA_SCALAR 1
#define FP8_QUANTIZE_ISA_NAME "scalar"
#define FP8_QUANTIZE_ABI_NAMESPACE quantize_scalar
#endif

// The quantize functions live in an inline namespace named after the instruction set, so translation
// units compiled with different target flags get differently mangled functions instead of silently
// sharing one (an ODR violation that would run AVX-512 code on a CPU without it). Callers still write
// fp8::quantize(...).
namespace fp8 {
inline namespace FP8_QUANTIZE_ABI_NAMESPACE {
// "avx512", "avx2" or "scalar": the kernels this translation unit's fp8::quantize runs.
inline constexpr const char* quantize_isa = FP8_QUANTIZE_ISA_NAME;
}  // namespace FP8_QUANTIZE_ABI_NAMESPACE
}  // namespace fp8

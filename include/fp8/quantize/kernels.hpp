// Picks the element operations of this translation unit's instruction set (see isa.hpp) for the
// quantize functions; the scalar ones stay available as the reference.
#pragma once

#include "isa.hpp"
#include "ops_avx2.hpp"
#include "ops_avx512.hpp"
#include "ops_scalar.hpp"
#include "span_kernels.hpp"

namespace fp8::detail {

#if FP8_QUANTIZE_ISA_AVX512
using simd_ops = avx512_ops;
#elif FP8_QUANTIZE_ISA_AVX2
using simd_ops = avx2_ops;
#else
using simd_ops = scalar_ops;
#endif

}  // namespace fp8::detail

// Which tensor of which GEMM an FP8 cast feeds, and which format each one gets under a format mix
// (HYBRID: E4M3 forward tensors, E5M2 gradients; or E4M3 everywhere).
#pragma once

#include <cstddef>
#include <cstdint>

#include "fp8_format.hpp"

namespace fp8 {

// A linear layer Y = X W^T runs three GEMMs per step; each reads two FP8 operands.
//   fprop:  Y  = X  . W^T        (fprop_input = X, fprop_weight = W)
//   dgrad:  dX = dY . W          (dgrad_grad_output = dY, dgrad_weight = W)
//   wgrad:  dW = dY^T . X        (wgrad_grad_output = dY, wgrad_input = X)
enum class gemm_operand : std::uint8_t {
  fprop_input = 0,
  fprop_weight = 1,
  dgrad_grad_output = 2,
  dgrad_weight = 3,
  wgrad_input = 4,
  wgrad_grad_output = 5,
};
inline constexpr std::size_t gemm_operand_count = 6;

// The three GEMMs of a layer (each can be switched between FP8 and higher precision when debugging).
enum class gemm_kind : std::uint8_t { fprop = 0, dgrad = 1, wgrad = 2 };

constexpr gemm_kind gemm_of(gemm_operand operand) noexcept {
  switch (operand) {
    case gemm_operand::fprop_input:
    case gemm_operand::fprop_weight: return gemm_kind::fprop;
    case gemm_operand::dgrad_grad_output:
    case gemm_operand::dgrad_weight: return gemm_kind::dgrad;
    case gemm_operand::wgrad_input:
    case gemm_operand::wgrad_grad_output: break;
  }
  return gemm_kind::wgrad;
}

// Gradients (dY) have a wide dynamic range and little need for precision.
constexpr bool is_gradient(gemm_operand operand) noexcept {
  return operand == gemm_operand::dgrad_grad_output || operand == gemm_operand::wgrad_grad_output;
}

constexpr bool is_weight(gemm_operand operand) noexcept {
  return operand == gemm_operand::fprop_weight || operand == gemm_operand::dgrad_weight;
}

constexpr const char* operand_name(gemm_operand operand) noexcept {
  switch (operand) {
    case gemm_operand::fprop_input: return "fprop_input";
    case gemm_operand::fprop_weight: return "fprop_weight";
    case gemm_operand::dgrad_grad_output: return "dgrad_grad_output";
    case gemm_operand::dgrad_weight: return "dgrad_weight";
    case gemm_operand::wgrad_input: return "wgrad_input";
    case gemm_operand::wgrad_grad_output: break;
  }
  return "wgrad_grad_output";
}

// Transformer Engine's `Format`: HYBRID is its default.
enum class format_mix : std::uint8_t {
  hybrid = 0,  // E4M3 for inputs and weights, E5M2 for gradients
  e4m3 = 1,    // E4M3 for every operand
};

constexpr bool is_valid(format_mix mix) noexcept {
  return mix == format_mix::hybrid || mix == format_mix::e4m3;
}

constexpr fp8_format operand_format(format_mix mix, gemm_operand operand) noexcept {
  return mix == format_mix::hybrid && is_gradient(operand) ? fp8_format::e5m2 : fp8_format::e4m3;
}

}  // namespace fp8

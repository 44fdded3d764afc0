// The linear layer's three GEMMs, each in the mode the precision policy gives its class and unit.
#include "linear.hpp"

#include <fp8/scaling/gemm_operand.hpp>

#include "fp8_gemm.hpp"
#include "gemm.hpp"
#include "scaling_state.hpp"

namespace trainer {

namespace {

// Runs one GEMM of a linear layer. In FP8 modes the operands carry their scaling (which of the
// layer's six operands they are); in other modes a training pass still records their amaxes.
void linear_gemm(const pass_context& pass, const linear_site& site, fp8::gemm_kind which, gemm_call call,
                 fp8::gemm_operand a_role, fp8::gemm_operand b_role) {
  call.mode = pass.policy->linear_mode(site.unit, which);
  operand_scaling a_scaling{pass.scaling,     site.scaling_index, a_role,
                            pass.record_amax, pass.stats,         call.mode};
  operand_scaling b_scaling{pass.scaling,     site.scaling_index, b_role,
                            pass.record_amax, pass.stats,         call.mode};
  const bool quantized = call.mode == gemm_mode::fp8 || call.mode == gemm_mode::fake_fp8;
  if (quantized) {
    call.a_scaling = &a_scaling;
    call.b_scaling = &b_scaling;
  } else if (pass.scaling != nullptr) {
    observe_operand(call.a, a_scaling);
    observe_operand(call.b, b_scaling);
  }
  gemm(call);
}

}  // namespace

void linear_forward(const pass_context& pass, const linear_site& site, float* y, const float* x,
                    const float* w, int m, int k, int n) {
  gemm_call call;
  call.a = {x, m, k};  // reads X [M, K]
  call.b = {w, n, k};  // reads W [N, K]
  call.c = y;
  call.out = pass.policy->activation_storage();
  linear_gemm(pass, site, fp8::gemm_kind::fprop, call, fp8::gemm_operand::fprop_input,
              fp8::gemm_operand::fprop_weight);
}

void linear_backward(const pass_context& pass, const linear_site& site, float* dx, float* dw, const float* dy,
                     const float* x, const float* w, int m, int k, int n) {
  gemm_call dgrad;
  dgrad.a = {dy, m, n};                      // reads dY [M, N]
  dgrad.b = {w, n, k, /*transposed=*/true};  // reads W^T [K, N]
  dgrad.c = dx;
  dgrad.out = pass.policy->activation_storage();
  linear_gemm(pass, site, fp8::gemm_kind::dgrad, dgrad, fp8::gemm_operand::dgrad_grad_output,
              fp8::gemm_operand::dgrad_weight);

  gemm_call wgrad;
  wgrad.a = {dy, m, n, /*transposed=*/true};  // reads dY^T [N, M]
  wgrad.b = {x, m, k, /*transposed=*/true};   // reads X^T [K, M]
  wgrad.c = dw;
  wgrad.accumulate = true;
  wgrad.out = storage::fp32;
  linear_gemm(pass, site, fp8::gemm_kind::wgrad, wgrad, fp8::gemm_operand::wgrad_grad_output,
              fp8::gemm_operand::wgrad_input);
}

}  // namespace trainer

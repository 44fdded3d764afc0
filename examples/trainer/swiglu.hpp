// SwiGLU, the gated activation of LLaMA's MLP: out = silu(gate) * up, with silu(g) = g * sigmoid(g).
// The MLP around it is down(swiglu(gate_up(x))), with gate and up computed by one linear layer.
#pragma once

#include "precision.hpp"

namespace trainer {

// inp: [N, 2F], per token gate (F values) then up (F values); out: [N, F].
void swiglu_forward(float* out, const float* inp, int n, int f, storage out_storage);

// dinp: [N, 2F] (overwritten); dout: [N, F].
// d gate = dout * up * sigmoid(g) * (1 + g * (1 - sigmoid(g))),  d up = dout * silu(g).
void swiglu_backward(float* dinp, const float* dout, const float* inp, int n, int f, storage dinp_storage);

}  // namespace trainer

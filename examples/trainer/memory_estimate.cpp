// The element counts below mirror the allocations of transformer.cpp, mlp.cpp and parameters.hpp.
#include "memory_estimate.hpp"

#include <unistd.h>

namespace trainer {

namespace {

constexpr double float_bytes = 4.0;
constexpr double parameter_copies = 5.0;  // master, compute, grad, adam_m, adam_v

double transformer_floats(const model_options& o, int batch) {
  const double V = o.vocab, C = o.channels, F = o.hidden, L = o.layers, T = o.context, H = o.heads;
  const double N = double(batch) * T;
  const double parameters = 2.0 * V * C + L * (3.0 * C * C + C * C + 2.0 * F * C + C * F + 2.0 * C) + C;
  // Per block: ln1, atty, attproj, residual2, ln2, mlp_out, residual3 [N, C]; qkv, qkvr [N, 3C];
  // gate_up [N, 2F]; swiglu [N, F]; two [N] norms; attention probabilities [B, H, T, T].
  const double per_block = N * (7.0 * C + 6.0 * C + 3.0 * F + 2.0) + double(batch) * H * T * T;
  // encoded, lnf, dresidual, dbuffer_c [N, C]; dbuffer_3c; dbuffer_f, dbuffer_2f; logits, probs,
  // dlogits [N, V].
  const double rest = N * (4.0 * C + 3.0 * C + 3.0 * F + 3.0 * V + 3.0);
  return parameter_copies * parameters + L * per_block + rest;
}

double mlp_floats(const model_options& o, int batch) {
  const double V = o.vocab, C = o.channels, F = o.hidden, L = o.layers, W = o.window;
  const double N = double(batch) * double(o.context);
  const double parameters = V * C + W * C * F + (L - 1.0) * F * F + V * F;
  // concat and dconcat [N, W*C]; pre and post per layer, dpre, dpost [N, F]; logits, probs, dlogits
  // [N, V]; losses [N].
  const double activations = N * (2.0 * W * C + 2.0 * L * F + 2.0 * F + 3.0 * V + 1.0);
  return parameter_copies * parameters + activations;
}

}  // namespace

double estimated_memory_bytes(const model_options& options, int batch) {
  const double floats =
      options.kind == "mlp" ? mlp_floats(options, batch) : transformer_floats(options, batch);
  return floats * float_bytes;
}

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? double(pages) * double(page_size) : 0.0;
}

}  // namespace trainer

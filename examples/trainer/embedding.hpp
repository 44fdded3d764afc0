// Token embedding: a lookup of one row of a [V, C] table per byte, and its backward (a scatter-add
// into the table's gradient).
#pragma once

#include <cstdint>

namespace trainer {

// out: [N, C] = table[tokens[n], :]; table: [V, C] (already in the compute precision).
void embedding_forward(float* out, const float* table, const std::int32_t* tokens, int n, int c);

// dtable: [V, C] += dout[n, :] at row tokens[n]; in token order, so the sums are reproducible.
void embedding_backward(float* dtable, const float* dout, const std::int32_t* tokens, int n, int c);

}  // namespace trainer

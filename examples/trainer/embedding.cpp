// Embedding lookup and scatter-add.
#include "embedding.hpp"

#include <cstddef>
#include <cstring>

namespace trainer {

void embedding_forward(float* out, const float* table, const std::int32_t* tokens, int n, int c) {
  for (int i = 0; i < n; ++i) {
    std::memcpy(out + std::size_t(i) * std::size_t(c), table + std::size_t(tokens[i]) * std::size_t(c),
                sizeof(float) * std::size_t(c));
  }
}

void embedding_backward(float* dtable, const float* dout, const std::int32_t* tokens, int n, int c) {
  for (int i = 0; i < n; ++i) {
    float* row = dtable + std::size_t(tokens[i]) * std::size_t(c);
    const float* d = dout + std::size_t(i) * std::size_t(c);
    for (int j = 0; j < c; ++j) row[j] += d[j];
  }
}

}  // namespace trainer

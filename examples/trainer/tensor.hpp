// Row-major Eigen views over the trainer's flat float buffers. Every buffer is a plain float array
// with a shape comment beside it (as in llm.c); Eigen only does the arithmetic.
#pragma once

#include <Eigen/Core>

namespace trainer {

using row_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using matrix_view = Eigen::Map<row_matrix>;
using const_matrix_view = Eigen::Map<const row_matrix>;
using vector_view = Eigen::Map<Eigen::VectorXf>;
using const_vector_view = Eigen::Map<const Eigen::VectorXf>;

// Views a buffer as a [rows, cols] row-major matrix: element (r, c) is data[r * cols + c].
inline matrix_view as_matrix(float* data, int rows, int cols) { return matrix_view(data, rows, cols); }
inline const_matrix_view as_matrix(const float* data, int rows, int cols) {
  return const_matrix_view(data, rows, cols);
}

}  // namespace trainer

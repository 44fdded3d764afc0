// A test hook for host code (the layer tests are compiled by the host compiler, which cannot include
// the library's launch header): caps the grids of the trainer's kernels, as the library's
// grid_cap_for_testing does for its own, so that small test shapes take the loops in which a block
// handles several rows, which only large tensors reach otherwise. Process-wide state; tests only.
#pragma once

#include <cstddef>

namespace trainer::cuda {

// At most `blocks` blocks per grid from now on; 0: the device's own cap (SMs x 8).
void set_grid_cap_for_testing(std::size_t blocks);

// The cap for a scope, lifted when the scope ends.
struct scoped_grid_cap {
  explicit scoped_grid_cap(std::size_t blocks) { set_grid_cap_for_testing(blocks); }
  ~scoped_grid_cap() { set_grid_cap_for_testing(0); }
  scoped_grid_cap(const scoped_grid_cap&) = delete;
  scoped_grid_cap& operator=(const scoped_grid_cap&) = delete;
};

}  // namespace trainer::cuda

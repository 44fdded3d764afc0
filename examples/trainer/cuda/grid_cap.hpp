// A test hook for host code (the layer tests are compiled by the host compiler, which cannot include
// the library's launch header): caps the grids of the trainer's kernels, as the library's
// grid_cap_for_testing does for its own, so that small test shapes take the loops in which a block
// handles several rows, which only large tensors reach otherwise. Process-wide state; tests only.
#pragma once

#include <cstddef>

namespace trainer::cuda {

// At most `blocks` blocks per grid from now on; 0: the device's own cap (SMs x 8). Returns the cap
// it replaces.
std::size_t set_grid_cap_for_testing(std::size_t blocks);

// The cap for a scope; the one it replaced comes back when the scope ends (so that scopes nest).
struct scoped_grid_cap {
  explicit scoped_grid_cap(std::size_t blocks) : replaced_(set_grid_cap_for_testing(blocks)) {}
  ~scoped_grid_cap() { set_grid_cap_for_testing(replaced_); }
  scoped_grid_cap(const scoped_grid_cap&) = delete;
  scoped_grid_cap& operator=(const scoped_grid_cap&) = delete;

 private:
  std::size_t replaced_;
};

}  // namespace trainer::cuda

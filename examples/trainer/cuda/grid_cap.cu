#include "cuda/grid_cap.hpp"

#include <fp8/cuda/launch.cuh>

namespace trainer::cuda {

std::size_t set_grid_cap_for_testing(std::size_t blocks) {
  const std::size_t replaced = fp8::cuda::detail::grid_cap_for_testing;
  fp8::cuda::detail::grid_cap_for_testing = blocks;
  return replaced;
}

}  // namespace trainer::cuda

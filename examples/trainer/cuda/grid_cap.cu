#include "cuda/grid_cap.hpp"

#include <fp8/cuda/launch.cuh>

namespace trainer::cuda {

void set_grid_cap_for_testing(std::size_t blocks) { fp8::cuda::detail::grid_cap_for_testing = blocks; }

}  // namespace trainer::cuda

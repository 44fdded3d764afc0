// A second translation unit of test_linear_layer that includes the layer's header: the test program
// links only if every kernel and function the headers define may be defined by several units (a
// plain __global__ function in a header would be defined twice). Checked at build time, no GPU needed.
#include <fp8/cuda/linear.cuh>

#include <cstdint>

std::uint64_t weight_casts_of(const fp8::cuda::linear_layer& layer) { return layer.weight_casts(); }

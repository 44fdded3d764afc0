// Host-side helpers of the kernel launchers: grid sizes from the device's SM count, argument checks
// that throw fp8::invalid_argument before anything is launched, and the launch-error check.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/launch.cuh is used by device kernels: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../error.hpp"
#include "../quantize/checks.hpp"
#include "../scaling/fp8_format.hpp"
#include "error.hpp"

namespace fp8::cuda::detail {

// Threads per block of the element-wise kernels, and how many blocks per SM a grid-stride loop
// needs to keep every SM busy with enough loads in flight.
inline constexpr int block_threads = 256;
inline constexpr int blocks_per_sm = 8;

// The current device's SM count. Every launcher sizes its grid with it, so each device's count is
// asked of the runtime once and kept (a device's SM count never changes while a process runs); the
// table is shared by all threads, and a device beyond it is asked at every call.
inline int multiprocessor_count() {
  int device = 0;
  FP8_CUDA_CHECK(cudaGetDevice(&device));
  constexpr int remembered_devices = 64;
  static std::atomic<int> remembered[remembered_devices] = {};  // 0: not asked yet
  const bool in_table = device >= 0 && device < remembered_devices;
  if (in_table) {
    const int known = remembered[device].load(std::memory_order_relaxed);
    if (known != 0) return known;
  }
  int count = 0;
  FP8_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  if (in_table) remembered[device].store(count, std::memory_order_relaxed);
  return count;
}

// A test hook: when non-zero, grids have at most this many blocks (in place of the device's cap, so
// a test sets it below that cap), so that small test shapes take the grid-stride paths (several
// iterations per block, a second tile per step, shared-memory reuse) that only large tensors reach
// otherwise. Not for production use: it is process-wide state.
inline std::size_t grid_cap_for_testing = 0;

// Sets grid_cap_for_testing for a test's scope and restores the cap it replaced when it ends (so
// that scopes nest).
struct scoped_grid_cap_for_testing {
  explicit scoped_grid_cap_for_testing(std::size_t blocks) : replaced_(grid_cap_for_testing) {
    grid_cap_for_testing = blocks;
  }
  ~scoped_grid_cap_for_testing() { grid_cap_for_testing = replaced_; }
  scoped_grid_cap_for_testing(const scoped_grid_cap_for_testing&) = delete;
  scoped_grid_cap_for_testing& operator=(const scoped_grid_cap_for_testing&) = delete;

 private:
  std::size_t replaced_;
};

// Blocks for a grid-stride loop over `work_items` items of `block_threads` each: enough to cover the
// work, at most blocks_per_sm per SM (or grid_cap_for_testing, which takes that cap's place).
inline unsigned grid_for(std::size_t work_items, int threads = block_threads) {
  const std::size_t needed = (work_items + std::size_t(threads) - 1) / std::size_t(threads);
  const std::size_t cap =
      grid_cap_for_testing != 0 ? grid_cap_for_testing : std::size_t(multiprocessor_count()) * blocks_per_sm;
  const std::size_t blocks = needed < cap ? needed : cap;
  return unsigned(blocks == 0 ? 1 : blocks);
}

// A two-dimensional grid for kernels that grid-stride over both axes (x_blocks by y_blocks of work,
// e.g. column blocks by row chunks): each axis capped at 65535 (the y limit; x is kept to it too, as
// the loops cover the rest), and under grid_cap_for_testing at most that many blocks in all, x first,
// so that small test shapes take the loops in which a block moves on along either axis.
inline dim3 grid_2d(std::size_t x_blocks, std::size_t y_blocks) {
  constexpr std::size_t axis_limit = 65535;
  std::size_t x = x_blocks < axis_limit ? x_blocks : axis_limit;
  std::size_t y = y_blocks < axis_limit ? y_blocks : axis_limit;
  if (x == 0) x = 1;
  if (y == 0) y = 1;
  if (const std::size_t cap = grid_cap_for_testing; cap != 0) {
    if (x > cap) x = cap;
    const std::size_t y_cap = cap / x;
    if (y > y_cap) y = y_cap == 0 ? 1 : y_cap;
  }
  return dim3(unsigned(x), unsigned(y));
}

// Throws fp8::cuda_error if the last launch failed; `describe()` says what the launch was asked to
// do, and is called only then (no string is built for a launch that went through).
template <class Describe>
void check_launch_described(const Describe& describe) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) throw cuda_error(status, describe(), {}, fp8::detail::cuda_hint(status));
}

inline void check_launch(const char* kernel) {
  check_launch_described([&] { return std::string("launching ") + kernel; });
}

// What a launch was asked to do, for the message of its failure: the kernel, the shape of the data
// and the launch configuration, e.g. "launching fp8::cuda::detail::quantize_kernel on 1000003
// elements (grid 489 x 256 threads)". Built only when the launch failed.
inline std::string launch_description(const char* kernel, const std::string& data, unsigned grid,
                                      int threads) {
  return std::string("launching ") + kernel + " on " + data + " (grid " + std::to_string(grid) + " x " +
         std::to_string(threads) + " threads)";
}
inline std::string elements_text(std::size_t count) { return std::to_string(count) + " elements"; }
inline std::string matrix_text(std::size_t rows, std::size_t cols) {
  return "a " + std::to_string(rows) + " x " + std::to_string(cols) + " matrix";
}

// check_launch with the shape in the message: `count` elements, or a rows x cols matrix.
inline void check_launch(const char* kernel, std::size_t count, unsigned grid, int threads) {
  check_launch_described([&] { return launch_description(kernel, elements_text(count), grid, threads); });
}
inline void check_launch(const char* kernel, std::size_t rows, std::size_t cols, unsigned grid, int threads) {
  check_launch_described([&] { return launch_description(kernel, matrix_text(rows, cols), grid, threads); });
}

inline void require(bool condition, const char* function, const std::string& what) {
  if (!condition) throw invalid_argument(std::string(function) + ": " + what);
}

// The argument checks, the alignment test and the format dispatch are the CPU quantize layer's own
// (fp8/quantize/checks.hpp, fp8/scaling/fp8_format.hpp): one copy each, so both sides reject the
// same arguments with the same messages.
using fp8::detail::check_format;
using fp8::detail::check_pointer;
using fp8::detail::checked_size;
using fp8::detail::is_aligned;

}  // namespace fp8::cuda::detail

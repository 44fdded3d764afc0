// A trace of what the GPU runs (kernels, copies, memsets) between a kernel_trace's construction and
// its stop(), through CUPTI's activity API: each execution's start and end as the GPU recorded them,
// without replaying anything, so that a traced step runs as an untraced one does (CUPTI's records
// add a little host time per launch). bench_trainer traces a step to say where its GPU time goes,
// kernel by kernel, beside the phases its CUDA events measure.
//
// One trace at a time in a process (CUPTI hands its buffers to free functions); built only where
// CMake found CUPTI beside the toolkit (FP8_BENCH_CUPTI).
#pragma once

#include <cstdint>

#include "kernel_table.hpp"

namespace fp8_bench {

class kernel_trace {
 public:
  // Starts recording; throws std::runtime_error naming CUPTI's error where it cannot (a virtual
  // machine whose driver refuses the profiling interface, say), with nothing left enabled.
  kernel_trace();
  ~kernel_trace();
  kernel_trace(const kernel_trace&) = delete;
  kernel_trace& operator=(const kernel_trace&) = delete;

  // Waits for the device, stops recording and returns what ran since the construction. Throws
  // std::runtime_error naming CUPTI's error where the records cannot be collected.
  kernel_table stop();

  // Records CUPTI dropped because its buffers were full: the table undercounts by as many.
  std::uint64_t dropped() const { return dropped_; }
  // Buffers whose reading stopped at a record CUPTI could not read, losing the rest of the buffer (a
  // number of records no one counted): 0 in a complete trace.
  std::uint64_t buffers_cut_short() const { return buffers_cut_short_; }

 private:
  kernel_table table_;  // what the records say; CUPTI's callbacks reach it while running_
  bool running_ = false;
  std::uint64_t dropped_ = 0;
  std::uint64_t buffers_cut_short_ = 0;
};

}  // namespace fp8_bench

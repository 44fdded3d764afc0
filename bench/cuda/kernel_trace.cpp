// CUPTI's activity API behind kernel_trace (see kernel_trace.hpp).
#include "kernel_trace.hpp"

#include <cuda_runtime.h>
#include <cupti.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

namespace fp8_bench {
namespace {

// CUPTI fills buffers the program hands it and hands them back full (or at a flush). 8 MiB holds
// tens of thousands of records, a few buffers per traced step; CUPTI wants them 8-byte aligned.
constexpr std::size_t buffer_bytes = std::size_t(8) << 20;
constexpr std::size_t buffer_alignment = 8;

constexpr CUpti_ActivityKind traced_kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                               CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

// The table of the trace that runs, which the buffers' records go to. CUPTI may hand buffers back
// on a thread of its own, so the table is reached under the lock.
std::mutex active_mutex;
kernel_table* active = nullptr;
std::uint64_t cut_short = 0;  // the trace's buffers whose reading stopped at a record it cannot read

std::string result_text(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) return "unknown CUPTI error";
  return text;
}

void check(CUptiResult result, const char* call) {
  if (result != CUPTI_SUCCESS)
    throw std::runtime_error(std::string("CUPTI: ") + call + " failed: " + result_text(result));
}

const char* copy_name(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[copy host to device]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[copy device to host]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[copy device to device]";
    default: return "[copy, other]";
  }
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  // Out of host memory: a buffer of no bytes, whose records CUPTI drops and counts (dropped()).
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(buffer_alignment, buffer_bytes));
  *size = *buffer != nullptr ? buffer_bytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
  {
    const std::lock_guard<std::mutex> lock(active_mutex);
    CUpti_Activity* record = nullptr;
    // The loop ends at the buffer's end (CUPTI_ERROR_MAX_LIMIT_REACHED) or at a record it cannot read
    // (CUPTI_ERROR_INVALID_KIND: incomplete or invalid), which loses the records after it too.
    CUptiResult next = CUPTI_SUCCESS;
    while (active != nullptr &&
           (next = cuptiActivityGetNextRecord(buffer, valid, &record)) == CUPTI_SUCCESS) {
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
          // The record of the toolkit built against; a newer CUPTI appends fields, never moves these.
          const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
          active->add(readable_kernel_name(kernel->name != nullptr ? kernel->name : "[unnamed kernel]"),
                      kernel->start, kernel->end);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
          active->add(copy_name(copy->copyKind), copy->start, copy->end);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* memset = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
          active->add("[memset]", memset->start, memset->end);
          break;
        }
        default: break;
      }
    }
    if (active != nullptr && next != CUPTI_SUCCESS && next != CUPTI_ERROR_MAX_LIMIT_REACHED) ++cut_short;
  }
  std::free(buffer);
}

// Turns off every traced kind; errors are ignored (a kind that never came on cannot go off).
void disable_all() {
  for (const CUpti_ActivityKind kind : traced_kinds) cuptiActivityDisable(kind);
}

}  // namespace

kernel_trace::kernel_trace() {
  {
    const std::lock_guard<std::mutex> lock(active_mutex);
    if (active != nullptr) throw std::logic_error("kernel_trace: another trace is running (one at a time)");
    active = &table_;
    cut_short = 0;
  }
  try {
    // Registered once per process: the functions stay the same for every trace.
    static const CUptiResult registered = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    check(registered, "cuptiActivityRegisterCallbacks");
    for (const CUpti_ActivityKind kind : traced_kinds)
      check(cuptiActivityEnable(kind), "cuptiActivityEnable");
  } catch (...) {
    disable_all();
    const std::lock_guard<std::mutex> lock(active_mutex);
    active = nullptr;
    throw;
  }
  running_ = true;
}

kernel_trace::~kernel_trace() {
  if (!running_) return;
  disable_all();
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const std::lock_guard<std::mutex> lock(active_mutex);
  active = nullptr;
}

kernel_table kernel_trace::stop() {
  if (!running_) throw std::logic_error("kernel_trace::stop: the trace is not running");
  running_ = false;
  // What the device still runs belongs in the trace; then the buffers are flushed into the table
  // and the recording ends.
  const cudaError_t synchronized = cudaDeviceSynchronize();
  const CUptiResult flushed = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  disable_all();
  std::size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) dropped_ = dropped;
  {
    const std::lock_guard<std::mutex> lock(active_mutex);
    active = nullptr;
    buffers_cut_short_ = cut_short;
  }
  if (synchronized != cudaSuccess) {
    throw std::runtime_error(std::string("kernel_trace: cudaDeviceSynchronize failed: ") +
                             cudaGetErrorString(synchronized));
  }
  check(flushed, "cuptiActivityFlushAll");
  return std::move(table_);
}

}  // namespace fp8_bench

// NCCL for data-parallel FP8 on device buffers: the amax reducer (one ncclAllReduce with ncclMax over
// the amaxes' bit patterns, on a stream), the FP8 weight all-gather of shards and scales, a wait with
// a deadline, and errors as fp8::error naming the call and the rank. Needs <nccl.h> and libnccl; the
// core headers do not include this file. Communicators must be blocking (NCCL's default): a call that
// returns ncclInProgress is reported as failed. See docs/distributed.md.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../cuda/device_amax_reducer.hpp"
#include "../error.hpp"
#include "deadline.hpp"
#include "kept_buffers.hpp"
#include "shard_layout.hpp"

namespace fp8::distributed {

// The rank of this process (or device) in comm, or -1 where even that cannot be asked.
inline int nccl_rank(ncclComm_t comm) noexcept {
  int rank = -1;
  if (comm == nullptr || ncclCommUserRank(comm, &rank) != ncclSuccess) return -1;
  return rank;
}

// Throws fp8::error("<call> failed on rank <r>: <NCCL's text> (<NCCL's last error>)") unless rc is
// ncclSuccess.
inline void nccl_check(ncclResult_t rc, const char* call, ncclComm_t comm) {
  if (rc == ncclSuccess) return;
  const char* last = ncclGetLastError(comm);
  throw error(std::string(call) + " failed on rank " + std::to_string(nccl_rank(comm)) + ": " +
              ncclGetErrorString(rc) +
              (last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : ""));
}

namespace detail {

inline void cuda_check(cudaError_t rc, const char* call, ncclComm_t comm) {
  if (rc == cudaSuccess) return;
  throw error(std::string(call) + " failed on rank " + std::to_string(nccl_rank(comm)) + ": " +
              cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")");
}

// Throws fp8::invalid_argument unless p points to device (or managed) memory: NCCL reads and writes
// device memory only, and a host pointer would fail late, inside the collective.
inline void require_device_pointer(const void* p, const char* who, const char* name) {
  if (p == nullptr) throw invalid_argument(std::string(who) + ": " + name + " is null");
  cudaPointerAttributes attributes{};
  const cudaError_t rc = cudaPointerGetAttributes(&attributes, p);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();  // so that the failed query does not surface in a later call
    throw invalid_argument(std::string(who) + ": " + name + " is not a device pointer (" +
                           cudaGetErrorName(rc) + ")");
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    throw invalid_argument(std::string(who) + ": " + name +
                           " is not device memory (NCCL needs device buffers)");
}

// A cudaMalloc'd buffer on the current device that frees itself.
class device_bytes {
 public:
  device_bytes(std::size_t bytes, ncclComm_t comm) {
    cuda_check(cudaMalloc(&data_, bytes), "cudaMalloc", comm);
  }
  ~device_bytes() { (void)cudaFree(data_); }
  device_bytes(const device_bytes&) = delete;
  device_bytes& operator=(const device_bytes&) = delete;
  void* get() const noexcept { return data_; }

 private:
  void* data_ = nullptr;
};

// How a wait for NCCL work on a stream ended: done, or a reason to give up on it (the work is then
// still queued: only aborting the communicator ends it).
struct nccl_poll_end {
  bool done = true;
  ncclResult_t async = ncclSuccess;  // the communicator's asynchronous error, where that ended it
};

// Polls `stream` (which holds NCCL work of comm) and the communicator's asynchronous error until the
// work is done, an asynchronous error is reported (a peer that died, a network failure) or, where
// there is one (`has_deadline`), the deadline passes. Throws fp8::error where CUDA or NCCL cannot be
// asked.
inline nccl_poll_end nccl_poll(ncclComm_t comm, cudaStream_t stream, bool has_deadline,
                               std::chrono::steady_clock::time_point deadline) {
  using clock = std::chrono::steady_clock;
  for (;;) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) return {};
    if (state != cudaErrorNotReady) cuda_check(state, "cudaStreamQuery (after NCCL work)", comm);
    ncclResult_t async = ncclSuccess;
    nccl_check(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError", comm);
    // ncclInProgress: a nonblocking communicator still at work, not a failure.
    if (async != ncclSuccess && async != ncclInProgress) return {false, async};
    if (has_deadline && clock::now() >= deadline) return {false, ncclSuccess};
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// "<call> failed on rank <r>: <NCCL's text> (asynchronous...)" or "<call> timed out on rank <r> after
// <s> s: ...", each ending with what `aftermath` says of the communicator.
inline std::string nccl_wait_failure(const char* call, int rank, const nccl_poll_end& end, double seconds,
                                     const std::string& aftermath) {
  if (end.async != ncclSuccess) {
    return std::string(call) + " failed on rank " + std::to_string(rank) + ": " +
           ncclGetErrorString(end.async) + " (asynchronous; " + aftermath + ")";
  }
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return std::string(call) + " timed out on rank " + std::to_string(rank) + " after " + text +
         " s: another rank has died, hangs or skipped the call; " + aftermath;
}

}  // namespace detail

// Waits for `stream` (which holds NCCL work of comm) until it is done, polling it and the
// communicator's asynchronous error. Without a deadline (seconds 0) it polls until done. With one,
// after `seconds` it aborts the communicator (ncclCommAbort, which ends its pending kernels) and throws
// fp8::error naming `call`, the rank and the seconds. An asynchronous NCCL error (a peer that died, a
// network failure) aborts it and throws at once. ncclCommAbort frees the communicator, so after an
// abort `comm` is set to null: the owner's later ncclCommDestroy(comm) is then a no-op (NCCL accepts
// null) instead of a second free of the same communicator.
inline void nccl_wait(ncclComm_t& comm, cudaStream_t stream, double seconds, const char* call) {
  detail::check_timeout(seconds, "fp8::distributed::nccl_wait");
  const int rank = nccl_rank(comm);
  const detail::nccl_poll_end end =
      detail::nccl_poll(comm, stream, seconds > 0.0, detail::deadline_after(seconds));
  if (end.done) return;
  (void)ncclCommAbort(comm);
  comm = nullptr;
  throw error(detail::nccl_wait_failure(call, rank, end, seconds,
                                        end.async != ncclSuccess
                                            ? "the communicator was aborted"
                                            : "the communicator was aborted, so end the job"));
}

// Amaxes recorded by the library's casts are |x| bit patterns: non-negative floats or NaN, which order
// like their values as unsigned integers (every NaN above +Inf). One ncclAllReduce with ncclMax over
// ncclUint32 is therefore an exact maximum that keeps NaN dominant across ranks, where a maximum over
// floats may drop a NaN, depending on how it is computed. The call is queued on the stream
// given: work queued after it (the scale update) sees the reduced amaxes; nothing is synchronised.
// The patterns are reduced as they are (device values cannot be checked before the call, unlike the
// MPI reducer's): the library's casts record them with the sign bit clear, but a -0.0 (0x80000000)
// written into the amaxes by the caller would win on every rank.
//
// Usage (one rank per GPU, once per step):
//   fp8::distributed::nccl_amax_reducer reducer(comm);
//   state.update(reducer, stream);   // fp8::cuda::delayed_scaling_device_state: reduce, then update
// In one thread driving several GPUs (ncclCommInitAll), wrap the reduce_max calls of all devices in
// ncclGroupStart/ncclGroupEnd and update each state afterwards (NCCL defers grouped calls to
// ncclGroupEnd, so a kernel queued between them would run before the reduction).
class nccl_amax_reducer final : public cuda::device_amax_reducer {
 public:
  explicit nccl_amax_reducer(ncclComm_t comm) : comm_(comm) {
    if (comm == nullptr)
      throw invalid_argument("fp8::distributed::nccl_amax_reducer: the communicator is null");
  }

  // Throws fp8::invalid_argument, queueing nothing, if amaxes is null or not device memory.
  void reduce_max(float* amaxes, std::size_t count, cudaStream_t stream) override {
    if (count == 0) return;
    detail::require_device_pointer(amaxes, "fp8::distributed::nccl_amax_reducer", "amaxes");
    nccl_check(ncclAllReduce(amaxes, amaxes, count, ncclUint32, ncclMax, comm_, stream),
               "ncclAllReduce (amax max)", comm_);
    ++calls_;
  }

  ncclComm_t communicator() const noexcept { return comm_; }
  std::size_t calls() const noexcept { return calls_; }

 private:
  ncclComm_t comm_;
  std::size_t calls_ = 0;
};

// The FP8 weight all-gather on device buffers, ZeRO-3 / FSDP style: each rank's shard of FP8 codes
// (1 byte per element) and its float scales go to every rank in one NCCL group (two ncclAllGather),
// half the bytes of BF16. Every rank must pass the same shape: the constructor checks it with one
// small ncclAllGather (and waits for it), since a mismatch would otherwise hang or corrupt. With a
// timeout (seconds, 0 for none) that wait gives up on a rank that never builds its gather, or on
// the communicator's asynchronous error, and throws fp8::error: the check's all-gather is then
// still queued on the stream, and only ncclCommAbort, which is the caller's (the communicator is
// theirs), ends it; its device buffers, which that all-gather still writes, are kept until the
// program ends.
//
// Usage (one rank per GPU):
//   fp8::distributed::nccl_fp8_all_gather gather(comm, {shard_codes, shard_scales}, stream);
//   gather.gather(codes, scale_inv, all_codes, all_scale_inv, stream);   // queued on stream
// One thread driving several GPUs: nccl_fp8_all_gather::for_devices(comms, shape, streams), then
// the gather() calls of all devices inside ncclGroupStart/ncclGroupEnd.
class nccl_fp8_all_gather {
 public:
  nccl_fp8_all_gather(ncclComm_t comm, fp8_shard_shape shape, cudaStream_t stream,
                      double timeout_seconds = 0.0)
      : comm_(comm), shape_(shape) {
    require_comm(comm);
    detail::check_timeout(timeout_seconds, who_);
    nccl_fp8_all_gather* self = this;
    check_shapes(&self, &stream, 1, timeout_seconds);
  }

  // One gather per communicator of this thread, their shapes checked together (one NCCL group).
  static std::vector<nccl_fp8_all_gather> for_devices(const std::vector<ncclComm_t>& comms,
                                                      fp8_shard_shape shape,
                                                      const std::vector<cudaStream_t>& streams,
                                                      double timeout_seconds = 0.0) {
    detail::check_timeout(timeout_seconds, who_);
    if (comms.size() != streams.size())
      throw invalid_argument(std::string(who_) + ": " + std::to_string(comms.size()) + " communicators but " +
                             std::to_string(streams.size()) + " streams");
    if (comms.empty()) throw invalid_argument(std::string(who_) + ": no communicators");
    std::vector<nccl_fp8_all_gather> gathers;
    for (ncclComm_t comm : comms) {
      require_comm(comm);
      gathers.push_back(nccl_fp8_all_gather(comm, shape));
    }
    std::vector<nccl_fp8_all_gather*> pointers;
    for (auto& g : gathers) pointers.push_back(&g);
    std::vector<cudaStream_t> queues = streams;
    check_shapes(pointers.data(), queues.data(), pointers.size(), timeout_seconds);
    return gathers;
  }

  // codes: shape().elements bytes, scales: shape().scales floats (this rank's shard, device memory);
  // all_codes: ranks() * elements bytes, all_scales: ranks() * scales floats, filled in rank order,
  // queued on `stream`. Throws fp8::invalid_argument, queueing nothing, on a null or host pointer.
  void gather(const std::uint8_t* codes, const float* scales, std::uint8_t* all_codes, float* all_scales,
              cudaStream_t stream) {
    if (shape_.elements > 0) {
      detail::require_device_pointer(codes, who_, "codes");
      detail::require_device_pointer(all_codes, who_, "all_codes");
    }
    if (shape_.scales > 0) {
      detail::require_device_pointer(scales, who_, "scales");
      detail::require_device_pointer(all_scales, who_, "all_scales");
    }
    nccl_check(ncclGroupStart(), "ncclGroupStart", comm_);
    ncclResult_t codes_rc = ncclSuccess;
    ncclResult_t scales_rc = ncclSuccess;
    if (shape_.elements > 0)
      codes_rc = ncclAllGather(codes, all_codes, shape_.elements, ncclUint8, comm_, stream);
    if (shape_.scales > 0)
      scales_rc = ncclAllGather(scales, all_scales, shape_.scales, ncclFloat32, comm_, stream);
    const ncclResult_t end_rc = ncclGroupEnd();
    nccl_check(codes_rc, "ncclAllGather (fp8 codes)", comm_);
    nccl_check(scales_rc, "ncclAllGather (fp8 scales)", comm_);
    nccl_check(end_rc, "ncclGroupEnd (fp8 all-gather)", comm_);
    bytes_sent_ += shape_.fp8_bytes();
  }

  int ranks() const noexcept { return ranks_; }
  const fp8_shard_shape& shape() const noexcept { return shape_; }
  // Bytes of this rank's shards handed to NCCL so far (BF16 would be shape().bf16_bytes() per gather).
  std::size_t bytes_sent() const noexcept { return bytes_sent_; }

 private:
  static constexpr const char* who_ = "fp8::distributed::nccl_fp8_all_gather";

  nccl_fp8_all_gather(ncclComm_t comm, fp8_shard_shape shape) : comm_(comm), shape_(shape) {}

  static void require_comm(ncclComm_t comm) {
    if (comm == nullptr) throw invalid_argument(std::string(who_) + ": the communicator is null");
  }

  // Gathers every rank's (elements, scales) with one ncclAllGather per communicator (grouped), waits
  // (until the deadline, with a timeout), and throws fp8::invalid_argument naming the first rank whose
  // shape differs.
  static void check_shapes(nccl_fp8_all_gather* const* gathers, cudaStream_t* streams, std::size_t count,
                           double timeout_seconds) {
    struct scratch {
      int device;
      std::vector<std::uint64_t> host;
      detail::device_bytes buffer;
    };
    int previous_device = 0;
    detail::cuda_check(cudaGetDevice(&previous_device), "cudaGetDevice", gathers[0]->comm_);
    struct restore_device {  // the caller's device again, also when a check below throws
      int device;
      ~restore_device() { (void)cudaSetDevice(device); }
    } restore{previous_device};
    using scratches = std::vector<std::unique_ptr<scratch>>;
    auto owned = std::make_unique<scratches>();  // kept until the program ends if the wait gives up
    scratches& work = *owned;
    for (std::size_t i = 0; i < count; ++i) {
      nccl_fp8_all_gather& g = *gathers[i];
      int device = 0;
      nccl_check(ncclCommCount(g.comm_, &g.ranks_), "ncclCommCount", g.comm_);
      nccl_check(ncclCommCuDevice(g.comm_, &device), "ncclCommCuDevice", g.comm_);
      detail::cuda_check(cudaSetDevice(device), "cudaSetDevice", g.comm_);
      const std::size_t words = 2 * (static_cast<std::size_t>(g.ranks_) + 1);  // this rank's pair first
      work.push_back(std::unique_ptr<scratch>(
          new scratch{device, std::vector<std::uint64_t>(words),
                      detail::device_bytes(words * sizeof(std::uint64_t), g.comm_)}));
      work.back()->host[0] = g.shape_.elements;
      work.back()->host[1] = g.shape_.scales;
      detail::cuda_check(cudaMemcpyAsync(work.back()->buffer.get(), work.back()->host.data(),
                                         2 * sizeof(std::uint64_t), cudaMemcpyHostToDevice, streams[i]),
                         "cudaMemcpyAsync", g.comm_);
    }
    // From the first queued all-gather on, a failure keeps the buffers: NCCL may still write them.
    const auto deadline = detail::deadline_after(timeout_seconds);
    try {
      nccl_check(ncclGroupStart(), "ncclGroupStart", gathers[0]->comm_);
      std::vector<ncclResult_t> results(count, ncclSuccess);
      for (std::size_t i = 0; i < count; ++i) {
        auto* base = static_cast<std::uint64_t*>(work[i]->buffer.get());
        results[i] = ncclAllGather(base, base + 2, 2, ncclUint64, gathers[i]->comm_, streams[i]);
      }
      const ncclResult_t end_rc = ncclGroupEnd();
      for (std::size_t i = 0; i < count; ++i)
        nccl_check(results[i], "ncclAllGather (shard shapes)", gathers[i]->comm_);
      nccl_check(end_rc, "ncclGroupEnd (shard shapes)", gathers[0]->comm_);
      // Each all-gather is waited for before its copy back is queued: a copy into pageable host
      // memory returns only once it is done, so one queued behind an all-gather that never completes
      // would block here, past any deadline.
      for (std::size_t i = 0; i < count; ++i) {
        const ncclComm_t comm = gathers[i]->comm_;
        const detail::nccl_poll_end end =
            detail::nccl_poll(comm, streams[i], timeout_seconds > 0.0, deadline);
        if (!end.done) {
          throw error(detail::nccl_wait_failure("ncclAllGather (shard shapes)", nccl_rank(comm), end,
                                                timeout_seconds,
                                                "the check is still queued on the stream: abort the "
                                                "communicator (ncclCommAbort) and end the job"));
        }
      }
    } catch (...) {
      detail::keep_until_exit(std::move(owned));
      throw;
    }
    for (std::size_t i = 0; i < count; ++i) {
      scratch& s = *work[i];
      detail::cuda_check(cudaSetDevice(s.device), "cudaSetDevice", gathers[i]->comm_);
      detail::cuda_check(cudaMemcpyAsync(s.host.data(), s.buffer.get(), s.host.size() * sizeof(std::uint64_t),
                                         cudaMemcpyDeviceToHost, streams[i]),
                         "cudaMemcpyAsync", gathers[i]->comm_);
      detail::cuda_check(cudaStreamSynchronize(streams[i]), "cudaStreamSynchronize (shard shapes)",
                         gathers[i]->comm_);
    }
    for (std::size_t i = 0; i < count; ++i)
      detail::check_equal_shards(work[i]->host.data() + 2, gathers[i]->ranks_, who_);
  }

  ncclComm_t comm_;
  fp8_shard_shape shape_;
  int ranks_ = 0;
  std::size_t bytes_sent_ = 0;
};

}  // namespace fp8::distributed

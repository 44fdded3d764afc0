// Scratch memory of cuBLASLt, one buffer per stream. Split-K and stream-K kernels write partial
// results to the workspace; two products on two streams that share one buffer race on it (the
// result is silently wrong), so each stream gets its own, as PyTorch keys its workspaces by handle
// and stream. Generic over the allocator so that the bookkeeping is tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

namespace fp8::cublaslt {

// A buffer of `bytes` bytes at `data` (device memory), lent to one product.
struct workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

// A workspace's start must be 256-byte aligned (cublasSetWorkspace's rule, which Transformer Engine
// applies to cuBLASLt's too); cudaMalloc returns such addresses.
inline constexpr std::uintptr_t workspace_alignment = 256;

// Why a caller's workspace cannot serve plans chosen for `required` bytes; empty when it can.
inline std::string find_workspace_problem(const workspace& scratch, std::size_t required) {
  if (scratch.bytes < required) {
    return "the workspace has " + std::to_string(scratch.bytes) +
           " bytes, the handle's plans are chosen for " + std::to_string(required);
  }
  if (reinterpret_cast<std::uintptr_t>(scratch.data) % workspace_alignment != 0) {
    return "the workspace starts at an address that is not a multiple of 256 (" +
           std::to_string(reinterpret_cast<std::uintptr_t>(scratch.data) % workspace_alignment) +
           " bytes past one): cuBLASLt's workspace must be 256-byte aligned";
  }
  return {};
}

// Allocator: `void* allocate(std::size_t)` (throws on failure) and `bool release(void*) noexcept`
// (false where the buffer could not be freed: the pool then keeps it, to free it later).
// Streams are named by a key of the caller's, one per stream that runs apart from the others (the
// handle's workspace_key: a created stream's handle value, or CUDA's id of a special stream).
template <class Allocator>
class workspace_pool {
 public:
  workspace_pool(std::size_t bytes_per_stream, Allocator allocator)
      : bytes_(bytes_per_stream), allocator_(std::move(allocator)) {}
  workspace_pool(const workspace_pool&) = delete;
  workspace_pool& operator=(const workspace_pool&) = delete;
  workspace_pool(workspace_pool&& other) noexcept
      : bytes_(other.bytes_), allocator_(std::move(other.allocator_)), buffers_(std::move(other.buffers_)) {
    other.buffers_.clear();
  }
  workspace_pool& operator=(workspace_pool&& other) noexcept {
    if (this != &other) {
      release_all();
      bytes_ = other.bytes_;
      allocator_ = std::move(other.allocator_);
      buffers_ = std::move(other.buffers_);
      other.buffers_.clear();
    }
    return *this;
  }
  ~workspace_pool() { release_all(); }

  // The buffer of `stream`, allocated on its first use. Empty when bytes_per_stream is 0.
  workspace for_stream(std::uint64_t stream) {
    if (bytes_ == 0) return {};
    const auto found = buffers_.find(stream);
    if (found != buffers_.end()) return {found->second, bytes_};
    void* data = allocator_.allocate(bytes_);
    buffers_.emplace(stream, data);
    return {data, bytes_};
  }

  // Frees the buffer of a stream that will not be used again (call it before destroying the
  // stream, after its work is done: the buffer is freed at once). A buffer the allocator could not
  // free stays the stream's, and is tried again by the next release and by release_all.
  void release(std::uint64_t stream) noexcept {
    const auto found = buffers_.find(stream);
    if (found == buffers_.end()) return;
    if (allocator_.release(found->second)) buffers_.erase(found);
  }
  // At the pool's end: what cannot be freed even then is left to the process's end.
  void release_all() noexcept {
    for (auto& entry : buffers_) (void)allocator_.release(entry.second);
    buffers_.clear();
  }

  std::size_t bytes_per_stream() const noexcept { return bytes_; }
  std::size_t streams() const noexcept { return buffers_.size(); }

 private:
  std::size_t bytes_;
  Allocator allocator_;
  std::unordered_map<std::uint64_t, void*> buffers_;
};

}  // namespace fp8::cublaslt

// fp8 — the buffers of a collective given up on, kept for the rest of the program.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace fp8::distributed::detail {

// MPI cannot cancel a collective, and an NCCL kernel runs until its communicator is aborted: a call
// that stops waiting (its deadline passed, or it failed) leaves its buffers in MPI's or the device's
// use, and a rank that hangs may still join later and complete it, at any time, even while the
// program ends. Buffers whose owner goes (an object destroyed, a constructor that throws) are handed
// here: never freed, but still reachable, so that leak checkers do not report them.
template <class T>
void keep_until_exit(std::unique_ptr<T> buffers) noexcept {
  static auto* mutex = new std::mutex();
  static auto* kept = new std::vector<std::shared_ptr<void>>();
  try {
    const std::lock_guard<std::mutex> lock(*mutex);
    kept->emplace_back();                                      // if this throws, the buffers are still ours
    kept->back() = std::shared_ptr<void>(std::move(buffers));  // and if this does (no effect), too
  } catch (...) {  // no memory to keep them by: leaked, which is just as safe
    (void)buffers.release();
  }
}

}  // namespace fp8::distributed::detail

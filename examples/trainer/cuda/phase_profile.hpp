// Where a training step's GPU time goes: CUDA events recorded on the stream at the boundaries of
// its phases (the linear layers' casts and their GEMMs, the float <-> BF16 copies around them, attention,
// each kind of other layer, the optimizer), summed per phase. A host header: no kernels, no nsys needed.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <vector>

#include <fp8/cuda/error.hpp>

namespace trainer::cuda {

enum class phase : int {
  linear_casts,  // fp8::cuda::linear_layer's own kernels: FP8 casts (with their transposes), amaxes
  linear_gemms,  // the linear layers' products (cuBLASLt; cuBLAS in fp32 runs)
  staging,       // float <-> BF16 copies of linear-layer operands and results
  attention,     // attention forward and backward (head split/merge, RoPE, products, softmax)
  norms,         // RMSNorm forward and backward (input and weight gradients)
  activation,    // SwiGLU (transformer) or GELU (MLP), forward and backward
  residual,      // the residual adds
  embedding,     // lookup and scatter-add
  loss,          // softmax, cross-entropy and the logits' gradient
  other,         // the rest: input copies, clearing gradients and the producers' amax slots
  optimizer,     // gradient norm, clipping, AdamW, compute copy, amax histories
};
inline constexpr std::size_t phase_count = 11;
inline const char* phase_name(phase p) {
  constexpr std::array<const char*, phase_count> names{"linear: casts and amaxes",
                                                       "linear: GEMMs",
                                                       "float<->BF16 staging",
                                                       "attention",
                                                       "RMSNorm",
                                                       "SwiGLU / GELU",
                                                       "residual add",
                                                       "embedding",
                                                       "loss (softmax + cross-entropy)",
                                                       "other",
                                                       "optimizer"};
  return names[std::size_t(p)];
}

class phase_profile {
 public:
  explicit phase_profile(cudaStream_t stream) : stream_(stream) {}
  ~phase_profile() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);  // errors ignored: a destructor must not throw
  }
  phase_profile(const phase_profile&) = delete;
  phase_profile& operator=(const phase_profile&) = delete;

  // Ends the running phase here (in stream order) and starts `next`.
  void mark(phase next) { record(int(next)); }
  // Ends the running phase; the time until the next mark() counts nowhere.
  void stop() { record(idle); }
  // Waits for the stream and adds each closed interval to its phase; forgets the marks.
  void collect() {
    stop();
    FP8_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (std::size_t i = 0; i + 1 < used_; ++i) {
      if (phases_[i] == idle) continue;
      float ms = 0.0f;
      FP8_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
      totals_[std::size_t(phases_[i])] += double(ms);
    }
    used_ = 0;
    phases_.clear();
  }
  double milliseconds(phase p) const { return totals_[std::size_t(p)]; }
  void reset() { totals_.fill(0.0); }

 private:
  static constexpr int idle = -1;

  // An event here; the interval it opens belongs to `next` (or to no phase: idle).
  void record(int next) {
    if (used_ == events_.size()) {
      cudaEvent_t e = nullptr;
      FP8_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    FP8_CUDA_CHECK(cudaEventRecord(events_[used_++], stream_));
    phases_.push_back(next);
  }

  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;  // a pool, reused every step
  std::size_t used_ = 0;
  std::vector<int> phases_;  // phases_[i] runs from events_[i] to events_[i + 1] (idle: none)
  std::array<double, phase_count> totals_{};
};

}  // namespace trainer::cuda

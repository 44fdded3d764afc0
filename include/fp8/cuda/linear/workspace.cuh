// fp8::cuda::linear_workspace: device memory for the FP8 copies that linear layers use only within
// one call (workspace_layout.hpp says which), shared by the layers of a model that run one after
// another on one stream. Without it each layer holds its own; with it a model holds them once, for
// its largest layer: at 4 blocks of d_model 4096 and SwiGLU 14336 with 4096 tokens, 235 MB instead
// of 2.0 GB.
//
//   std::size_t bytes = 0;
//   for (const auto& c : configs) bytes = std::max(bytes, fp8::cuda::linear_workspace_bytes(c));
//   fp8::cuda::linear_workspace shared(bytes);
//   fp8::cuda::linear_layer layer(config, scaling, index, lt, &shared);  // for each layer
//
// The rules: the layers that share a workspace run on one stream, the same cudaStream_t value in
// every call (a call on another is refused), and so do the producers that write into their
// fp8_input targets (the layer cannot see a producer's stream); codes a producer writes there must
// be taken by that layer's next call, with no other sharing layer's call in between (the call that
// takes them refuses otherwise); one host thread drives them. A layer's copy() of a shared copy
// reads what the last call of any sharing layer left there.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "../delayed_scaling.cuh"
#include "workspace_layout.hpp"

namespace fp8::cuda {

class linear_workspace {
 public:
  explicit linear_workspace(std::size_t bytes) : memory_(bytes) {}
  linear_workspace(const linear_workspace&) = delete;
  linear_workspace& operator=(const linear_workspace&) = delete;

  std::uint8_t* data() const noexcept { return memory_.data(); }
  std::size_t size() const noexcept { return memory_.size(); }

  // For the layers (linear_layer uses these; a program need not).
  workspace_claims& claims() noexcept { return claims_; }
  // A call of a sharing layer on `stream`: the first call fixes the stream, and a call on another
  // is refused, since nothing would order its use of the memory against the other layers'.
  void use_on(cudaStream_t stream, const char* function) {
    if (!stream_known_) {
      stream_ = stream;
      stream_known_ = true;
      return;
    }
    if (stream != stream_) {
      throw invalid_argument(std::string(function) +
                             ": this layer shares a linear_workspace whose layers run on another stream; "
                             "layers that share one must run on one stream (or each have its own)");
    }
  }

 private:
  detail::device_array<std::uint8_t> memory_;
  workspace_claims claims_;
  cudaStream_t stream_ = nullptr;
  bool stream_known_ = false;
};

}  // namespace fp8::cuda

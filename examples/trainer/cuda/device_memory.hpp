// What the trainer's device buffers hold, and what a failed allocation tells the user. A run that
// does not fit the GPU fails at the first cudaMalloc that finds no room; the bare runtime error
// ("out of memory") says neither how much was asked nor how much the run already holds, which is
// what a user needs to pick a smaller --batch or model. Host code: no CUDA call here.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <string>

namespace trainer::cuda {

// Bytes held by this process's live device_buffers: the trainer's own buffers (parameters,
// activations, workspaces it allocates, the fused attention's cuDNN workspace). Not counted: the
// linear layers' FP8 copies (fp8::cuda::linear_layer allocates them itself; in fp8 runs a byte per
// weight for each of W and Wᵀ and Xᵀ per layer, and the short-lived X and dY copies once, in the
// workspace the layers share: linear_memory), cuBLAS's, cuBLASLt's and cuDNN's own workspaces, and
// the CUDA context: the device's "in use" figure includes them.
inline std::atomic<std::size_t>& buffer_bytes_held() {
  static std::atomic<std::size_t> bytes{0};
  return bytes;
}

// "512.0 MiB", "1.50 GiB": binary units, three significant digits or so.
inline std::string binary_size(std::size_t bytes) {
  const double mib = double(bytes) / double(1u << 20);
  char text[32];
  if (mib < 1024.0) {
    std::snprintf(text, sizeof(text), "%.1f MiB", mib);
  } else {
    std::snprintf(text, sizeof(text), "%.2f GiB", mib / 1024.0);
  }
  return text;
}

// The reason of an allocation the device could not serve: the request beside what this process's
// buffers hold and what the device has (free and total as cudaMemGetInfo said; both 0 when even
// that failed).
inline std::string out_of_memory_reason(std::size_t requested, std::size_t held, std::size_t free,
                                        std::size_t total) {
  std::string reason = "the GPU is out of memory: " + binary_size(requested) +
                       " asked while the trainer's buffers hold " + binary_size(held);
  if (total > 0) reason += " and the device has " + binary_size(free) + " free of " + binary_size(total);
  return reason;
}

// What the linear layers hold beside the trainer's buffers: each layer's own FP8 copies (with
// their scales and scratch) and the workspace they share (device_linears::memory). `layers` false:
// a run without layer objects (fp32 runs: cuBLAS products).
struct linear_memory {
  bool layers = false;
  std::size_t own = 0;
  std::size_t shared = 0;
};

// The run's line of what it holds on the device, after its model is built.
inline std::string memory_summary(std::size_t held, const linear_memory& linears, std::size_t free,
                                  std::size_t total) {
  std::string line = binary_size(held) + " in the trainer's buffers; ";
  if (linears.layers) {
    line += binary_size(linears.own + linears.shared) + " in the linear layers' FP8 copies (" +
            binary_size(linears.shared) + " of them shared); ";
  }
  return line + binary_size(total - free) + " of " + binary_size(total) + " in use on the device";
}

}  // namespace trainer::cuda

// Causal attention through cuDNN's fused scaled-dot-product attention (flash attention: the T x T
// scores and probabilities stay on the chip, never in memory), forward and backward, on BF16 q, k, v
// read in place from the token layout of the QKV projection. The materialised attention
// (attention.hpp) keeps the T x T matrices instead: it is the FP32 path and the reference; this one is
// the fast path of bf16 and fp8 runs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "../attention.hpp"

namespace trainer::cuda {

// True where this program was built with cuDNN and its frontend (cmake/fp8_cudnn.cmake).
bool cudnn_attention_built();
// "cuDNN 9.19.0 (frontend 1.32.0)": the library loaded at run time and the headers built against.
std::string cudnn_attention_versions();
// Lowers `shape`'s forward and backward graphs for an H100 (sm_90) without a device: as far as cuDNN
// goes without a GPU driver (validation of the graphs and their lowering to cuDNN's operation graph;
// choosing and compiling kernels needs the driver), and a check that each lowered graph's tensors
// are those of the variant pack forward() or backward() passes (uids, layouts, data types). Returns
// "" or the stage and the reason, so that a machine without a GPU checks that the graphs are well
// formed, fit the addresses they will get, and the shape is one cuDNN takes.
std::string cudnn_attention_lowering_error(const attention_shape& shape);
// One stage further: the lowered graphs through cuDNN's heuristics for the H100 and its support check
// of the engines they list (strides, layouts, the deterministic backward), still without a device and
// without compiling a kernel. cuDNN's heuristics load the driver library (libcuda) for this, though no
// GPU: the toolkit's stub of it is enough. Returns "" or the stage and cuDNN's reason.
std::string cudnn_attention_support_error(const attention_shape& shape);

class cudnn_attention {
 public:
  // Builds the forward and backward graphs for `shape` (causal mask, scale 1 / sqrt(D), FP32
  // softmax and accumulation, deterministic backward) on the current device and picks their kernels.
  // On Hopper the deterministic backward keeps dP as BF16 in the workspace (about B * H * T * T * 2
  // bytes, allocated here once): the one T x T buffer of this path.
  // Throws fp8::error with cuDNN's reason when this build has no cuDNN or cuDNN has no kernel for the
  // device or the shape (for example a head dimension that is not a multiple of 8).
  explicit cudnn_attention(const attention_shape& shape);
  ~cudnn_attention();
  cudnn_attention(const cudnn_attention&) = delete;
  cudnn_attention& operator=(const cudnn_attention&) = delete;

  const attention_shape& shape() const;
  // The bytes of device workspace the two graphs share (the larger of their two needs).
  std::size_t workspace_bytes() const;

  // Layouts (BF16, raw bits): q, k, v point at the first, second and third C-wide part of [B, T, 3C]
  // rows (head h of token t at column h * D of its part); o and d_o are [B, T, C] rows.
  // forward: o = softmax(causal(q k^T / sqrt(D))) v, and stats: [B, H, T] each row's log-sum-exp of
  // its scaled scores (the row's maximum plus the natural log of the sum of exp(score - maximum)),
  // which the backward pass needs. Queued on `stream`; the pointers must stay valid until it has run.
  // Both graphs share one cuDNN handle and one workspace: calls on different streams must be ordered
  // (the trainer queues all of them on its one stream).
  void forward(std::uint16_t* o, float* stats, const std::uint16_t* q, const std::uint16_t* k,
               const std::uint16_t* v, cudaStream_t stream);

  // dq, dk, dv (in the layout of q, k, v) from the forward pass's q, k, v, o, stats and the output
  // gradient d_o. Bit-identical from run to run (cuDNN's deterministic algorithm).
  void backward(std::uint16_t* dq, std::uint16_t* dk, std::uint16_t* dv, const std::uint16_t* q,
                const std::uint16_t* k, const std::uint16_t* v, const std::uint16_t* o,
                const std::uint16_t* d_o, const float* stats, cudaStream_t stream);

 private:
  struct graphs;  // cuDNN's headers stay in the .cpp file
  std::unique_ptr<graphs> graphs_;
};

}  // namespace trainer::cuda

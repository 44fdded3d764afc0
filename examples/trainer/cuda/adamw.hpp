// The parameters on the device (master weights, compute copy, gradients, AdamW moments in the CPU
// layout of ../parameters.hpp), and AdamW with gradient-norm clipping over them (../adamw.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "../adamw.hpp"
#include "../parameters.hpp"
#include "../precision.hpp"
#include "device_buffer.hpp"

namespace trainer::cuda {

// Which of the five buffers device_parameters::download copies (the moments are both).
struct parameter_buffers {
  bool master = true;
  bool compute = true;
  bool grad = true;
  bool moments = true;
};

// The five parallel buffers of a parameter_set on the device, with its tensor layout.
class device_parameters {
 public:
  // Allocates the buffers for `layout`'s tensors and copies all five buffers from it.
  explicit device_parameters(const parameter_set& layout);

  // Synchronous copies between the device and a parameter_set of the same layout: upload copies all
  // five buffers from it, download those `which` names into it, leaving its others as they are (a
  // checkpoint saves and loads the host copy, so a run resumes on either device; it needs the master
  // weights and the moments only).
  void upload(const parameter_set& host);
  void download(parameter_set& host, parameter_buffers which = {}) const;

  std::size_t size() const { return master.size(); }
  const std::vector<tensor_spec>& specs() const { return specs_; }
  std::size_t offset(std::size_t tensor) const { return offsets_[tensor]; }

  // compute = master, rounded to BF16 when compute_storage is bf16 (after every optimizer step).
  void refresh_compute(storage compute_storage, cudaStream_t stream);

  device_buffer<float> master;          // FP32 master weights           [size()]
  device_buffer<float> compute;         // weights as the GEMMs read them [size()]
  device_buffer<float> grad;            // FP32 gradients                 [size()]
  device_buffer<float> adam_m;          // AdamW first moment             [size()]
  device_buffer<float> adam_v;          // AdamW second moment            [size()]
  device_buffer<double> norm_partials;  // [norm_blocks + 1] scratch of gradient_norm

 private:
  void check_layout(const parameter_set& host, const char* function) const;

  std::vector<tensor_spec> specs_;
  std::vector<std::size_t> offsets_;
};

// Blocks of the gradient norm's first pass: a constant, so the summation order (and the norm's last
// bits) is the same on every device. 1024 blocks of 256 threads keep about as many loads in flight as
// the element-wise kernels' grids (8 blocks per SM: 1056 on an H100), which the pass needs to read
// the gradients at the memory's bandwidth; 256 blocks filled a quarter of an H100's thread slots.
inline constexpr int norm_blocks = 1024;

// The L2 norm of all gradients, the squares summed in double (per thread, then per block, then over
// the blocks, all in a fixed order). Waits for `stream` to read the result back.
double gradient_norm(device_parameters& params, cudaStream_t stream);

// Scales all gradients by max_norm / norm when norm > max_norm (max_norm <= 0 disables clipping).
// The optimizer step clips inside adamw_update instead (adamw_fusion); this separate pass is what
// that fused one is checked against.
void clip_gradients(device_parameters& params, double norm, double max_norm, cudaStream_t stream);

// What an AdamW update also does in its one pass over the parameters, each bit-identical to the
// separate pass it replaces: the gradients it reads multiplied by `clip_factor` first
// (clip_gradients' product, made in registers: the gradient buffer keeps the unclipped values), and
// each new weight, as compute_storage stores it, written into the compute copy (refresh_compute)
// and/or into `weights16`, its BF16 copy (to_bf16 of the compute copy), as it is written. The step
// then reads and writes the parameters once: apart, the clipping, the update, the compute copy and
// its BF16 copy each go over them again. A model whose layers read only the BF16 copy of most
// tensors writes just that, and widens the few tensors it reads as floats afterwards
// (device_model::weights_updated).
struct adamw_fusion {
  std::optional<float> clip_factor;  // ../adamw.hpp's clip_factor; none: no clipping
  bool refresh_compute = false;
  storage compute_storage = storage::fp32;
  std::uint16_t* weights16 = nullptr;  // [size()]; null: none
};

// One AdamW update at step `step` (0-based; bias correction uses step + 1), the CPU layer's formula
// in its order, each operation rounded once (no FMA contraction):
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
//   w -= lr * (m / (1 - b1^(t)) / (sqrt(v / (1 - b2^(t))) + eps) + wd * w),
// with what `fused` adds to the same pass.
void adamw_update(device_parameters& params, const adamw_options& options, float learning_rate, long step,
                  cudaStream_t stream, const adamw_fusion& fused = {});

}  // namespace trainer::cuda

// The scaling state of a group of FP8 linear layers: one delayed-scaling device state with a slot
// per GEMM operand of every layer, and end_step(), the one place per step where the amax reducer
// runs (once, on every layer's amaxes) and the histories roll.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/linear/scaling.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../../scaling/amax_reducer.hpp"
#include "../../scaling/gemm_operand.hpp"
#include "../../scaling/recipe.hpp"
#include "../delayed_scaling.cuh"
#include "../error.hpp"

namespace fp8::cuda {

// Slot (layer, operand) is tensor layer * 6 + operand of state(): amax(slot) is where the casts of
// that operand record this step's amax (delayed and current operands alike, so that a later switch
// of an operand to delayed scaling starts from a warm history), scale(slot) the delayed scale.
class linear_scaling {
 public:
  // `recipe` gives each slot's format and the history configuration (recipe.delayed()). `reducer`
  // (may be null: one process) makes amaxes agree across ranks; it must outlive this object.
  linear_scaling(const gemm_recipe& recipe, std::size_t layers, amax_reducer* reducer = nullptr)
      : layers_(layers), reducer_(reducer), state_(recipe.delayed(), formats(recipe, layers)) {}
  // With a device-side reducer (e.g. fp8::distributed::nccl_amax_reducer), which end_step() queues on
  // the step's stream without waiting for it; it must outlive this object.
  linear_scaling(const gemm_recipe& recipe, std::size_t layers, device_amax_reducer& reducer)
      : layers_(layers), device_reducer_(&reducer), state_(recipe.delayed(), formats(recipe, layers)) {}

  std::size_t layers() const noexcept { return layers_; }
  std::size_t slot(std::size_t layer, gemm_operand operand) const {
    if (layer >= layers_) {
      throw invalid_argument("fp8::cuda::linear_scaling: layer " + std::to_string(layer) + " out of range (" +
                             std::to_string(layers_) + " layers)");
    }
    return layer * gemm_operand_count + std::size_t(operand);
  }
  delayed_scaling_device_state& state() noexcept { return state_; }
  const delayed_scaling_device_state& state() const noexcept { return state_; }
  std::uint64_t steps() const noexcept { return steps_; }

  // Ends the step on `stream`, after every forward and backward of it and the optimizer: with a host
  // reducer (fp8::amax_reducer, e.g. MPI), copies the row of current amaxes to the host once the stream
  // is done (the amaxes must be final), hands it to the reducer in one call and copies the result back
  // (an fp8::amax_reducer reads and writes host memory: MPI's would fault on a device pointer); with a
  // device reducer, queues it on the stream. Then rolls every history and makes the next scales in
  // one kernel.
  void end_step(cudaStream_t stream = nullptr) {
    if (reducer_ != nullptr) {
      const std::size_t bytes = state_.tensor_count() * sizeof(float);
      std::vector<float> amaxes(state_.tensor_count());
      FP8_CUDA_CHECK(
          cudaMemcpyAsync(amaxes.data(), state_.current_amaxes(), bytes, cudaMemcpyDeviceToHost, stream));
      FP8_CUDA_CHECK(cudaStreamSynchronize(stream));
      reducer_->reduce_max(amaxes.data(), amaxes.size());
      FP8_CUDA_CHECK(
          cudaMemcpyAsync(state_.current_amaxes(), amaxes.data(), bytes, cudaMemcpyHostToDevice, stream));
      FP8_CUDA_CHECK(cudaStreamSynchronize(stream));  // before `amaxes` (pageable) goes away
    }
    if (device_reducer_ != nullptr) {
      state_.update(*device_reducer_, stream);  // the reduction, then the update, in order on the stream
    } else {
      state_.update(stream);
    }
    ++steps_;
  }

 private:
  static std::vector<fp8_format> formats(const gemm_recipe& recipe, std::size_t layers) {
    std::vector<fp8_format> out;
    out.reserve(layers * gemm_operand_count);
    for (std::size_t layer = 0; layer < layers; ++layer) {
      for (std::size_t op = 0; op < gemm_operand_count; ++op)
        out.push_back(recipe[gemm_operand(op)].quant.format);
    }
    return out;
  }

  std::size_t layers_;
  amax_reducer* reducer_ = nullptr;
  device_amax_reducer* device_reducer_ = nullptr;
  delayed_scaling_device_state state_;
  std::uint64_t steps_ = 0;
};

}  // namespace fp8::cuda

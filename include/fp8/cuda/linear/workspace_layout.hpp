// Host code: which FP8 copies of a linear layer live only within one call, where they go in a
// workspace that the layers of a model share, and the record of which layer last used it.
//
// A layer's X row-major copy (fprop's operand) is made and read within one forward; its dY copies
// (dgrad's row-major one, wgrad's transposed one) within one backward; and the row-major copy that a
// transposed-only cast writes and nobody reads (the scratch) within the call that casts. Held per
// layer, they cost each layer its max_tokens x width bytes whole training long, while only one layer
// runs at a time. X's transposed copy (read by the backward), W's copies (kept across calls), the
// inverse scales, the fake_fp8 decodes and the statistics' scratch copies stay each layer's own.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "../../scaling/granularity.hpp"
#include "plan.hpp"

namespace fp8::cuda {

// Byte offsets of a layer's transient copies in a shared workspace (per linear_tensor; `none`
// where the copy is not made or not shared), and the bytes the layer needs of the workspace. X's
// and dY's copies start at the same offset: they are never live in the same call.
struct workspace_layout {
  static constexpr std::size_t none = ~std::size_t(0);
  std::array<std::size_t, 3> row{none, none, none};
  std::array<std::size_t, 3> transposed{none, none, none};
  std::array<std::size_t, 3> scratch{none, none, none};
  std::size_t bytes = 0;
};

// Every copy starts on a 256-byte boundary (cuBLASLt needs 16 for an FP8 operand; 256 keeps the
// copies' starts as cudaMalloc's would be).
inline constexpr std::size_t workspace_alignment = 256;

// The layout of the transient copies that `plan` (the layer's plan at max_tokens, training pass,
// which every other call's copies fit in) makes, in the order row, transposed (dY's only), scratch.
inline workspace_layout make_workspace_layout(const linear_plan& plan) {
  workspace_layout out;
  for (const linear_tensor tensor : {linear_tensor::x, linear_tensor::dy}) {
    const cast_plan& c = plan.cast(tensor);
    const std::size_t elements = std::size_t(c.rows) * std::size_t(c.cols);
    const std::size_t copy = fp8::detail::round_up(elements, workspace_alignment);
    const std::size_t t = std::size_t(tensor);
    std::size_t at = 0;
    if (c.row_major) {
      out.row[t] = at;
      at += copy;
    }
    if (c.transposed && tensor == linear_tensor::dy) {
      out.transposed[t] = at;
      at += copy;
    }
    if (c.transposed && !c.fused) {
      out.scratch[t] = at;
      at += copy;
    }
    out.bytes = std::max(out.bytes, at);
  }
  return out;
}

// The bytes of shared workspace a layer of `config` needs; a workspace for several layers needs
// the largest of theirs.
inline std::size_t linear_workspace_bytes(const linear_config& config) {
  return make_workspace_layout(make_linear_plan(config, config.max_tokens)).bytes;
}

// Which layer used a shared workspace last, and for which tensor. A producer writes a layer's codes
// into the workspace (fp8_input) before the call that takes them; a call of another layer in
// between overwrites them, and the call that then takes them must refuse rather than read another
// layer's codes. Host state, so the check costs no device work.
class workspace_claims {
 public:
  // A number for a new member (a layer), never 0.
  std::uint64_t enroll() noexcept { return ++members_; }
  void claim(std::uint64_t member, linear_tensor tensor) noexcept {
    holder_ = member;
    tensor_ = tensor;
  }
  bool held_by(std::uint64_t member, linear_tensor tensor) const noexcept {
    return holder_ == member && tensor_ == tensor;
  }

 private:
  std::uint64_t members_ = 0;
  std::uint64_t holder_ = 0;  // 0: nobody yet
  linear_tensor tensor_ = linear_tensor::x;
};

}  // namespace fp8::cuda

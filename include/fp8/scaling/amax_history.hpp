// A window of recent amaxes of one tensor, with Transformer Engine's update order: casts during a
// step fold their amax into the current slot; after the step the window is read, then rolled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../error.hpp"
#include "scale.hpp"

namespace fp8 {

// How a window of amaxes becomes the amax a scale is computed from.
enum class amax_algorithm : std::uint8_t {
  max = 0,          // the largest amax in the window (Transformer Engine's default)
  most_recent = 1,  // the amax of the step that just ended
};

constexpr bool is_valid(amax_algorithm a) noexcept {
  return a == amax_algorithm::max || a == amax_algorithm::most_recent;
}

// The amaxes of the last `length` steps of one tensor, the current step included (slot "0 steps ago").
// A value type: copy it, compare it, store it in a vector.
//
// Step N:  record(amax) for each cast of the tensor in step N   (folds into at(0) with a NaN-dominant max)
//          window_amax(algorithm)                               (amaxes of steps N-length+1 .. N)
//          roll()                                               (step N+1 starts with at(0) = 0)
// So the scale used during step N+1 derives from amaxes up to step N. An amax of NaN or Inf is
// recorded as it is (the history tells the truth); scale_from_amax then keeps the previous scale
// while it is in the window (see docs/scaling.md).
class amax_history {
 public:
  static constexpr std::size_t default_length = 1024;  // Transformer Engine's amax_history_len

  explicit amax_history(std::size_t length = default_length) : values_(checked_length(length), 0.0f) {}

  // A history from stored values, newest first: values[0] is the current step, values[k] k steps ago.
  // Throws fp8::invalid_argument on an empty vector or a negative value. Every value is stored as
  // record and set_current store it: -0 as +0, every NaN as the canonical quiet NaN.
  static amax_history from_values(const std::vector<float>& newest_first) {
    amax_history history(newest_first.size());
    for (std::size_t k = 0; k < newest_first.size(); ++k) {
      history.values_[k] = checked_amax(newest_first[k]);  // head_ is 0: slot k holds "k steps ago" ...
    }
    // ... once the order is reversed into the ring: at(k) reads values_[(head_ + length - k) % length].
    history.reverse_into_ring();
    return history;
  }

  std::size_t length() const noexcept { return values_.size(); }

  // Folds an amax of the current step into the window: the slot keeps the larger (NaN over Inf over
  // finite), so a tensor cast several times in one step (micro-batches) records its largest amax.
  // Throws fp8::invalid_argument on a negative amax (an amax is |x|), leaving the history as it was.
  void record(float amax) { values_[head_] = detail::amax_max(values_[head_], checked_amax(amax)); }

  // Replaces the current step's amax (used after an amax reduction across ranks).
  void set_current(float amax) { values_[head_] = checked_amax(amax); }

  float current() const noexcept { return values_[head_]; }

  // The amax `steps_ago` steps back (0 = current step); precondition steps_ago < length().
  float at(std::size_t steps_ago) const noexcept {
    return values_[(head_ + values_.size() - steps_ago % values_.size()) % values_.size()];
  }

  // The amax a new scale is computed from: the window maximum or the current step's amax.
  float window_amax(amax_algorithm algorithm) const noexcept {
    if (algorithm == amax_algorithm::most_recent) return current();
    float amax = 0.0f;
    for (const float value : values_) amax = detail::amax_max(amax, value);
    return amax;
  }

  // Ends the step: the oldest amax leaves the window and the new current slot starts at 0.
  void roll() noexcept {
    head_ = (head_ + 1) % values_.size();
    values_[head_] = 0.0f;
  }

  // The window, newest first (what checkpoints store).
  std::vector<float> newest_first() const {
    std::vector<float> out(values_.size());
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = at(k);
    return out;
  }

  // Equal windows (bitwise on the values, so NaN entries compare equal to themselves).
  friend bool operator==(const amax_history& a, const amax_history& b) {
    if (a.length() != b.length()) return false;
    for (std::size_t k = 0; k < a.length(); ++k) {
      if (detail::bit_cast<std::uint32_t>(a.at(k)) != detail::bit_cast<std::uint32_t>(b.at(k))) return false;
    }
    return true;
  }
  friend bool operator!=(const amax_history& a, const amax_history& b) { return !(a == b); }

 private:
  static std::size_t checked_length(std::size_t length) {
    if (length == 0) throw invalid_argument("fp8::amax_history: the length must be at least 1");
    return length;
  }
  // An amax as the window holds it: an absolute value has no sign, so -0 is stored as +0 and every NaN
  // as the canonical quiet NaN, as record's maximum stores them. The device state holds the same
  // bits: a slot holding -0's bits (0x80000000) would stay above every amax that a device cast folds
  // in with its integer atomicMax, and the step's amax would be lost.
  static float checked_amax(float amax) {
    if (amax < 0.0f) {
      throw invalid_argument("fp8::amax_history: an amax is an absolute value and cannot be negative; got " +
                             std::to_string(amax));
    }
    return detail::canonical_amax(amax);
  }
  // values_ holds newest-first order with head_ 0; the ring wants slot (length - k) % length for k.
  void reverse_into_ring() {
    std::vector<float> ring(values_.size());
    for (std::size_t k = 0; k < values_.size(); ++k) ring[(values_.size() - k) % values_.size()] = values_[k];
    values_.swap(ring);
    head_ = 0;
  }

  std::vector<float> values_;  // a ring: the current step at head_, k steps ago at head_ - k
  std::size_t head_ = 0;
};

}  // namespace fp8

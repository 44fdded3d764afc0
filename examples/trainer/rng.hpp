// The trainer's random numbers: xoshiro256** with its whole state in four 64-bit words, so that a
// checkpoint can store it and a resumed run draws exactly the numbers the uninterrupted run would.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace trainer {

class rng {
 public:
  using state_type = std::array<std::uint64_t, 4>;

  // Seeds the four words through splitmix64, as the xoshiro authors recommend (an all-zero state
  // would be a fixed point).
  explicit rng(std::uint64_t seed = 0) {
    for (auto& word : state_) {
      seed += 0x9E3779B97F4A7C15ull;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      word = z ^ (z >> 31);
    }
  }

  std::uint64_t next_u64() {
    const std::uint64_t result = rotate_left(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotate_left(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(next_u64() >> 11) * (1.0 / double(std::uint64_t(1) << 53)); }

  // Uniform integer in [0, n) for 0 < n < 2^53 (the bias of scaling a 53-bit fraction is < 2^-20
  // for any n the trainer uses, far below anything a shuffle could show).
  std::uint64_t below(std::uint64_t n) {
    const auto value = std::uint64_t(uniform() * double(n));
    return value < n ? value : n - 1;
  }

  // Standard normal by Box-Muller (one value per call, so the sequence depends on nothing hidden).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
    const double u2 = uniform();
    constexpr double two_pi = 6.283185307179586476925286766559;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
  }

  const state_type& state() const { return state_; }
  void set_state(const state_type& state) { state_ = state; }

 private:
  static std::uint64_t rotate_left(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  state_type state_{};
};

}  // namespace trainer

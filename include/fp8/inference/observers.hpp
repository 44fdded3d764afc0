// Calibration observers: they watch the activations a layer sees on calibration text and turn what
// they saw into one static FP8 scale. Three rules, as in post-training quantization toolkits:
//  - max_observer:        the running max |x| (no clipping);
//  - histogram_observer:  a histogram of |x|, from which a percentile (clip the rarest outliers) or
//                         the clipping threshold with the least quantization MSE is read.
// A static scale is scale_from_amax(clip, format, margin): values above the clip saturate.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../error.hpp"
#include "../quantize.hpp"
#include "../scaling/scale.hpp"

namespace fp8 {
namespace inference {

namespace detail {
// Observers refuse NaN and Inf: a calibration batch with them would make every later scale useless.
inline void check_finite_amax(float amax, const char* who) {
  if (!std::isfinite(amax)) {
    throw invalid_argument(std::string(who) +
                           ": the observed tensor holds NaN or Inf; calibrate on finite activations");
  }
}
}  // namespace detail

// The running maximum of |x| over everything observed (vectorised through fp8::compute_amax).
class max_observer {
 public:
  void observe(const float* x, std::size_t count) {
    const float amax = fp8::compute_amax(x, count);
    detail::check_finite_amax(amax, "fp8::inference::max_observer::observe");
    amax_ = std::max(amax_, amax);
    count_ += count;
  }
  float amax() const { return amax_; }
  std::size_t count() const { return count_; }
  // The static scale that maps the observed amax to the format's largest value (1 if nothing seen).
  float scale(fp8_format format = fp8_format::e4m3, int margin = 0) const {
    return scale_from_amax(amax_, format, margin, false, 1.0f);
  }

 private:
  float amax_ = 0.0f;
  std::size_t count_ = 0;
};

// A histogram of |x| over [0, range) in `bins` equal bins. The range starts at the first nonzero
// amax rounded up to a power of two and doubles (merging pairs of bins, which keeps every count
// exact) whenever a larger value arrives, so no value is ever dropped or clamped.
class histogram_observer {
 public:
  explicit histogram_observer(std::size_t bins = 2048) : counts_(bins, 0) {
    if (bins < 2 || bins % 2 != 0) {
      throw invalid_argument("fp8::inference::histogram_observer: bins must be even and >= 2; got " +
                             std::to_string(bins));
    }
  }

  void observe(const float* x, std::size_t count) {
    const float amax = fp8::compute_amax(x, count);
    detail::check_finite_amax(amax, "fp8::inference::histogram_observer::observe");
    if (amax > 0.0f) {
      if (range_ == 0.0f) range_ = std::ldexp(1.0f, std::ilogb(amax) + 1);  // > amax, a power of two
      while (amax >= range_) grow();
    }
    amax_ = std::max(amax_, amax);
    const double per_bin = double(counts_.size()) / double(range_ > 0.0f ? range_ : 1.0f);
    const std::size_t last = counts_.size() - 1;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t bin = std::min(last, std::size_t(double(std::fabs(x[i])) * per_bin));
      ++counts_[bin];
    }
    total_ += count;
  }

  float amax() const { return amax_; }
  std::uint64_t total() const { return total_; }
  float range() const { return range_; }
  float bin_width() const { return range_ / float(counts_.size()); }
  const std::vector<std::uint64_t>& counts() const { return counts_; }

  // The smallest bin edge v with at least `fraction` of the observed |x| at or below it (a value in
  // the bin that crosses the fraction rounds up to the bin's upper edge, never below the true
  // percentile), capped at amax. fraction in (0, 1]; 1 gives amax.
  float percentile(double fraction) const {
    if (!(fraction > 0.0 && fraction <= 1.0)) {
      throw invalid_argument(
          "fp8::inference::histogram_observer::percentile: fraction must be in (0, 1]; got " +
          std::to_string(fraction));
    }
    if (total_ == 0 || fraction == 1.0) return amax_;
    const double wanted = fraction * double(total_);
    std::uint64_t seen = 0;
    for (std::size_t b = 0; b < counts_.size(); ++b) {
      seen += counts_[b];
      if (double(seen) >= wanted) return std::min(amax_, float(b + 1) * bin_width());
    }
    return amax_;
  }

  // The squared error of casting the observed values to `format` with the clip `clip` (scale =
  // fp8_max / clip), estimated with every value at its bin's centre: sum_b count_b (c_b - q(c_b))^2.
  // The casts go through the library's vectorised quantize/dequantize.
  double clipping_error(float clip, fp8_format format = fp8_format::e4m3) const {
    if (!(clip > 0.0f) || !std::isfinite(clip)) {
      throw invalid_argument(
          "fp8::inference::histogram_observer::clipping_error: clip must be positive and finite");
    }
    const std::vector<float> centres = bin_centres();
    std::vector<std::uint8_t> codes(centres.size());
    std::vector<float> back(centres.size());
    const float scale = scale_from_amax(clip, format);
    fp8::cast_to_fp8(centres.data(), centres.size(), format, codes.data(), scale);
    fp8::dequantize(codes.data(), codes.size(), format, 1.0f / scale, back.data());
    double error = 0.0;
    for (std::size_t b = 0; b < centres.size(); ++b) {
      const double d = double(centres[b]) - double(back[b]);
      error += double(counts_[b]) * d * d;
    }
    return error;
  }

  // The clip with the least clipping_error among `candidates` evenly spaced values in
  // (amax / candidates ... amax] (ties go to the larger clip). amax itself is always a candidate,
  // so the result never does worse than no clipping on this estimate.
  float mse_optimal_clip(fp8_format format = fp8_format::e4m3, int candidates = 128) const {
    if (candidates < 1)
      throw invalid_argument("fp8::inference::histogram_observer::mse_optimal_clip: candidates must be >= 1");
    if (amax_ == 0.0f) return 0.0f;
    float best_clip = amax_;
    double best_error = clipping_error(amax_, format);
    for (int k = candidates - 1; k >= 1; --k) {
      const float clip = amax_ * float(k) / float(candidates);
      const double error = clipping_error(clip, format);
      if (error < best_error) {
        best_error = error;
        best_clip = clip;
      }
    }
    return best_clip;
  }

  std::vector<float> bin_centres() const {
    std::vector<float> centres(counts_.size());
    for (std::size_t b = 0; b < counts_.size(); ++b) centres[b] = (float(b) + 0.5f) * bin_width();
    return centres;
  }

 private:
  void grow() {
    const std::size_t half = counts_.size() / 2;
    for (std::size_t b = 0; b < half; ++b) counts_[b] = counts_[2 * b] + counts_[2 * b + 1];
    std::fill(counts_.begin() + std::ptrdiff_t(half), counts_.end(), 0);
    range_ *= 2.0f;
  }

  std::vector<std::uint64_t> counts_;
  float range_ = 0.0f;
  float amax_ = 0.0f;
  std::uint64_t total_ = 0;
};

// How a static activation scale is read from a histogram.
enum class calibration_method { max, percentile, mse };

inline const char* to_string(calibration_method method) {
  switch (method) {
    case calibration_method::max: return "max";
    case calibration_method::percentile: return "percentile";
    case calibration_method::mse: return "mse";
  }
  return "?";
}

// The clip a method picks from a histogram (`fraction` is read only by the percentile method).
inline float calibrated_clip(const histogram_observer& observed, calibration_method method,
                             double fraction = 0.9999, fp8_format format = fp8_format::e4m3) {
  switch (method) {
    case calibration_method::max: return observed.amax();
    case calibration_method::percentile: return observed.percentile(fraction);
    case calibration_method::mse: return observed.mse_optimal_clip(format);
  }
  throw invalid_argument("fp8::inference::calibrated_clip: unknown calibration_method");
}

// The static scale of a clip: fp8_max / clip (1 when nothing nonzero was observed).
inline float static_scale(float clip, fp8_format format = fp8_format::e4m3, int margin = 0) {
  return scale_from_amax(clip, format, margin, false, 1.0f);
}

}  // namespace inference
}  // namespace fp8

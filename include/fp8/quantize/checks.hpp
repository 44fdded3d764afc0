// Argument checks shared by the quantize functions: each failure is an fp8::invalid_argument that
// names the function and the argument, thrown before anything is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "../config.hpp"
#include "../error.hpp"
#include "../float8.hpp"
#include "../scaling/fp8_format.hpp"
#include "../scaling/granularity.hpp"

namespace fp8 {

// The high-precision element types the CPU path reads and writes.
template <class T>
inline constexpr bool is_quantize_element_v =
    std::is_same_v<T, float> || std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

namespace detail {

template <class T>
constexpr void static_check_element() {
  static_assert(is_quantize_element_v<T>,
                "fp8 quantize/dequantize work on float, fp8::bfloat16 or fp8::float16");
}

// Whether `pointer` is a multiple of `bytes`: the vector paths' test on host and device, and the
// cuBLASLt wrapper's alignment checks.
FP8_HOST_DEVICE inline bool is_aligned(const void* pointer, std::size_t bytes) noexcept {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

inline void check_pointer(const void* p, std::size_t count, const char* function, const char* name) {
  if (p == nullptr && count != 0) {
    throw invalid_argument(std::string(function) + ": " + name + " is null but " + std::to_string(count) +
                           " elements were requested");
  }
}

inline void check_format(fp8_format format, const char* function) {
  if (!is_valid(format)) throw invalid_argument(std::string(function) + ": unknown fp8_format value");
}

// rows * cols, or an error if it does not fit in size_t.
inline std::size_t checked_size(std::size_t rows, std::size_t cols, const char* function) {
  if (cols != 0 && rows > std::numeric_limits<std::size_t>::max() / cols) {
    throw invalid_argument(std::string(function) + ": rows x cols (" + std::to_string(rows) + " x " +
                           std::to_string(cols) + ") overflows size_t");
  }
  return rows * cols;
}

inline void check_scale_argument(float scale, const char* function, const char* name) {
  if (!(scale > 0.0f) || !(scale <= std::numeric_limits<float>::max())) {
    throw invalid_argument(std::string(function) + ": " + name + " must be a positive finite float; got " +
                           std::to_string(scale));
  }
}

}  // namespace detail
}  // namespace fp8

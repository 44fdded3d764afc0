// The exception hierarchy of the parts of fp8 that can fail (CUDA calls, cuBLASLt, checkpoints).
// The numeric core never throws.
#pragma once

#include <stdexcept>
#include <string>

namespace fp8 {

// Base of every exception fp8 throws; what() says what failed, where, and usually what to do.
class error : public std::runtime_error {
 public:
  explicit error(const std::string& message) : std::runtime_error(message) {}
};

// Bad arguments detected before any work was done (shapes, alignment, sizes).
class invalid_argument : public error {
 public:
  using error::error;
};

}  // namespace fp8

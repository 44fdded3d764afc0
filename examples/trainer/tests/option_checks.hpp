// What the trainer's option tests share: parsing an argument list as fp8_trainer would, the message
// of the device checks, and a substring test for messages.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "device_options.hpp"
#include "options.hpp"

namespace trainer_tests {

// args without the program name; throws std::invalid_argument as parse_options does.
inline trainer::run_options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "fp8_trainer");
  return trainer::parse_options(int(args.size()), args.data());
}

// The message check_device_options gives for these options, or "" if it accepts them.
inline std::string device_error(std::vector<const char*> args, bool cuda_built = true) {
  const trainer::run_options o = parse(std::move(args));
  try {
    trainer::check_device_options(o, cuda_built);
  } catch (const std::invalid_argument& e) { return e.what(); }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace trainer_tests

// fp8_trainer: the command-line entry point (options in options.cpp, the loop in trainer.cpp).
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "options.hpp"
#include "trainer.hpp"

int main(int argc, char** argv) {
  trainer::run_options options;
  try {
    options = trainer::parse_options(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "fp8_trainer: %s\n", e.what());
    return 2;
  }
  if (options.show_help) {
    std::printf("%s", trainer::help_text().c_str());
    return 0;
  }
  try {
    trainer::training_run run(options);
    run.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nfp8_trainer: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

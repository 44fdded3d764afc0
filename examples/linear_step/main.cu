// fp8_linear_step: a user's own training loop around fp8::cuda::linear_layer (train.cuh), on a GPU.
//
//   fp8_linear_step [--bf16] [--steps N]
//
// Prints the loss every 20 steps and at the end. --bf16 runs the same network with both layers in
// BF16, the baseline FP8 is compared with.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "train.cuh"

namespace {

int usage(const char* problem) {
  std::fprintf(stderr,
               "fp8_linear_step: %s\nusage: fp8_linear_step [--bf16] [--steps N] (N from 1 to 100000)\n",
               problem);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  linear_step::run_options options;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument == "--bf16") {
      options.fp8 = false;
    } else if (argument == "--steps" && i + 1 < argc) {
      char* end = nullptr;
      const long steps = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || steps < 1 || steps > 100000) {
        return usage(
            ("--steps takes a whole number from 1 to 100000, not '" + std::string(argv[i]) + "'").c_str());
      }
      options.steps = int(steps);
    } else {
      return usage(("unknown or incomplete argument '" + argument + "'").c_str());
    }
  }
  try {
    const std::vector<float> losses = linear_step::train(options);
    for (std::size_t step = 1; step <= losses.size(); ++step) {
      if (step == 1 || step % 20 == 0 || step == losses.size()) {
        std::printf("step %zu: loss %.5f\n", step, double(losses[step - 1]));
      }
    }
    std::printf("%s: loss %.5f after %zu steps (first step %.5f)\n", options.fp8 ? "fp8" : "bf16",
                double(losses.back()), losses.size(), double(losses.front()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8_linear_step: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

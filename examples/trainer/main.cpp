// fp8_trainer: the command-line entry point (options in options.cpp, the loop in trainer.cpp).
// Exit codes: 0 success, 1 a failure while running (unreadable checkpoint, failed write, diverged
// training), 2 a usage error (a bad option, or options that do not fit the data or the output
// directory), found before anything large is allocated.
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>

#include "device_options.hpp"
#include "options.hpp"
#include "trainer.hpp"
#ifdef FP8_TRAINER_CUDA
#include "cuda/trainer_cuda.hpp"
#endif

namespace {

constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

// Whatever was printed must have reached stdout: a run whose summary was lost (stdout on a full
// disk) has not succeeded.
int finish_stdout(int code) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "fp8_trainer: error: writing to standard output failed\n");
    return code == 0 ? exit_failure : code;
  }
  return code;
}

#ifdef FP8_TRAINER_CUDA
constexpr bool cuda_built = true;
#else
constexpr bool cuda_built = false;
#endif

// The run on the device --device names (check_device_options has accepted it).
std::unique_ptr<trainer::training_run> make_run(const trainer::run_options& options) {
#ifdef FP8_TRAINER_CUDA
  if (options.device == trainer::device_kind::cuda) return trainer::cuda::make_training_run(options);
#endif
  return std::make_unique<trainer::training_run>(options);
}

}  // namespace

int main(int argc, char** argv) {
  trainer::run_options options;
  try {
    options = trainer::parse_options(argc, argv);
    if (options.show_help) {
      std::printf("%s", trainer::help_text().c_str());
      return finish_stdout(0);
    }
    if (options.show_version) {
      std::printf("%s\n", trainer::version_text().c_str());
      return finish_stdout(0);
    }
    trainer::check_device_options(options, cuda_built);
    trainer::check_output_directory(options);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "fp8_trainer: %s\n", e.what());
    return exit_usage;
  }
  try {
    const std::unique_ptr<trainer::training_run> run = make_run(options);
    run->run();
  } catch (const std::invalid_argument& e) {
    // Options that only the data can refute (a batch larger than the text holds), found before the
    // model is allocated.
    std::fprintf(stderr, "\nfp8_trainer: %s\n", e.what());
    return finish_stdout(exit_usage);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nfp8_trainer: error: %s\n", e.what());
    return finish_stdout(exit_failure);
  }
  return finish_stdout(0);
}

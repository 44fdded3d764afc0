// fp8_trainer: the command-line entry point (options in options.cpp, the loop in trainer.cpp).
// Exit codes: 0 success, 1 a failure while running (unreadable checkpoint, failed write, diverged
// training), 2 a usage error (a bad option, or options that do not fit the data or the output
// directory), found before anything large is allocated.
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>  // mallopt
#endif

#include "device_options.hpp"
#include "options.hpp"
#include "process_group.hpp"
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

// The run on the device --device names (check_device_options has accepted it), as this rank's part
// of the group: on the GPU one rank per GPU, reduced through NCCL (a trainer built without NCCL
// refuses several ranks with a collective_error).
std::unique_ptr<trainer::training_run> make_run(const trainer::run_options& options,
                                                trainer::process_group& group) {
  if (options.device == trainer::device_kind::cuda) {
#ifdef FP8_TRAINER_CUDA
    return trainer::cuda::make_training_run(options, group);
#endif
  }
  return std::make_unique<trainer::training_run>(options, &group);
}

// Every step allocates and frees the same large temporaries (FP8 operand copies, GEMM scratch). By
// default glibc hands the free top of the heap back to the kernel and takes it again at the next step,
// page faults and zeroing included, whenever no small long-lived allocation happens to sit above them:
// a change anywhere in the program can move one and cost a run 10% (measured). Serving blocks below
// 32 MiB (glibc's own upper limit for this) from the heap and keeping up to 1 GiB of it free makes the
// step's memory cost the same whatever the heap's layout.
void keep_step_memory() {
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

// A failure of this rank (a usage error, or one while running): with several ranks, named by rank, and
// the whole job ends (the others would wait for this rank in their next collective).
int fail(trainer::process_group* group, int code, const char* kind, const char* what) {
  const bool ranks = group != nullptr && group->size() > 1;
  std::fprintf(stderr, "\nfp8_trainer: %s%s%s\n",
               ranks ? ("rank " + std::to_string(group->rank()) + ": ").c_str() : "", kind, what);
  code = finish_stdout(code);
  if (ranks) group->abort(code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  keep_step_memory();
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
    // Every rank of an MPI job reads the same command line: one of them reports it.
    if (trainer::launcher_rank() == 0) std::fprintf(stderr, "fp8_trainer: %s\n", e.what());
    return exit_usage;
  }
  std::unique_ptr<trainer::process_group> group;  // MPI when started by mpirun (data parallelism)
  try {
    group = trainer::join_process_group();
    trainer::check_same_arguments(*group, argc, argv);
    const std::unique_ptr<trainer::training_run> run = make_run(options, *group);
    run->run();
  } catch (const trainer::collective_error& e) {
    // Found by every rank at once (options or weights that differ between ranks): rank 0 reports it.
    if (group->is_root()) {
      std::fprintf(stderr, "\nfp8_trainer: %s%s\n", e.exit_code() == exit_usage ? "" : "error: ", e.what());
    }
    return finish_stdout(e.exit_code());
  } catch (const std::invalid_argument& e) {
    // Options that only the data can refute (a batch larger than the text holds), found before the
    // model is allocated.
    return fail(group.get(), exit_usage, "", e.what());
  } catch (const std::exception& e) { return fail(group.get(), exit_failure, "error: ", e.what()); }
  return finish_stdout(0);
}

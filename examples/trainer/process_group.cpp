// The single-process group, the launcher's environment, and the check that ranks agree.
#include "process_group.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hash.hpp"

namespace trainer {

namespace {

class single_process_group final : public process_group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void sum(float*, std::size_t) override {}
  std::vector<std::uint64_t> gather(const std::vector<std::uint64_t>& values) override { return values; }
  fp8::amax_reducer& amax_reducer() override { return identity_; }
  void abort(int) override {}

 private:
  fp8::identity_amax_reducer identity_;
};

// The first of these variables that is set, as a whole number; -1 if none is.
int environment_number(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') continue;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end == '\0' && value >= 0 && value < (1L << 30)) return int(value);
  }
  return -1;
}

std::string hex(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

std::unique_ptr<process_group> single_process() { return std::make_unique<single_process_group>(); }

int launcher_rank() {
  const int rank = environment_number({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"});
  return rank < 0 ? 0 : rank;
}

// Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; MPICH's Hydra and Slurm's PMI set PMI_SIZE.
int launcher_size() { return environment_number({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}); }

// Open MPI, MPICH's Hydra, Slurm's srun.
int launcher_local_rank() {
  return environment_number({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
}
int launcher_local_size() { return environment_number({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}); }

#ifndef FP8_TRAINER_MPI
std::unique_ptr<process_group> join_process_group() {
  const int ranks = launcher_size();
  if (ranks > 1) {
    throw std::runtime_error("started as one of " + std::to_string(ranks) +
                             " MPI ranks, but this fp8_trainer was built without MPI (CMake did not "
                             "find it): install OpenMPI (libopenmpi-dev) and rebuild, or run one process");
  }
  return single_process();
}
#endif

void check_same_on_all_ranks(process_group& group, const std::vector<replica_value>& values,
                             const std::string& when, const std::string& hint, int exit_code) {
  if (group.size() == 1) return;
  std::vector<std::uint64_t> mine;
  for (const replica_value& v : values) mine.push_back(v.value);
  const std::vector<std::uint64_t> all = group.gather(mine);
  const std::size_t count = values.size();
  for (std::size_t i = 0; i < count; ++i) {
    std::string differing;
    for (int r = 1; r < group.size(); ++r) {
      const std::uint64_t value = all[std::size_t(r) * count + i];
      if (value != all[i]) differing += ", rank " + std::to_string(r) + " has " + hex(value);
    }
    if (differing.empty()) continue;
    throw collective_error(values[i].what + " differ between the ranks " + when + ": rank 0 has " +
                               hex(all[i]) + differing + (hint.empty() ? "" : "; " + hint),
                           exit_code);
  }
}

void check_same_arguments(process_group& group, int argc, const char* const* argv) {
  std::uint64_t hash = fnv1a_offset;
  for (int i = 1; i < argc; ++i) hash = fnv1a(argv[i], std::strlen(argv[i]) + 1, hash);  // with the '\0'
  check_same_on_all_ranks(group, {{"the command-line options (fingerprints)", hash}}, "at the start",
                          "start every rank with the same options", usage_error_status);
}

}  // namespace trainer

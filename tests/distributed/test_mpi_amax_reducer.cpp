// The MPI amax reducer under mpirun -np 2: ranks that saw different amaxes end a step with the same
// scales (delayed and current scaling), which they do not without it; NaN on one rank is NaN on all;
// one MPI call per step; bad inputs refused before any call; a rank that never joins gives a timeout.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fp8/distributed/mpi.hpp>
#include <fp8/quantize.hpp>
#include <fp8/scaling.hpp>

#include "mpi_call_log.hpp"
#include "mpi_world.hpp"

namespace {

const float nan_amax = std::numeric_limits<float>::quiet_NaN();

// Three tensors as a linear layer has them: input and weight (E4M3), output gradient (E5M2).
fp8::delayed_scaling_state make_state() {
  fp8::delayed_scaling config;
  config.history_length = 4;
  fp8::delayed_scaling_state state(config);
  state.add_tensor(fp8::gemm_operand::fprop_input);
  state.add_tensor(fp8::gemm_operand::fprop_weight);
  state.add_tensor(fp8::gemm_operand::dgrad_grad_output);
  return state;
}

using amax_source = std::vector<float> (*)(int rank, int step);

// The amaxes rank `rank` records at `step`: they differ by rank, and rank 1 sees an outlier at step 1.
std::vector<float> outlier_amaxes(int rank, int step) {
  std::vector<float> amaxes = {2.0f + float(rank), 0.5f + 0.125f * float(step), 3.0f * float(rank + 1)};
  if (rank == 1 && step == 1) amaxes[0] = 1000.0f;
  return amaxes;
}

// Rank 1's weight amax is NaN at step 1 (an overflow on that rank only).
std::vector<float> nan_amaxes(int rank, int step) {
  std::vector<float> amaxes = outlier_amaxes(rank, step);
  if (rank == 1 && step == 1) amaxes[1] = nan_amax;
  return amaxes;
}

std::vector<float> scales_of(const fp8::delayed_scaling_state& state) {
  std::vector<float> scales;
  for (std::size_t i = 0; i < state.size(); ++i) scales.push_back(state.scale(i));
  return scales;
}

// Runs `steps` steps on three states: `reduced` through the MPI reducer, `local` alone, and `single`,
// one process that records the NaN-dominant maximum over all ranks (what one rank holding every
// micro-batch would see). Checks after every step that `reduced` matches `single` bit for bit.
struct three_states {
  fp8::delayed_scaling_state reduced = make_state();
  fp8::delayed_scaling_state local = make_state();
  fp8::delayed_scaling_state single = make_state();
};

three_states run_steps(amax_source amaxes_of, int steps) {
  fp8::distributed::mpi_amax_reducer reducer(MPI_COMM_WORLD);
  three_states s;
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    const std::vector<float> mine = amaxes_of(mpi_world::rank(), step);
    for (std::size_t i = 0; i < mine.size(); ++i) {
      s.reduced.record(i, mine[i]);
      s.local.record(i, mine[i]);
      float global = 0.0f;
      for (int r = 0; r < mpi_world::size(); ++r)
        global = fp8::detail::amax_max(global, amaxes_of(r, step)[i]);
      s.single.record(i, global);
    }
    const std::size_t calls_before = mpi_call_log::counts().iallreduce;
    s.reduced.update(reducer);
    s.local.update();
    s.single.update();
    // One MPI call per step carrying every tensor's amax, not one per tensor.
    CHECK(mpi_call_log::counts().iallreduce == calls_before + 1);
    CHECK(mpi_call_log::counts().iallreduce_count == s.reduced.size());
    for (std::size_t i = 0; i < s.reduced.size(); ++i) {
      CAPTURE(i);
      CHECK(mpi_world::bits(s.reduced.scale(i)) == mpi_world::bits(s.single.scale(i)));
      CHECK(mpi_world::bits(s.reduced.history(i).at(1)) == mpi_world::bits(s.single.history(i).at(1)));
    }
    CHECK(mpi_world::same_on_every_rank(scales_of(s.reduced)));
  }
  CHECK(reducer.calls() == std::size_t(steps));
  return s;
}

}  // namespace

TEST_CASE("delayed scaling: an outlier amax on one rank gives every rank the same scales") {
  const three_states s = run_steps(outlier_amaxes, 3);
  // The outlier (step 1, rank 1, tensor 0) is in every rank's window: scale = 448 / 1000.
  CHECK(s.reduced.scale(0) == fp8::scale_from_amax(1000.0f, fp8::fp8_format::e4m3));
  // Without the reducer the ranks diverge: rank 0 never saw the outlier.
  CHECK_FALSE(mpi_world::same_on_every_rank(scales_of(s.local)));
  const auto local0 = mpi_world::bits_of_every_rank({s.local.scale(0)});
  CHECK(local0[0][0] == mpi_world::bits(fp8::scale_from_amax(2.0f, fp8::fp8_format::e4m3)));
  CHECK(local0[1][0] == mpi_world::bits(fp8::scale_from_amax(1000.0f, fp8::fp8_format::e4m3)));
}

TEST_CASE("delayed scaling: NaN on one rank is NaN on every rank, and scales behave as on one rank") {
  const three_states s = run_steps(nan_amaxes, 3);
  // Step 1's weight amax is NaN in every rank's history (one step and two steps back after 3 steps).
  CHECK(std::isnan(s.reduced.history(1).at(2)));
  const auto histories = mpi_world::bits_of_every_rank({s.reduced.history(1).at(2)});
  CHECK(std::isnan(fp8::detail::amax_from_bits(histories[1][0])));
  // A NaN in the window keeps the previous scale, on every rank alike (step 0's 448 / 0.5).
  CHECK(s.reduced.scale(1) == fp8::scale_from_amax(0.5f, fp8::fp8_format::e4m3));
  // Alone, rank 0 never saw the NaN: its window gives a new scale from step 2's amax.
  if (mpi_world::rank() == 0) CHECK(s.local.scale(1) == fp8::scale_from_amax(0.75f, fp8::fp8_format::e4m3));
  CHECK_FALSE(mpi_world::same_on_every_rank(scales_of(s.local)));
}

TEST_CASE("reduce_max: NaN over Inf over finite across ranks; -0.0 as +0.0; exact maxima") {
  fp8::distributed::mpi_amax_reducer reducer(MPI_COMM_WORLD);
  const int rank = mpi_world::rank();
  const float inf = std::numeric_limits<float>::infinity();
  // Columns: NaN on rank 1 against Inf on rank 0; Inf against finite; -0.0 everywhere; a denormal
  // against 0; neighbouring floats (the max must be exact, not rounded).
  std::vector<float> amaxes = {rank == 1 ? nan_amax : inf, rank == 0 ? inf : 5.0f, -0.0f,
                               rank == 0 ? std::numeric_limits<float>::denorm_min() : 0.0f,
                               rank == 0 ? 1.0f : std::nextafter(1.0f, 2.0f)};
  reducer.reduce_max(amaxes.data(), amaxes.size());
  CHECK(std::isnan(amaxes[0]));
  CHECK(amaxes[1] == inf);
  CHECK(mpi_world::bits(amaxes[2]) == 0u);  // +0.0, not the pattern of -0.0
  CHECK(amaxes[3] == std::numeric_limits<float>::denorm_min());
  CHECK(amaxes[4] == std::nextafter(1.0f, 2.0f));
  CHECK(mpi_world::same_on_every_rank(amaxes));
}

TEST_CASE(
    "current scaling: per-rank activations get one scale through the reducer, identical weights need none") {
  // Every rank holds the same weight and its own activations; rank 1's activations hold an outlier.
  auto data = [](unsigned seed, std::size_t n) {
    std::mt19937 generator(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(n);
    for (float& v : values) v = normal(generator);
    return values;
  };
  auto activations_of = [&](int rank) {
    std::vector<float> x = data(100u + unsigned(rank), 4096);
    if (rank == 1) x[17] = -300.0f;
    return x;
  };
  const std::vector<float> weight = data(7u, 4096);
  const std::vector<float> x = activations_of(mpi_world::rank());

  std::vector<float> amaxes = {fp8::compute_amax(x.data(), x.size()),
                               fp8::compute_amax(weight.data(), weight.size())};
  const std::vector<float> local = amaxes;
  fp8::distributed::mpi_amax_reducer reducer(MPI_COMM_WORLD);
  const std::size_t calls_before = mpi_call_log::counts().iallreduce;
  reducer.reduce_max(amaxes.data(), amaxes.size());
  CHECK(mpi_call_log::counts().iallreduce == calls_before + 1);

  float global_x = 0.0f;
  for (int r = 0; r < mpi_world::size(); ++r) {
    const std::vector<float> theirs = activations_of(r);
    global_x = fp8::detail::amax_max(global_x, fp8::compute_amax(theirs.data(), theirs.size()));
  }
  CHECK(global_x == 300.0f);
  CHECK(amaxes[0] == global_x);
  CHECK(amaxes[1] == local[1]);  // identical weights: the reduction changes nothing
  const float scale_x = fp8::scale_from_amax(amaxes[0], fp8::fp8_format::e4m3);
  const float scale_w = fp8::scale_from_amax(amaxes[1], fp8::fp8_format::e4m3);
  CHECK(mpi_world::same_on_every_rank({scale_x, scale_w}));
  // The same cast codes for the same input on every rank: cast the shared weight with the shared scale.
  std::vector<std::uint8_t> codes(weight.size());
  fp8::quantize(weight.data(), weight.size(), fp8::fp8_format::e4m3, scale_w, codes.data());
  std::vector<float> code_sums = {0.0f};
  for (std::uint8_t c : codes) code_sums[0] += float(c);
  CHECK(mpi_world::same_on_every_rank(code_sums));
  // Without the reduction each rank would scale its activations differently.
  CHECK_FALSE(mpi_world::same_on_every_rank({fp8::scale_from_amax(local[0], fp8::fp8_format::e4m3)}));
}

TEST_CASE("bad inputs are refused before any MPI call, with the amaxes unchanged") {
  fp8::distributed::mpi_amax_reducer reducer(MPI_COMM_WORLD);
  const std::size_t calls_before = mpi_call_log::counts().iallreduce;
  std::vector<float> amaxes = {1.0f, -2.0f, 3.0f};
  CHECK_THROWS_WITH_AS(reducer.reduce_max(amaxes.data(), amaxes.size()),
                       doctest::Contains("amax 1 is negative (-2.000000)"), fp8::invalid_argument);
  CHECK(amaxes == std::vector<float>{1.0f, -2.0f, 3.0f});
  amaxes[1] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(reducer.reduce_max(amaxes.data(), amaxes.size()), fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(reducer.reduce_max(nullptr, 3), doctest::Contains("amaxes is null"),
                       fp8::invalid_argument);
  const std::size_t too_many = std::size_t(std::numeric_limits<int>::max()) + 1;
  CHECK_THROWS_WITH_AS(reducer.reduce_max(amaxes.data(), too_many),
                       doctest::Contains("more than one MPI call can carry"), fp8::invalid_argument);
  CHECK(mpi_call_log::counts().iallreduce == calls_before);
  reducer.reduce_max(nullptr, 0);  // nothing to reduce: no call, no error
  CHECK(mpi_call_log::counts().iallreduce == calls_before);

  CHECK_THROWS_WITH_AS(fp8::distributed::mpi_amax_reducer(MPI_COMM_WORLD, {-1.0}),
                       doctest::Contains("the timeout must be a finite number of seconds >= 0"),
                       fp8::invalid_argument);
  CHECK_THROWS_AS(fp8::distributed::mpi_amax_reducer(MPI_COMM_WORLD, {std::nan("")}), fp8::invalid_argument);
  // Finite, but its deadline would wrap past steady_clock's range and expire at the first poll.
  CHECK_THROWS_WITH_AS(fp8::distributed::mpi_amax_reducer(MPI_COMM_WORLD, {1e12}),
                       doctest::Contains("<= 1e9 (0 for no deadline; got 1000000000000"),
                       fp8::invalid_argument);
  CHECK_NOTHROW(fp8::distributed::mpi_amax_reducer(MPI_COMM_WORLD, {1e9}));
  CHECK_THROWS_WITH_AS(fp8::distributed::mpi_amax_reducer(MPI_COMM_NULL), doctest::Contains("MPI_COMM_NULL"),
                       fp8::invalid_argument);
}

TEST_CASE("mpi_check names the call and the rank") {
  const std::string expected = "MPI_Something failed on rank " + std::to_string(mpi_world::rank()) + ": ";
  CHECK_THROWS_WITH_AS(fp8::distributed::mpi_check(MPI_ERR_COUNT, "MPI_Something", MPI_COMM_WORLD),
                       doctest::Contains(expected.c_str()), fp8::error);
  CHECK_NOTHROW(fp8::distributed::mpi_check(MPI_SUCCESS, "MPI_Something", MPI_COMM_WORLD));
}

TEST_CASE("a rank that never joins: the others get a timeout error naming the call, rank and seconds") {
  using clock = std::chrono::steady_clock;
  const double timeout = 1.0;
  fp8::distributed::mpi_amax_reducer reducer(MPI_COMM_WORLD, {mpi_world::rank() == 0 ? timeout : 30.0});
  std::vector<float> amaxes = {1.0f, 2.0f};
  if (mpi_world::rank() == 0) {
    const auto start = clock::now();
    std::string message;
    try {
      reducer.reduce_max(amaxes.data(), amaxes.size());
    } catch (const fp8::error& e) { message = e.what(); }
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    CHECK(message ==
          "MPI_Iallreduce (amax max) timed out on rank 0 after 1 s: another rank has died, hangs or "
          "skipped the call; the ranks no longer agree, so end the job (MPI_Abort)");
    // Bounded: the deadline plus polling slack (100 us sleeps), far below the other rank's stall.
    CHECK(waited >= timeout);
    CHECK(waited < timeout + 1.0);
    CHECK(amaxes == std::vector<float>{1.0f, 2.0f});
    // The reducer refuses every later step: the ranks' states may already differ.
    CHECK_THROWS_WITH_AS(
        reducer.reduce_max(amaxes.data(), amaxes.size()),
        doctest::Contains("an earlier MPI_Iallreduce (amax max) failed or timed out on rank 0"), fp8::error);
  } else {
    // The stalled rank joins long after rank 0 gave up, so that the job can finish cleanly here.
    std::this_thread::sleep_for(std::chrono::duration<double>(timeout + 1.5));
    reducer.reduce_max(amaxes.data(), amaxes.size());
    CHECK(amaxes == std::vector<float>{1.0f, 2.0f});
  }
  MPI_Barrier(MPI_COMM_WORLD);  // drives rank 0's abandoned call to completion
}

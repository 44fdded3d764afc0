// The FP8 weight all-gather over MPI under mpirun -np 2: every rank receives exactly the codes and
// scales each owner cast (for 128x128 blocks, the same as casting the whole weight at once), MPI is
// handed 1 byte per element plus the scales (half of BF16), and bad shapes and pointers are refused.
#include <doctest/doctest.h>

#include <chrono>
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

constexpr std::size_t shard_rows = 128;  // one row of 128x128 blocks per rank
constexpr std::size_t cols = 384;

// The whole weight, [ranks * shard_rows][cols] row-major; every rank can make it (fixed seed). Rank
// r's rows are scaled by 4^r so that the ranks' block scales differ.
std::vector<float> full_weight(int ranks) {
  std::mt19937 generator(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(std::size_t(ranks) * shard_rows * cols);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = normal(generator) * float(1u << (2 * (i / (shard_rows * cols))));
  return w;
}

const fp8::quantization blocks{fp8::fp8_format::e4m3, fp8::granularity::block_128x128};

}  // namespace

TEST_CASE("128x128 blocks: every rank receives exactly the codes and scales each owner cast") {
  const int ranks = mpi_world::size();
  const int rank = mpi_world::rank();
  const std::vector<float> w = full_weight(ranks);
  const std::size_t shard_scales = fp8::make_scale_layout(blocks.granularity, shard_rows, cols).count;

  // This rank's shard, cast by its owner.
  std::vector<std::uint8_t> codes(shard_rows * cols);
  std::vector<float> scale_inv(shard_scales);
  fp8::quantize(w.data() + std::size_t(rank) * shard_rows * cols, shard_rows, cols, blocks, codes.data(),
                scale_inv.data());

  fp8::distributed::mpi_fp8_all_gather gather(MPI_COMM_WORLD, {codes.size(), shard_scales});
  CHECK(gather.ranks() == ranks);
  std::vector<std::uint8_t> all_codes(std::size_t(ranks) * codes.size(), 0xAA);
  std::vector<float> all_scales(std::size_t(ranks) * shard_scales, -1.0f);
  const mpi_call_log::calls before = mpi_call_log::counts();
  gather.gather(codes.data(), scale_inv.data(), all_codes.data(), all_scales.data());

  // Rank r's segment is what rank r cast (recast here from the same rows).
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    std::vector<std::uint8_t> expected_codes(codes.size());
    std::vector<float> expected_scales(shard_scales);
    fp8::quantize(w.data() + std::size_t(r) * shard_rows * cols, shard_rows, cols, blocks,
                  expected_codes.data(), expected_scales.data());
    CHECK(std::vector<std::uint8_t>(all_codes.begin() + r * codes.size(),
                                    all_codes.begin() + (r + 1) * codes.size()) == expected_codes);
    CHECK(std::vector<float>(all_scales.begin() + r * shard_scales,
                             all_scales.begin() + (r + 1) * shard_scales) == expected_scales);
  }
  // Shards of whole block rows: the gathered weight is the weight cast at once, codes and scales.
  std::vector<std::uint8_t> whole_codes(w.size());
  std::vector<float> whole_scales(fp8::make_scale_layout(blocks.granularity, ranks * shard_rows, cols).count);
  fp8::quantize(w.data(), ranks * shard_rows, cols, blocks, whole_codes.data(), whole_scales.data());
  CHECK(all_codes == whole_codes);
  CHECK(all_scales == whole_scales);
  CHECK(all_scales[0] != all_scales[shard_scales]);  // the ranks' scales do differ

  // What MPI was handed: 1 byte per element plus 4 per scale, against BF16's 2 bytes per element.
  const mpi_call_log::calls& after = mpi_call_log::counts();
  const std::size_t sent = after.iallgather_bytes - before.iallgather_bytes;
  CHECK(after.iallgather == before.iallgather + 2);  // codes and scales
  CHECK(sent == codes.size() + shard_scales * sizeof(float));
  CHECK(sent == gather.bytes_sent());
  CHECK(gather.shape().bf16_bytes() == 2 * codes.size());
  CHECK(sent - shard_scales * sizeof(float) == gather.shape().bf16_bytes() / 2);  // the codes: exactly half
  CHECK(double(sent) / double(gather.shape().bf16_bytes()) <
        0.501);  // 4 scales (3 + padding) per 49152 codes
  MESSAGE("fp8 all-gather: ", sent, " bytes per rank, BF16 would be ", gather.shape().bf16_bytes());
}

TEST_CASE("per-tensor scaling: one weight amax all-reduce, then every shard is cast with the same scale") {
  const int ranks = mpi_world::size();
  const int rank = mpi_world::rank();
  const std::vector<float> w = full_weight(ranks);
  const float* mine = w.data() + std::size_t(rank) * shard_rows * cols;
  const std::size_t n = shard_rows * cols;

  float amax = fp8::compute_amax(mine, n);
  fp8::distributed::mpi_amax_reducer reducer(MPI_COMM_WORLD);
  reducer.reduce_max(&amax, 1);
  CHECK(amax == fp8::compute_amax(w.data(), w.size()));
  const fp8::scale_pair scales = fp8::scale_pair_from_amax(amax, fp8::fp8_format::e4m3);
  std::vector<std::uint8_t> codes(n);
  fp8::quantize(mine, n, fp8::fp8_format::e4m3, scales.scale, codes.data());

  fp8::distributed::mpi_fp8_all_gather gather(MPI_COMM_WORLD, {n, 1});
  std::vector<std::uint8_t> all_codes(w.size());
  std::vector<float> all_scales(static_cast<std::size_t>(ranks));
  gather.gather(codes.data(), &scales.scale_inv, all_codes.data(), all_scales.data());
  std::vector<std::uint8_t> whole(w.size());
  fp8::quantize(w.data(), w.size(), fp8::fp8_format::e4m3, scales.scale, whole.data());
  CHECK(all_codes == whole);
  for (float s : all_scales) CHECK(s == scales.scale_inv);
  CHECK(gather.bytes_sent() == n + sizeof(float));
}

TEST_CASE("shard shapes that differ across ranks are refused on every rank, naming them") {
  const std::size_t mine = mpi_world::rank() == 1 ? 1000 : 1024;
  CHECK_THROWS_WITH_AS(
      fp8::distributed::mpi_fp8_all_gather(MPI_COMM_WORLD, {mine, 8}),
      "fp8::distributed::mpi_fp8_all_gather: shard shapes differ across ranks: rank 0 has 1024 "
      "codes and 8 scales, rank 1 has 1000 codes and 8 scales (every rank must pass the same "
      "shard shape)",
      fp8::invalid_argument);
  const std::size_t scales = mpi_world::rank() == 1 ? 9 : 8;
  CHECK_THROWS_WITH_AS(fp8::distributed::mpi_fp8_all_gather(MPI_COMM_WORLD, {1024, scales}),
                       doctest::Contains("rank 1 has 1024 codes and 9 scales"), fp8::invalid_argument);
}

TEST_CASE("a rank that never builds its gather: the others' constructors time out instead of hanging") {
  using clock = std::chrono::steady_clock;
  const double timeout = 1.0;
  if (mpi_world::rank() == 0) {
    const auto start = clock::now();
    std::string message;
    try {
      fp8::distributed::mpi_fp8_all_gather gather(MPI_COMM_WORLD, {64, 1}, {timeout});
    } catch (const fp8::error& e) { message = e.what(); }
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    // The first collective of the constructor is the one that gives up: making its communicator.
    CHECK(message ==
          "MPI_Comm_idup (fp8's own communicator) timed out on rank 0 after 1 s: another rank has died, "
          "hangs or skipped the call; the ranks no longer agree, so end the job (MPI_Abort)");
    CHECK(waited >= timeout);
    CHECK(waited < timeout + 2.0);  // the deadline plus polling slack (sanitizers too), below the stall
  } else {
    // The stalled rank comes long after rank 0 gave up, and completes the one call rank 0 made (the
    // duplicate of the communicator; a gather built here would wait for a shape check that rank 0
    // never makes), so that the job can finish cleanly.
    std::this_thread::sleep_for(std::chrono::duration<double>(timeout + 3.0));
    const fp8::distributed::mpi_communicator late(MPI_COMM_WORLD, {30.0});
    CHECK(late.size() == mpi_world::size());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("null pointers and shards too large for one MPI call are refused before any call") {
  const std::size_t too_many = std::size_t(std::numeric_limits<int>::max()) + 1;
  const std::size_t gathers_before = mpi_call_log::counts().iallgather;
  CHECK_THROWS_WITH_AS(fp8::distributed::mpi_fp8_all_gather(MPI_COMM_WORLD, {too_many, 1}),
                       doctest::Contains("more than one MPI call can carry"), fp8::invalid_argument);
  CHECK_THROWS_AS(fp8::distributed::mpi_fp8_all_gather(MPI_COMM_WORLD, {16, too_many}),
                  fp8::invalid_argument);
  CHECK_THROWS_AS(fp8::distributed::mpi_fp8_all_gather(MPI_COMM_WORLD, {16, 1}, {-2.0}),
                  fp8::invalid_argument);
  CHECK(mpi_call_log::counts().iallgather == gathers_before);  // not even the shape check ran

  fp8::distributed::mpi_fp8_all_gather gather(MPI_COMM_WORLD, {16, 1});
  std::vector<std::uint8_t> codes(16), all_codes(16 * std::size_t(mpi_world::size()));
  std::vector<float> scales(1, 1.0f), all_scales(static_cast<std::size_t>(mpi_world::size()));
  const std::size_t calls = mpi_call_log::counts().iallgather;
  CHECK_THROWS_WITH_AS(gather.gather(nullptr, scales.data(), all_codes.data(), all_scales.data()),
                       doctest::Contains(": codes is null"), fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(gather.gather(codes.data(), scales.data(), nullptr, all_scales.data()),
                       doctest::Contains(": all_codes is null"), fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(gather.gather(codes.data(), nullptr, all_codes.data(), all_scales.data()),
                       doctest::Contains(": scales is null"), fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(gather.gather(codes.data(), scales.data(), all_codes.data(), nullptr),
                       doctest::Contains(": all_scales is null"), fp8::invalid_argument);
  CHECK(mpi_call_log::counts().iallgather == calls);
  CHECK(gather.bytes_sent() == 0);
}

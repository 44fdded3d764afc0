// Data parallelism without MPI: the split of the global batch, the replica check's verdict and message,
// and a training run whose ranks stop agreeing, through a scripted process group standing in for MPI.
// (tests/data_parallel.sh runs real MPI ranks.)
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "data_parallel.hpp"
#include "process_group.hpp"
#include "tiny_options.hpp"
#include "trainer.hpp"

using namespace trainer;

namespace {

// Rank 0 of `ranks`, whose peers hold what this rank holds (the sum of a value over the ranks is
// ranks x the value) until gather call number `diverge_at` (1-based), from which rank `odd_rank`
// reports a different value.
class scripted_group final : public process_group {
 public:
  scripted_group(int ranks, int diverge_at, int odd_rank)
      : ranks_(ranks), diverge_at_(diverge_at), odd_(odd_rank) {}
  int rank() const override { return 0; }
  int size() const override { return ranks_; }
  void sum(float* data, std::size_t count) override {
    ++sums;
    for (std::size_t i = 0; i < count; ++i) data[i] *= float(ranks_);
  }
  std::vector<std::uint64_t> gather(const std::vector<std::uint64_t>& values) override {
    ++gathers;
    std::vector<std::uint64_t> all;
    for (int r = 0; r < ranks_; ++r) {
      for (std::uint64_t v : values)
        all.push_back(r == odd_ && diverge_at_ > 0 && gathers >= diverge_at_ ? v ^ 1 : v);
    }
    return all;
  }
  fp8::amax_reducer& amax_reducer() override { return identity_; }
  void abort(int) override {}

  int sums = 0, gathers = 0;

 private:
  int ranks_, diverge_at_, odd_;
  fp8::identity_amax_reducer identity_;
};

run_options tiny_options() {
  return trainer_tests::tiny_options(FP8_TRAINER_TEST_TEXT, trainer_tests::one_layer_of_16, 4, 10);
}

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const collective_error& e) { return e.what(); }
  return "";
}

}  // namespace

TEST_CASE("the global batch splits among the ranks and into passes, or is refused") {
  run_options o = tiny_options();
  o.batch = 8;
  batch_split s = split_batch(o, 1, 2);
  CHECK(s.local() == 4);
  CHECK(s.micro == 4);
  CHECK(s.passes() == 1);
  CHECK(s.shards() == 2);
  CHECK(s.sharded());
  o.micro_batch = 2;
  s = split_batch(o, 0, 2);
  CHECK(s.passes() == 2);
  CHECK(s.shards() == 4);
  o.micro_batch = 0;
  CHECK_FALSE(split_batch(o, 0, 1).sharded());  // one rank, one pass: the unsharded step
  try {
    split_batch(o, 0, 3);
    FAIL("a batch of 8 was split among 3 ranks");
  } catch (const collective_error& e) {
    CHECK(e.exit_code() == 2);
    CHECK(std::string(e.what()).find(
              "--batch 8 (the global batch, summed over the ranks) does not divide among 3 "
              "ranks: use a multiple of 3") != std::string::npos);
  }
  o.micro_batch = 8;
  CHECK_THROWS_WITH_AS(split_batch(o, 0, 2),
                       doctest::Contains("--micro-batch 8 does not divide the 4 sequences"),
                       collective_error);
}

TEST_CASE("the replica check names what differs, when, and every rank that differs from rank 0") {
  scripted_group agreeing(4, 0, 0);
  CHECK_NOTHROW(check_same_on_all_ranks(agreeing, {{"the weights", 42}}, "after step 3", "", 1));
  scripted_group odd(4, 1, 2);
  const std::string message = message_of([&] {
    check_same_on_all_ranks(odd, {{"the weights", 0x10}}, "after step 3", "resume", 1);
  });
  CHECK(message ==
        "the weights differ between the ranks after step 3: rank 0 has 0000000000000010, rank 2 has "
        "0000000000000011; resume");
  scripted_group single(1, 1, 0);
  CHECK_NOTHROW(check_same_on_all_ranks(single, {{"the weights", 1}}, "after step 3", "", 1));
}

TEST_CASE("a data-parallel run stops at the first periodic check after its ranks diverge") {
  run_options o = tiny_options();
  o.hash_every = 2;
  // Gathers: 1 at the start, 2 after step 2, 3 after step 4: rank 1 differs from the third on.
  scripted_group group(2, 3, 1);
  training_run run(o, &group);
  CHECK(run.split().sharded());
  run.train_step();
  run.train_step();
  CHECK(group.gathers == 2);
  CHECK(group.sums == 2);  // one all-reduce per step
  run.train_step();
  const std::string message = message_of([&] { run.train_step(); });
  CHECK(message.find("the weights and FP8 scales differ between the ranks after step 4: rank 0 has ") == 0);
  CHECK(message.find(", rank 1 has ") != std::string::npos);
}

TEST_CASE("ranks that start from different weights are refused before the first step") {
  scripted_group group(2, 1, 1);
  const std::string message = message_of([&] { training_run run(tiny_options(), &group); });
  CHECK(message.find("differ between the ranks at the start (step 0)") != std::string::npos);
  CHECK(group.sums == 0);
}

TEST_CASE("--micro-batch and --hash-every: defaults, values and the checks that need no ranks") {
  const char* plain[] = {"fp8_trainer"};
  const run_options defaults = parse_options(1, plain);
  CHECK(defaults.micro_batch == 0);  // one pass per rank
  CHECK(defaults.hash_every == 50);
  const char* given[] = {"fp8_trainer", "--batch", "8", "--micro-batch", "2", "--hash-every", "0"};
  const run_options o = parse_options(7, given);
  CHECK(o.micro_batch == 2);
  CHECK(o.hash_every == 0);
  const char* uneven[] = {"fp8_trainer", "--batch", "8", "--micro-batch", "3"};
  CHECK_THROWS_WITH_AS(parse_options(5, uneven), doctest::Contains("--micro-batch 3 must divide --batch 8"),
                       std::invalid_argument);
  const char* negative[] = {"fp8_trainer", "--hash-every", "-1"};
  CHECK_THROWS_AS(parse_options(3, negative), std::invalid_argument);
}

// The command line: defaults, switches, and clear errors for bad input.
#include <doctest/doctest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "option_checks.hpp"

using namespace trainer;
using trainer_tests::parse;

namespace {

std::string error_of(std::vector<const char*> args) {
  try {
    parse(std::move(args));
  } catch (const std::invalid_argument& e) { return e.what(); }
  return "";
}

}  // namespace

TEST_CASE("defaults are the documented ones") {
  const run_options o = parse({});
  CHECK(o.base_precision == precision::fp8);
  CHECK(o.model.kind == "transformer");
  CHECK(o.model.channels == 128);
  CHECK(o.recipe.recipe == fp8::scaling_mode::delayed);
  CHECK(o.recipe.amax_history_length == 1024);
  CHECK(o.recipe.formats == fp8::format_mix::hybrid);
  const run_options mlp = parse({"--model", "mlp"});
  CHECK(mlp.model.channels == 32);
  CHECK(mlp.model.hidden == 512);
}

TEST_CASE("switches reach the options") {
  const run_options o = parse({"--precision", "bf16", "--scaling", "current", "--granularity", "block",
                               "--dgrad", "bf16", "--fake-quant", "--bf16-layers", "0,head", "--seed", "7"});
  CHECK(o.base_precision == precision::bf16);
  CHECK(o.recipe.scale_granularity == fp8::granularity::tile_1x128);
  CHECK(o.linear_modes[0] == gemm_mode::fake_fp8);
  CHECK(o.linear_modes[1] == gemm_mode::bf16);  // --fake-quant leaves classes already in BF16 alone
  CHECK(o.linear_modes[2] == gemm_mode::fake_fp8);
  CHECK(o.bf16_layers == std::vector<std::string>{"0", "head"});
  CHECK(o.seed == 7);
}

TEST_CASE("bad command lines name the problem") {
  CHECK(error_of({"--stesp", "5"}).find("unknown option '--stesp'") != std::string::npos);
  CHECK(error_of({"--steps"}).find("--steps") != std::string::npos);
  CHECK(error_of({"--steps", "ten"}).find("--steps expects a whole number from 1 to 1000000000; got 'ten'") !=
        std::string::npos);
  CHECK(error_of({"--steps", "0"}).find("--steps must be from 1 to 1000000000; got 0") != std::string::npos);
  CHECK(error_of({"--precision", "fp16"}).find("--precision must be one of fp32, bf16, fp8") !=
        std::string::npos);
  CHECK(error_of({"--granularity", "block"}).find("needs --scaling current") != std::string::npos);
  CHECK(error_of({"--reset-scaling"}).find("--resume") != std::string::npos);
  CHECK(error_of({"--lr", "abc"}).find("--lr expects a finite number") != std::string::npos);
  CHECK(error_of({"--dgrad", "fp4"}).find("--dgrad must be one of fp8, fake, bf16") != std::string::npos);
  CHECK(error_of({"--steps", "10", "--warmup", "10"}).find("--warmup 10 must be smaller") !=
        std::string::npos);
  CHECK(error_of({"--fp8-head", "--bf16-layers", "head"}).find("contradict") != std::string::npos);
  CHECK(error_of({"--scaling", "current", "--granularity", "mx", "--margin", "1"})
            .find("--margin does not apply") != std::string::npos);
  for (const std::string& message : {error_of({"--stesp"}), error_of({"--steps", "x"})}) {
    CHECK(message.find("see --help") != std::string::npos);
  }
}

TEST_CASE("the help text lists every switch") {
  const std::string help = help_text();
  for (const char* option :
       {"--precision", "--data", "--scaling", "--amax-history", "--amax-algo", "--margin", "--format",
        "--granularity", "--fprop", "--dgrad", "--wgrad", "--fake-quant", "--bf16-layers",
        "--first-last-bf16", "--shadow-every", "--stats-every", "--resume", "--save-every"}) {
    CAPTURE(option);
    CHECK(help.find(option) != std::string::npos);
  }
}

TEST_CASE("every number is checked against the range of its destination") {
  // 2^32 + 1 used to be stored in an int as 1.
  CHECK(error_of({"--batch", "4294967297"}).find("--batch must be from 1 to") != std::string::npos);
  CHECK(error_of({"--batch", "-1"}).find("--batch must be from 1 to") != std::string::npos);
  CHECK(error_of({"--d-model", "4294967424"}).find("--d-model must be from 2 to") != std::string::npos);
  CHECK(error_of({"--amax-history", "2147483648"}).find("--amax-history must be from 1 to") !=
        std::string::npos);
  CHECK(error_of({"--margin", "-1"}).find("--margin must be from 0 to") != std::string::npos);
  CHECK(error_of({"--eval-batches", "99999999999"}).find("--eval-batches must be from 1 to") !=
        std::string::npos);
  CHECK(error_of({"--steps", "99999999999999999999999"}).find("--steps must be from 1 to") !=
        std::string::npos);
  CHECK(error_of({"--steps", " 5"}).find("--steps expects a whole number") != std::string::npos);
  CHECK(error_of({"--steps", "5x"}).find("--steps expects a whole number") != std::string::npos);
  // strtoull accepts "-1" as 2^64 - 1; a seed is not negative.
  CHECK(error_of({"--seed", "-1"}).find("--seed must be from 0 to") != std::string::npos);
  CHECK(parse({"--seed", "18446744073709551615"}).seed == 18446744073709551615ull);
  CHECK(error_of({"--lr", "1e40"}).find("--lr expects a finite number") != std::string::npos);
  CHECK(error_of({"--lr", "inf"}).find("--lr expects a finite number") != std::string::npos);
  CHECK(error_of({"--lr", "nan"}).find("--lr expects a finite number") != std::string::npos);
  CHECK(error_of({"--final-lr", "1.5"}).find("--final-lr must be from 0 to 1") != std::string::npos);
}

TEST_CASE("shape and size errors are usage errors found before anything is allocated") {
  CHECK(error_of({"--d-model", "30", "--heads", "4"}).find("--d-model 30 must be a multiple of --heads 4") !=
        std::string::npos);
  CHECK(error_of({"--d-model", "12", "--heads", "4"}).find("even head dimension") != std::string::npos);
  CHECK(error_of({"--model", "rnn"}).find("--model must be one of transformer, mlp") != std::string::npos);
  // 100000 sequences of 128 bytes through the default transformer: hundreds of GiB.
  CHECK(error_of({"--batch", "60000", "--context", "2048"}).find("tokens per step") != std::string::npos);
  CHECK(error_of({"--batch", "60000"}).find("GiB of memory") != std::string::npos);
  // A GPU run's host model holds the parameters and one sequence's activations: the batch does not
  // count against the host's memory, the parameters do.
  CHECK(error_of({"--batch", "60000", "--device", "cuda"}).empty());
  CHECK(error_of(
            {"--d-model", "8192", "--hidden", "32768", "--layers", "64", "--heads", "64", "--device", "cuda"})
            .find("the model's host copies need at least") != std::string::npos);
  CHECK(error_of({"--bf16-layers", "7"}).find("--bf16-layers: '7' is not a layer") != std::string::npos);
  CHECK(error_of({"--model", "mlp", "--bf16-layers", "3"}).find("--bf16-layers: '3' is not a layer") !=
        std::string::npos);
  CHECK(parse({"--model", "mlp", "--bf16-layers", "2"}).bf16_layers == std::vector<std::string>{"2"});
  CHECK(error_of({"--precision", "bf16", "--shadow-every", "5"}).find("--shadow-every compares") !=
        std::string::npos);
  CHECK(error_of({"--current-scaling-for", "fprop,bogus"}).find("--current-scaling-for must be one of") !=
        std::string::npos);
}

TEST_CASE("GNU conventions: --option=value, -h, --help first, --version, the last repeat wins") {
  CHECK(parse({"--steps=5"}).steps == 5);
  CHECK(parse({"--lr=0.01", "--data=file.txt"}).data_file == "file.txt");
  CHECK(parse({"--steps", "5", "--steps", "7"}).steps == 7);
  CHECK(parse({"--margin", "2"}).recipe.margin == 2);
  CHECK(parse({"-h"}).show_help);
  // --help wins over any other error on the line.
  CHECK(parse({"--steps", "ten", "--help"}).show_help);
  CHECK(parse({"--bogus", "-h"}).show_help);
  CHECK(parse({"--d-model", "30", "--help"}).show_help);
  CHECK(parse({"--version"}).show_version);
  CHECK(version_text().find("fp8_trainer") != std::string::npos);
  CHECK(error_of({"stray"}).find("unexpected argument 'stray'") != std::string::npos);
  CHECK(error_of({"--no-progress=3"}).find("option --no-progress takes no value; got '--no-progress=3'") !=
        std::string::npos);
  CHECK(error_of({"--fp8-head=false"}).find("option --fp8-head takes no value") != std::string::npos);
  // The order of --fake-quant and the class switches does not matter.
  CHECK(parse({"--fake-quant", "--dgrad", "bf16"}).linear_modes[1] == gemm_mode::bf16);
  CHECK(parse({"--dgrad", "bf16", "--fake-quant"}).linear_modes[1] == gemm_mode::bf16);
  CHECK(parse({"--fake-quant"}).linear_modes[0] == gemm_mode::fake_fp8);
}

TEST_CASE("the help text keeps its layout: one option per line, help wrapped into a column") {
  const std::string help = help_text();
  CHECK(help.find("  --steps N                 optimizer steps (default 600)\n") != std::string::npos);
  CHECK(help.find("  -h, --help") != std::string::npos);
  CHECK(help.find("--version") != std::string::npos);
  CHECK(help.find("--overwrite") != std::string::npos);
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    CAPTURE(line);
    CHECK(line.size() <= 100);
  }
}

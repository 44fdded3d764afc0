// The command line: defaults, switches, and clear errors for bad input.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "options.hpp"

using namespace trainer;

namespace {

run_options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "fp8_trainer");
  return parse_options(int(args.size()), args.data());
}

std::string error_of(std::vector<const char*> args) {
  try {
    parse(std::move(args));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("defaults are the documented ones") {
  const run_options o = parse({});
  CHECK(o.base_precision == precision::fp8);
  CHECK(o.model.kind == "transformer");
  CHECK(o.model.channels == 128);
  CHECK(o.recipe.recipe == scaling_recipe::delayed);
  CHECK(o.recipe.amax_history_length == 1024);
  CHECK(o.recipe.formats == format_mix::hybrid);
  const run_options mlp = parse({"--model", "mlp"});
  CHECK(mlp.model.channels == 32);
  CHECK(mlp.model.hidden == 512);
}

TEST_CASE("switches reach the options") {
  const run_options o = parse({"--precision", "bf16", "--scaling", "current", "--granularity", "block", "--dgrad",
                               "bf16", "--fake-quant", "--bf16-layers", "0,head", "--seed", "7"});
  CHECK(o.base_precision == precision::bf16);
  CHECK(o.recipe.scale_granularity == granularity::block);
  CHECK(o.linear_modes[0] == gemm_mode::fake_fp8);
  CHECK(o.linear_modes[1] == gemm_mode::bf16);  // --fake-quant leaves classes already in BF16 alone
  CHECK(o.linear_modes[2] == gemm_mode::fake_fp8);
  CHECK(o.bf16_layers == std::vector<std::string>{"0", "head"});
  CHECK(o.seed == 7);
}

TEST_CASE("bad command lines name the problem") {
  CHECK(error_of({"--stesp", "5"}).find("unknown option '--stesp'") != std::string::npos);
  CHECK(error_of({"--steps"}).find("--steps needs a value") != std::string::npos);
  CHECK(error_of({"--steps", "ten"}).find("--steps expects an integer; got 'ten'") != std::string::npos);
  CHECK(error_of({"--steps", "0"}).find("--steps must be at least 1") != std::string::npos);
  CHECK(error_of({"--precision", "fp16"}).find("--precision must be one of fp32, bf16, fp8") != std::string::npos);
  CHECK(error_of({"--granularity", "block"}).find("needs --scaling current") != std::string::npos);
  CHECK(error_of({"--reset-scaling"}).find("--resume") != std::string::npos);
  CHECK(error_of({"--lr", "abc"}).find("--lr expects a number") != std::string::npos);
  CHECK(error_of({"--dgrad", "fp4"}).find("--dgrad must be one of fp8, fake, bf16") != std::string::npos);
  CHECK(error_of({"--steps", "10", "--warmup", "10"}).find("--warmup 10 must be smaller") != std::string::npos);
  CHECK(error_of({"--fp8-head", "--bf16-layers", "head"}).find("contradict") != std::string::npos);
  CHECK(error_of({"--scaling", "current", "--granularity", "mx", "--margin", "1"}).find("--margin does not apply") !=
        std::string::npos);
  for (const std::string& message : {error_of({"--stesp"}), error_of({"--steps", "x"})}) {
    CHECK(message.find("see --help") != std::string::npos);
  }
}

TEST_CASE("the help text lists every switch") {
  const std::string help = help_text();
  for (const char* option : {"--precision", "--data", "--scaling", "--amax-history", "--amax-algo", "--margin",
                             "--format", "--granularity", "--fprop", "--dgrad", "--wgrad", "--fake-quant",
                             "--bf16-layers", "--first-last-bf16", "--shadow-every", "--stats-every", "--resume",
                             "--save-every"}) {
    CAPTURE(option);
    CHECK(help.find(option) != std::string::npos);
  }
}

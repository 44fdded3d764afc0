// Writes the seed inputs of the fuzz targets: valid files of each format, so that fuzzing starts
// from inputs that pass the first checks and reaches the deep ones. Run once; the output is committed
// under fuzz/corpus/<target>/. Usage: fuzz_make_seeds <fuzz/corpus directory>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fp8/scaling.hpp>

#include "safetensors.hpp"
#include "tiny_run.hpp"

namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string saved_state(const fp8::delayed_scaling& config, int tensors, int steps) {
  fp8::delayed_scaling_state state{config};
  for (int i = 0; i < tensors; ++i) state.add_tensor(fp8::gemm_operand(i % int(fp8::gemm_operand_count)));
  for (int step = 0; step < steps; ++step) {
    for (std::size_t i = 0; i < state.size(); ++i) state.record(i, float(step + 1) * float(i + 1) * 0.5f);
    state.update();
  }
  std::ostringstream out;
  fp8::save_scaling_state(out, state);
  return out.str();
}

std::string quantize_seed(std::uint8_t granularity, std::uint8_t flags, std::uint8_t rows, std::uint16_t cols,
                          const std::vector<float>& values) {
  std::string bytes = {char(granularity), char(flags),     char(1), char(rows),
                       char(cols & 0xFF), char(cols >> 8), 0,       0};
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds <fuzz/corpus directory>\n");
    return 2;
  }
  const fs::path corpus = argv[1];

  fp8::delayed_scaling config;
  config.history_length = 8;
  config.margin = 1;
  write_file(corpus / "fuzz_scaling_state" / "three_tensors", saved_state(config, 3, 11));
  write_file(corpus / "fuzz_scaling_state" / "no_tensors", saved_state(config, 0, 0));
  config.history_length = 1;
  config.algorithm = fp8::amax_algorithm::most_recent;
  config.power_of_two_scales = true;
  write_file(corpus / "fuzz_scaling_state" / "history_one", saved_state(config, 6, 3));

  trainer::safetensors_file file;
  file.metadata["note"] = "seed";
  const float values[] = {1.5f, -2.0f, 0.25f, 8.0f, 0.0f, -0.0f};
  const std::uint64_t words[] = {1, 0xFFFFFFFFFFFFFFFFull};
  const std::uint8_t bytes[] = {7, 8, 9};
  file.tensors.push_back(trainer::make_tensor("a/values", {2, 3}, values));
  file.tensors.push_back(trainer::make_tensor("b", {2}, words));
  file.tensors.push_back(trainer::make_tensor("c", {3}, bytes));
  const fs::path safetensors = corpus / "fuzz_safetensors" / "three_tensors";
  fs::create_directories(safetensors.parent_path());
  trainer::write_safetensors(safetensors.string(), file);

  trainer::training_run run(fp8_fuzz::tiny_run());
  run.train_step();
  const fs::path checkpoint = corpus / "fuzz_checkpoint" / "tiny_fp8_run";
  fs::create_directories(checkpoint.parent_path());
  run.save(checkpoint.string());

  std::vector<float> ramp;
  for (int i = 0; i < 64; ++i) ramp.push_back(float(i - 30) * 3.7f);
  ramp[5] = 1e-40f;  // subnormal
  ramp[9] = 1e30f;   // far beyond both formats
  ramp[17] = -0.0f;
  for (std::uint8_t g = 0; g < 5; ++g) {
    write_file(corpus / "fuzz_quantize" / ("granularity_" + std::to_string(g)),
               quantize_seed(g, std::uint8_t(g & 1), std::uint8_t(3 + g), std::uint16_t(130 + g), ramp));
  }
  std::printf("seeds written under %s\n", corpus.string().c_str());
  return 0;
}

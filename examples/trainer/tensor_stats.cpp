// The statistics log file.
#include "tensor_stats.hpp"

#include <filesystem>
#include <stdexcept>

namespace trainer {

namespace {
constexpr const char* stats_header = "step,layer,operand,format,mode,granularity,amax,scale_min,scale_max,saturated,flushed";
}

tensor_stats_log::tensor_stats_log(const std::string& path, bool append) {
  const bool exists = std::filesystem::exists(path);
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) throw std::runtime_error("cannot write the statistics log '" + path + "'");
  if (!append || !exists) out_ << stats_header << "\n";
}

void tensor_stats_log::add(const std::string& layer, const char* operand, const char* format, const char* mode,
                           const char* granularity, const tensor_stats& stats) {
  out_ << step_ << ',' << layer << ',' << operand << ',' << format << ',' << mode << ',' << granularity << ','
       << stats.amax << ',' << stats.scale_min << ',' << stats.scale_max << ',' << stats.saturated << ','
       << stats.flushed << '\n';
}

}  // namespace trainer

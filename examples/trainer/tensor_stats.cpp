// The statistics log file.
#include "tensor_stats.hpp"

#include "logging.hpp"

namespace trainer {

namespace {
constexpr const char* stats_header =
    "step,layer,operand,format,mode,granularity,amax,scale_min,scale_max,saturated,flushed";
}

tensor_stats_log::tensor_stats_log(const std::string& path, long resume_step)
    : path_(path), out_(open_resumable_csv(path, stats_header, resume_step, "statistics log")) {}

void tensor_stats_log::flush() { check_written(out_, path_, "statistics log"); }

void tensor_stats_log::add(const std::string& layer, const char* operand, const char* format,
                           const char* mode, const char* granularity, const tensor_stats& stats) {
  out_ << step_ << ',' << layer << ',' << operand << ',' << format << ',' << mode << ',' << granularity << ','
       << stats.amax << ',' << stats.scale_min << ',' << stats.scale_max << ',' << stats.saturated << ','
       << stats.flushed << '\n';
}

}  // namespace trainer

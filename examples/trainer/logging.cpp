// Writing (and, on resume, trimming) the CSV log.
#include "logging.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace trainer {

namespace {

// Nine significant digits: enough to tell apart any two floats, so logs of identical runs compare
// equal exactly when the losses are bit-identical.
std::string number(double value) {
  if (std::isnan(value)) return "";
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

}  // namespace

std::ofstream open_resumable_csv(const std::string& path, const std::string& header, long resume_step,
                                 const std::string& what) {
  std::vector<std::string> kept;
  if (resume_step > 0) {
    std::ifstream previous(path);
    std::string line;
    if (std::getline(previous, line) && line == header) {
      while (std::getline(previous, line)) {
        if (std::strtol(line.c_str(), nullptr, 10) <= resume_step) kept.push_back(line);
      }
    }
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out) {
    throw std::runtime_error("cannot write the " + what + " '" + path + "': " + std::strerror(errno) +
                             " (is the --out directory writable?)");
  }
  out << header << "\n";
  for (const std::string& line : kept) out << line << "\n";
  check_written(out, path, what);
  return out;
}

void check_written(std::ofstream& out, const std::string& path, const std::string& what) {
  errno = 0;
  out.flush();
  if (!out) {
    const int error = errno;
    throw std::runtime_error("writing the " + what + " '" + path + "' failed" +
                             (error != 0 ? std::string(": ") + std::strerror(error) : std::string()) +
                             " (disk full?); the run stops rather than lose its output");
  }
}

csv_log::csv_log(const std::string& path, long resume_step)
    : path_(path), out_(open_resumable_csv(path, header, resume_step, "log")) {}

void csv_log::write(const step_record& r) {
  const double shadow_diff = r.train_loss - r.shadow_loss;
  out_ << r.step << ',' << r.tokens << ',' << number(r.learning_rate) << ',' << number(r.train_loss) << ','
       << number(r.val_loss) << ',' << number(r.grad_norm) << ',' << number(r.shadow_loss) << ','
       << number(shadow_diff) << ',' << number(r.tokens_per_second) << ',' << number(r.elapsed_seconds)
       << '\n';
  check_written(out_, path_, "log");
}

}  // namespace trainer

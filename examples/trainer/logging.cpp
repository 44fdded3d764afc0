// Writing (and, on resume, trimming) the CSV log.
#include "logging.hpp"

#include <cstdio>
#include <cstdlib>
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

csv_log::csv_log(const std::string& path, long resume_step) {
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
  out_.open(path, std::ios::trunc);
  if (!out_) throw std::runtime_error("cannot write the log '" + path + "' (does the --out directory exist?)");
  out_ << header << "\n";
  for (const std::string& line : kept) out_ << line << "\n";
  out_.flush();
}

void csv_log::write(const step_record& r) {
  const double shadow_diff = r.train_loss - r.shadow_loss;
  out_ << r.step << ',' << r.tokens << ',' << number(r.learning_rate) << ',' << number(r.train_loss) << ','
       << number(r.val_loss) << ',' << number(r.grad_norm) << ',' << number(r.shadow_loss) << ','
       << number(shadow_diff) << ',' << number(r.tokens_per_second) << ',' << number(r.elapsed_seconds) << '\n';
  out_.flush();
}

}  // namespace trainer

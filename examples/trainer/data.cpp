// Loading text, the unigram baseline, and the batch order.
#include "data.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "file_io.hpp"
#include "hash.hpp"

namespace trainer {

namespace {

constexpr int byte_values = 256;

// Windows are indexed with 32 bits and a CPU trainer has no use for more text than this.
constexpr std::uint64_t max_text_bytes = std::uint64_t(1) << 31;

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  try {
    return read_regular_file(path, max_text_bytes);
  } catch (const file_error& e) {
    throw std::runtime_error(std::string("cannot use the data file: ") + e.what() + " (--data FILE)");
  }
}

// Appends a file's text: the first 90% to train, the rest to validation.
void add_source(text_data& data, const std::vector<std::uint8_t>& bytes) {
  const auto split = std::size_t(double(bytes.size()) * (1.0 - validation_fraction));
  data.train.insert(data.train.end(), bytes.begin(), bytes.begin() + std::ptrdiff_t(split));
  data.validation.insert(data.validation.end(), bytes.begin() + std::ptrdiff_t(split), bytes.end());
}

void finish(text_data& data) {
  data.fingerprint =
      fnv1a(data.validation.data(), data.validation.size(), fnv1a(data.train.data(), data.train.size()));
}

}  // namespace

text_data load_fortunes(const std::string& directory) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const fs::path path = it->path();
    if (!it->is_regular_file() || path.has_extension()) continue;  // skip .dat indexes and .u8 links
    if (path.filename() == "ascii-art") continue;                  // pictures, not English
    if (fs::exists(fs::path(path).concat(".dat"))) files.push_back(path.string());
  }
  if (files.empty()) {
    const std::string remedy =
        "Install Debian's 'fortunes' package (apt-get install fortunes) for the default text, or give --data "
        "a text file or a directory of cookie files";
    const std::string what = "no fortune cookie files (files with a .dat index beside them) in " + directory;
    throw std::runtime_error("the training text is missing: " + what + ". " + remedy);
  }
  std::sort(files.begin(), files.end());
  text_data data;
  data.description = "fortunes: " + std::to_string(files.size()) + " cookie files in " + directory;
  for (const std::string& file : files) add_source(data, read_bytes(file));
  finish(data);
  return data;
}

text_data load_text_file(const std::string& path) {
  text_data data;
  data.description = path;
  add_source(data, read_bytes(path));
  finish(data);
  return data;
}

text_data load_text(const std::string& path) {
  // A path that cannot be examined is read as a file: its error then says why (no such file, ...).
  std::error_code error;
  return std::filesystem::is_directory(path, error) ? load_fortunes(path) : load_text_file(path);
}

double unigram_baseline(const text_data& data) {
  std::array<double, byte_values> counts{};
  for (std::uint8_t byte : data.train) counts[byte] += 1.0;
  const double total = double(data.train.size()) + byte_values;  // add-one smoothing
  double nats = 0.0;
  for (std::uint8_t byte : data.validation) nats -= std::log((counts[byte] + 1.0) / total);
  return data.validation.empty() ? 0.0 : nats / double(data.validation.size());
}

batch_loader::batch_loader(const std::vector<std::uint8_t>& text, int batch, int context, std::uint64_t seed)
    : text_(text), batch_(batch), context_(context), generator_(seed) {
  if (text.size() < std::size_t(context) + 1 + std::size_t(context)) {
    throw std::invalid_argument("the training text (" + std::to_string(text.size()) +
                                " bytes) is too short for windows of --context " + std::to_string(context) +
                                ": use a longer text or a shorter context");
  }
  start_epoch(generator_.state());
}

void batch_loader::start_epoch(const rng::state_type& state) {
  generator_.set_state(state);
  position_.epoch_rng = state;
  offset_ = std::size_t(generator_.below(std::uint64_t(context_)));
  const std::size_t windows = (text_.size() - 1 - offset_) / std::size_t(context_);
  order_.resize(windows);
  for (std::size_t i = 0; i < windows; ++i) order_[i] = std::uint32_t(i);
  for (std::size_t i = windows; i > 1; --i) {  // Fisher-Yates
    std::swap(order_[i - 1], order_[std::size_t(generator_.below(i))]);
  }
}

void batch_loader::next(std::int32_t* inputs, std::int32_t* targets) {
  for (int b = 0; b < batch_; ++b) {
    if (position_.index >= order_.size()) {
      ++position_.epoch;
      position_.index = 0;
      start_epoch(generator_.state());
    }
    const std::size_t start = offset_ + std::size_t(order_[position_.index++]) * std::size_t(context_);
    for (int t = 0; t < context_; ++t) {
      inputs[std::size_t(b) * std::size_t(context_) + std::size_t(t)] = text_[start + std::size_t(t)];
      targets[std::size_t(b) * std::size_t(context_) + std::size_t(t)] = text_[start + std::size_t(t) + 1];
    }
  }
}

void batch_loader::set_position(const data_position& position) {
  rng probe;
  probe.set_state(position.epoch_rng);
  const std::size_t offset = std::size_t(probe.below(std::uint64_t(context_)));
  const std::size_t windows = (text_.size() - 1 - offset) / std::size_t(context_);
  if (position.index > windows) {
    throw std::invalid_argument("data position " + std::to_string(position.index) + " is past the " +
                                std::to_string(windows) + " windows of an epoch of this text and context");
  }
  start_epoch(position.epoch_rng);
  position_ = position;
}

eval_windows::eval_windows(const std::vector<std::uint8_t>& text, int batch, int context, int max_batches)
    : text_(text), batch_(batch), context_(context) {
  const std::size_t available =
      text.size() > std::size_t(context) ? (text.size() - 1) / std::size_t(context) : 0;
  if (available < std::size_t(batch)) {
    throw std::invalid_argument(
        "the validation text (" + std::to_string(text.size()) + " bytes) holds " + std::to_string(available) +
        " windows of --context " + std::to_string(context) + ", fewer than one batch of " +
        std::to_string(batch) + ": use a longer text or a smaller --batch or --context");
  }
  batches_ =
      int(std::min<std::size_t>(available / std::size_t(batch), std::size_t(std::max(max_batches, 1))));
  const std::size_t count = std::size_t(batches_) * std::size_t(batch);
  // Evenly spaced over the whole validation text, so every source file is represented.
  for (std::size_t i = 0; i < count; ++i) starts_.push_back(i * available / count * std::size_t(context));
}

void eval_windows::fill(int batch_index, std::int32_t* inputs, std::int32_t* targets) const {
  for (int b = 0; b < batch_; ++b) {
    const std::size_t start = starts_[std::size_t(batch_index) * std::size_t(batch_) + std::size_t(b)];
    for (int t = 0; t < context_; ++t) {
      inputs[std::size_t(b) * std::size_t(context_) + std::size_t(t)] = text_[start + std::size_t(t)];
      targets[std::size_t(b) * std::size_t(context_) + std::size_t(t)] = text_[start + std::size_t(t) + 1];
    }
  }
}

}  // namespace trainer

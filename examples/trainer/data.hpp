// Training text: the default data set (the fortune cookies of Debian's `fortunes` package), or the
// file or cookie directory given with --data, split into training and validation bytes, served as
// batches of windows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rng.hpp"

namespace trainer {

// The last tenth of every input file is validation text, so both splits sample every source.
inline constexpr double validation_fraction = 0.1;

struct text_data {
  std::string description;               // where the text came from, for logs
  std::vector<std::uint8_t> train;       // training bytes
  std::vector<std::uint8_t> validation;  // validation bytes
  std::uint64_t fingerprint = 0;         // FNV-1a of both splits: checkpoints check it on resume
};

// Reads every cookie file (a file with a `.dat` index beside it) of `directory` except the
// ASCII-art collection, in name order. Throws std::runtime_error naming the directory, with an
// install hint, if none exist (a missing or empty directory too).
text_data load_fortunes(const std::string& directory);

// Reads one text file. Throws std::runtime_error naming the file if it cannot be read.
text_data load_text_file(const std::string& path);

// The text of --data: a directory is read as fortune cookie files (load_fortunes), so that a copy of
// the default text on a machine without the package trains on the same bytes; anything else as one
// text file (load_text_file, which names a path that does not exist).
text_data load_text(const std::string& path);

// Cross-entropy (nats per byte) of the validation bytes under the training bytes' byte frequencies
// (add-one smoothed): the loss of the best model that ignores context. A model that learned anything
// beyond letter frequencies is below it.
double unigram_baseline(const text_data& data);

// Where a batch_loader is: the epoch, the next window of the epoch's order, and the random state the
// epoch's order was drawn from (so that the order can be drawn again on resume).
struct data_position {
  std::uint64_t epoch = 0;
  std::uint64_t index = 0;
  rng::state_type epoch_rng{};
};

// Serves [B, T] inputs and targets (targets are inputs shifted by one byte) from windows of T + 1
// bytes. Each epoch draws a random offset in [0, T) and a random order of the windows that start at
// offset + k * T, so every byte is seen once per epoch and epochs differ.
class batch_loader {
 public:
  // Throws std::invalid_argument if the text is shorter than one window.
  batch_loader(const std::vector<std::uint8_t>& text, int batch, int context, std::uint64_t seed);

  // Fills inputs and targets, [B, T] each, and advances (into the next epoch when one ends).
  void next(std::int32_t* inputs, std::int32_t* targets);

  const data_position& position() const { return position_; }
  // Restores a position saved by position(); throws std::invalid_argument if it cannot belong to
  // this text and shape (the loader is unchanged then).
  void set_position(const data_position& position);

 private:
  void start_epoch(const rng::state_type& state);

  const std::vector<std::uint8_t>& text_;
  int batch_, context_;
  rng generator_;
  data_position position_;
  std::size_t offset_ = 0;            // this epoch's shift of the window grid
  std::vector<std::uint32_t> order_;  // this epoch's window order
};

// The validation windows: evenly spaced windows of T + 1 bytes, at most max_batches batches of B.
// Throws std::invalid_argument if the validation text holds fewer than B windows.
class eval_windows {
 public:
  eval_windows(const std::vector<std::uint8_t>& text, int batch, int context, int max_batches);
  int batches() const { return batches_; }
  void fill(int batch_index, std::int32_t* inputs, std::int32_t* targets) const;

 private:
  const std::vector<std::uint8_t>& text_;
  int batch_, context_, batches_ = 0;
  std::vector<std::size_t> starts_;
};

}  // namespace trainer

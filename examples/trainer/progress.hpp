// What a user watches: a progress bar on a terminal (step, loss, validation loss, tokens/s, time
// left), or one line every few steps when stderr is a file or a pipe.
#pragma once

#include <string>

namespace trainer {

class progress_display {
 public:
  // `bar`: draw a bar when stderr is a terminal; otherwise (or without `bar`) print a line every
  // `line_every` steps.
  progress_display(long total_steps, bool bar, long line_every);

  // After each step: `seconds_left` is the estimate of the remaining time.
  void update(long step, double train_loss, double val_loss, double tokens_per_second, double seconds_left);
  // Ends the bar's line.
  void finish();

 private:
  long total_;
  bool bar_;
  long line_every_;
  bool drawn_ = false;
};

// "1:05" or "1:02:03".
std::string format_duration(double seconds);

}  // namespace trainer

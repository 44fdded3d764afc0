// Drawing the progress bar.
#include "progress.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include <unistd.h>

namespace trainer {

namespace {
constexpr int bar_width = 24;
constexpr double seconds_per_minute = 60.0;
constexpr double seconds_per_hour = 3600.0;
}  // namespace

std::string format_duration(double seconds) {
  if (!(seconds >= 0.0) || !std::isfinite(seconds)) return "?";
  const long total = long(seconds + 0.5);
  const long hours = long(total / seconds_per_hour);
  const long minutes = long(total / seconds_per_minute) % 60;
  const long secs = total % 60;
  char text[32];
  if (hours > 0) {
    std::snprintf(text, sizeof(text), "%ld:%02ld:%02ld", hours, minutes, secs);
  } else {
    std::snprintf(text, sizeof(text), "%ld:%02ld", minutes, secs);
  }
  return text;
}

progress_display::progress_display(long total_steps, bool bar, long line_every)
    : total_(total_steps), bar_(bar && isatty(fileno(stderr)) != 0), line_every_(line_every) {}

void progress_display::update(long step, double train_loss, double val_loss, double tokens_per_second,
                              double seconds_left) {
  char val_text[32] = "";
  if (!std::isnan(val_loss)) std::snprintf(val_text, sizeof(val_text), " val %.4f", val_loss);
  if (bar_) {
    const int filled = int(double(bar_width) * double(step) / double(total_));
    std::string bar(std::size_t(filled), '#');
    bar.resize(bar_width, '.');
    std::fprintf(stderr, "\r[%s] %ld/%ld loss %.4f%s | %.0f tok/s | %s left   ", bar.c_str(), step, total_,
                 train_loss, val_text, tokens_per_second, format_duration(seconds_left).c_str());
    // A step with a validation loss keeps its line; the bar continues below it.
    if (val_text[0] != '\0') std::fprintf(stderr, "\n");
    std::fflush(stderr);
    drawn_ = val_text[0] == '\0';
    return;
  }
  if (step % line_every_ == 0 || step == total_ || val_text[0] != '\0') {
    std::fprintf(stderr, "step %ld/%ld loss %.4f%s | %.0f tok/s | %s left\n", step, total_, train_loss,
                 val_text, tokens_per_second, format_duration(seconds_left).c_str());
  }
}

void progress_display::finish() {
  if (drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace trainer

// The run's CSV log: one row per optimizer step (and one for the initial validation loss), the
// input of scripts/plot_loss.py and scripts/results_table.py.
#pragma once

#include <cmath>
#include <fstream>
#include <limits>
#include <string>

namespace trainer {

// A value that was not measured at this step (empty in the CSV).
inline constexpr double not_measured = std::numeric_limits<double>::quiet_NaN();

struct step_record {
  long step = 0;    // optimizer steps completed (0: before training)
  long tokens = 0;  // training tokens seen so far
  double learning_rate = not_measured;
  double train_loss = not_measured;   // loss of this step's batch, before its update
  double val_loss = not_measured;     // validation loss after this step's update
  double grad_norm = not_measured;    // before clipping
  double shadow_loss = not_measured;  // BF16 loss of the same batch (--shadow-every)
  double tokens_per_second = not_measured;
  double elapsed_seconds = 0.0;
};

class csv_log {
 public:
  inline static const char* const header =
      "step,tokens,lr,train_loss,val_loss,grad_norm,shadow_loss,shadow_diff,tokens_per_s,elapsed_s";

  // Creates `path`; when resuming after `resume_step` > 0 steps, keeps the existing rows up to that
  // step (and drops later ones, from the run that was interrupted), so
  // that an interrupted and resumed run leaves one continuous log. Throws std::runtime_error naming
  // the file if it cannot be written.
  csv_log(const std::string& path, long resume_step);

  // Appends a row and flushes it; throws std::runtime_error naming the file if the write fails (a
  // full disk), so that a run never reports success with rows missing.
  void write(const step_record& record);

 private:
  std::string path_;
  std::ofstream out_;
};

// A CSV file that a resumed run continues: opened for writing with `header`, keeping the rows of an
// earlier run whose first column (the step) is at most `resume_step` when resume_step > 0 and the
// file starts with the same header, dropping the rest. Throws std::runtime_error naming the file
// (`what` says which log it is) if it cannot be written.
std::ofstream open_resumable_csv(const std::string& path, const std::string& header, long resume_step,
                                 const std::string& what);

// Flushes `out` and throws std::runtime_error naming the file if any write to it failed.
void check_written(std::ofstream& out, const std::string& path, const std::string& what);

}  // namespace trainer

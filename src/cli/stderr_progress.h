// The native edge of the progress line (app/progress_text.h): the real clock, the environment, whether stderr
// is a terminal, and stderr itself. The meter decides what to draw and when.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "app/command_line.h"
#include "app/progress_text.h"

namespace pb::cli {

class StderrProgress {
 public:
  // `total` bytes to move; shown as app::ProgressSettingsFor decides from `line`'s --json, -q and
  // --no-progress, isatty(2), $PB_PROGRESS and $PB_PROGRESS_CLOCK_MS.
  StderrProgress(const app::CommandLine& line, uint64_t total);
  ~StderrProgress();  // an unfinished line is ended (Abandon), so that what follows starts on its own line

  void SetTotal(uint64_t total) { meter_.set_total(total); }
  void StartFile(std::string_view name, uint64_t done);
  void Update(uint64_t done);
  void Finish();
  void Abandon();

 private:
  double Seconds() const;
  static void Write(const std::string& text);

  app::ProgressMeter meter_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace pb::cli

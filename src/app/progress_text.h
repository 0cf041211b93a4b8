// The progress line both CLIs draw on stderr while merge, unmerge, convert and translate move bytes, and the rules
// around it: when it shows at all, when a redraw is due, and the clock tests can fix. Sans-I/O: the edges read the
// clock, the environment and whether stderr is a terminal, and write what the meter returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pb::app {

// What decides whether progress shows, as each CLI finds it.
struct ProgressEnvironment {
  bool json = false;         // --json
  bool quiet = false;        // -q / --quiet
  bool no_progress = false;  // --no-progress
  bool stderr_is_terminal = false;
  std::optional<std::string> progress_variable;  // $PB_PROGRESS: "always" draws without a terminal (tests)
  std::optional<std::string> clock_variable;     // $PB_PROGRESS_CLOCK_MS: a fixed elapsed time (tests)
};

struct ProgressSettings {
  bool shown = false;
  // When set, every elapsed time the meter is given reads as this many seconds, so the lines (rate, ETA) are
  // the same bytes in every run and in both CLIs.
  std::optional<double> fixed_seconds;
};

// Shown on a terminal (or with PB_PROGRESS=always) unless --json, -q/--quiet or --no-progress is given.
// PB_PROGRESS_CLOCK_MS must be a whole number of milliseconds; anything else leaves the real clock.
ProgressSettings ProgressSettingsFor(const ProgressEnvironment& env);

// An ETA is an average's extrapolation: before this much time and this share of the bytes it is a guess (the
// first redraw of a threaded run comes after a quarter second in which the threads' first blocks, or the copies of
// unchanged tensors, moved at a rate the rest will not have), so the line shows "ETA --:--" until both are reached.
inline constexpr double kEtaAfterSeconds = 1.0;
inline constexpr double kEtaAfterFraction = 0.01;

// One line, without "\r" or newline:
//   "[########            ]  42%  1.16 GB / 2.77 GB  312 MB/s  ETA 0:05  model-00001-of-00002.safetensors"
// The rate is the average since the start; the ETA the remaining bytes at that rate ("--:--" while unknown, and
// before kEtaAfterSeconds and kEtaAfterFraction).
// Once done >= total the ETA gives way to the time taken ("in 0:12"). A zero total reads as complete. The file
// name comes from the input: control bytes are shown as \xNN, and a long name is shortened from the left.
std::string RenderProgressLine(uint64_t done, uint64_t total, double seconds, std::string_view file);

// The line's time: "ETA 0:05" (the remaining bytes at the average rate), "ETA --:--" while nothing moved or before
// kEtaAfterSeconds and kEtaAfterFraction, "in 0:12" once done >= total. The page shows it beside its own progress bar,
// so every front end's ETA reads alike.
std::string ProgressTimeText(uint64_t done, uint64_t total, double seconds);

// What the line names while several files move at once (the native CLI merging shards one per thread), in place
// of a file name: "2 files at once".
std::string FilesAtOnceLabel(size_t count);

// "M:SS", or "H:MM:SS" from an hour on; "--:--" for a time that is negative, not finite or 100 hours or more.
std::string DurationText(double seconds);

// The meter of one command: every method returns the bytes to write to stderr as they are ("" for nothing).
// Redraws come at the points both CLIs share whatever their read sizes: the start of each file, every
// kRedrawSeconds while bytes move, and the end. Each drawn line starts with "\r" and is padded with spaces over
// what the previous one left on the screen.
class ProgressMeter {
 public:
  static constexpr double kRedrawSeconds = 0.25;

  ProgressMeter(uint64_t total, ProgressSettings settings);

  // The total, when it is known only once the work is planned (a job tells it with its progress).
  void set_total(uint64_t total) { total_ = total; }
  // A new file is being transferred, `done` bytes of the total so far: drawn at once.
  std::string StartFile(std::string_view name, uint64_t done, double seconds);
  // `done` bytes so far: the line when a redraw is due, else "".
  std::string Update(uint64_t done, double seconds);
  // The work completed: the line at the total (unless the last one drawn showed it), then a newline; nothing
  // when not shown.
  std::string Finish(double seconds);
  // The work stopped short (an error follows): a newline when a line is on the screen, so the error starts on a
  // line of its own.
  std::string Abandon();

  // Whether Update(done, seconds) would draw: a redraw is due once kRedrawSeconds have passed since the last
  // one, or when the total is first reached; never when nothing moved.
  bool RedrawDue(uint64_t done, double seconds) const;

 private:
  std::string Draw(uint64_t done, double seconds);
  double Clock(double seconds) const { return settings_.fixed_seconds.value_or(seconds); }

  uint64_t total_;
  ProgressSettings settings_;
  std::string file_;
  bool drawn_ = false;       // a line is on the screen
  uint64_t drawn_done_ = 0;  // what the last line showed
  double drawn_at_ = 0;
  size_t drawn_width_ = 0;
};

}  // namespace pb::app

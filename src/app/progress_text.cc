#include "app/progress_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/printable.h"
#include "text/size_text.h"

namespace pb::app {
namespace {

constexpr int kBarWidth = 20;
constexpr size_t kFileWidth = 48;  // a longer name keeps its end (the shard number) after "..."

// The fraction done, in [0, 1]; a zero total is complete. In double: done * 100 overflows past 184 PB.
double Fraction(uint64_t done, uint64_t total) {
  if (total == 0 || done >= total) return 1;
  return static_cast<double>(done) / static_cast<double>(total);
}

std::string ShortName(std::string_view name) {
  std::string text = Printable(name);
  if (text.size() <= kFileWidth) return text;
  std::string shown = "...";
  shown.append(text, text.size() - (kFileWidth - 3));
  return shown;
}

// Digits of a whole number of milliseconds: the only clock the tests fix. Up to 12 digits (31 years).
std::optional<double> ParseMilliseconds(const std::optional<std::string>& text) {
  if (!text || text->empty() || text->size() > 12) return std::nullopt;
  uint64_t ms = 0;
  for (char c : *text) {
    if (c < '0' || c > '9') return std::nullopt;
    ms = ms * 10 + static_cast<uint64_t>(c - '0');
  }
  return static_cast<double>(ms) / 1000;
}

}  // namespace

ProgressSettings ProgressSettingsFor(const ProgressEnvironment& env) {
  ProgressSettings settings;
  const bool forced = env.progress_variable == "always";
  settings.shown = !env.json && !env.quiet && !env.no_progress && (env.stderr_is_terminal || forced);
  settings.fixed_seconds = ParseMilliseconds(env.clock_variable);
  return settings;
}

std::string FilesAtOnceLabel(size_t count) { return std::to_string(count) + " files at once"; }

std::string DurationText(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds >= 100 * 3600) return "--:--";
  const auto total = static_cast<uint64_t>(std::llround(seconds));
  char buf[32];
  if (total >= 3600)
    std::snprintf(buf, sizeof buf, "%u:%02u:%02u", unsigned(total / 3600), unsigned(total / 60 % 60),
                  unsigned(total % 60));
  else std::snprintf(buf, sizeof buf, "%u:%02u", unsigned(total / 60), unsigned(total % 60));
  return buf;
}

std::string RenderProgressLine(uint64_t done, uint64_t total, double seconds, std::string_view file) {
  const bool complete = total == 0 || done >= total;
  const double fraction = Fraction(done, total);
  // Floors, so that 100% and a full bar mean every byte.
  const int percent = complete ? 100 : std::min(99, static_cast<int>(fraction * 100));
  const int filled = complete ? kBarWidth : std::min(kBarWidth - 1, static_cast<int>(fraction * kBarWidth));
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  const std::string time = ProgressTimeText(done, total, seconds);
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3d%%", percent);
  std::string line = "[";
  line.append(filled, '#').append(kBarWidth - filled, ' ');
  line += "] ";
  line += pct;
  line += "  " + text::SizeText(std::min(done, total)) + " / " + text::SizeText(total) + "  " + text::RateText(rate) +
          "  " + time;
  if (!file.empty()) line += "  " + ShortName(file);
  return line;
}

std::string ProgressTimeText(uint64_t done, uint64_t total, double seconds) {
  if (total == 0 || done >= total) return "in " + DurationText(seconds);
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  const bool settled = seconds >= kEtaAfterSeconds && Fraction(done, total) >= kEtaAfterFraction;
  return rate > 0 && settled ? "ETA " + DurationText(static_cast<double>(total - done) / rate) : "ETA --:--";
}

ProgressMeter::ProgressMeter(uint64_t total, ProgressSettings settings) : total_(total), settings_(settings) {}

std::string ProgressMeter::StartFile(std::string_view name, uint64_t done, double seconds) {
  file_ = std::string(name);
  return settings_.shown ? Draw(done, Clock(seconds)) : "";
}

bool ProgressMeter::RedrawDue(uint64_t done, double seconds) const {
  if (!settings_.shown || (drawn_ && done == drawn_done_)) return false;
  if (!drawn_) return true;
  if (done >= total_ && drawn_done_ < total_) return true;
  return Clock(seconds) - drawn_at_ >= kRedrawSeconds;
}

std::string ProgressMeter::Update(uint64_t done, double seconds) {
  return RedrawDue(done, seconds) ? Draw(done, Clock(seconds)) : "";
}

std::string ProgressMeter::Finish(double seconds) {
  if (!settings_.shown) return "";
  // The complete line once: drawn already when an Update reached the total (whichever CLI's read sizes got there).
  std::string out = (drawn_ && drawn_done_ >= total_ ? "" : Draw(total_, Clock(seconds))) + "\n";
  drawn_ = false;
  drawn_width_ = 0;
  return out;
}

std::string ProgressMeter::Abandon() {
  if (!drawn_) return "";
  drawn_ = false;
  drawn_width_ = 0;
  return "\n";
}

std::string ProgressMeter::Draw(uint64_t done, double seconds) {
  std::string line = RenderProgressLine(done, total_, seconds, file_);
  const size_t width = line.size();
  if (width < drawn_width_) line.append(drawn_width_ - width, ' ');  // over the longer line before
  drawn_ = true;
  drawn_done_ = done;
  drawn_at_ = seconds;
  drawn_width_ = width;
  return "\r" + line;
}

}  // namespace pb::app

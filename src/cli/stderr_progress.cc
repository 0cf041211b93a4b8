#include "cli/stderr_progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace pb::cli {
namespace {

std::optional<std::string> Variable(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

app::ProgressSettings SettingsOf(const app::CommandLine& line) {
  app::ProgressEnvironment env;
  env.json = line.Has("json");
  env.quiet = line.Has("quiet");
  env.no_progress = line.Has("no-progress");
  env.stderr_is_terminal = ::isatty(2) == 1;
  env.progress_variable = Variable("PB_PROGRESS");
  env.clock_variable = Variable("PB_PROGRESS_CLOCK_MS");
  return app::ProgressSettingsFor(env);
}

}  // namespace

StderrProgress::StderrProgress(const app::CommandLine& line, uint64_t total)
    : meter_(total, SettingsOf(line)), start_(std::chrono::steady_clock::now()) {}

StderrProgress::~StderrProgress() { Abandon(); }

double StderrProgress::Seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void StderrProgress::Write(const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

void StderrProgress::StartFile(std::string_view name, uint64_t done) { Write(meter_.StartFile(name, done, Seconds())); }
void StderrProgress::Update(uint64_t done) { Write(meter_.Update(done, Seconds())); }
void StderrProgress::Finish() { Write(meter_.Finish(Seconds())); }
void StderrProgress::Abandon() { Write(meter_.Abandon()); }

}  // namespace pb::cli

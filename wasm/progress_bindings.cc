// The progress line for the npm CLI (app/progress_text.h): Node reads the clock, the environment and whether
// stderr is a terminal; the core decides whether and when to draw and what, so both CLIs draw the same bytes.
#include <emscripten/bind.h>

#include <optional>
#include <string>

#include "app/progress_text.h"
#include "core/json.h"

namespace {

using pb::app::ProgressMeter;

// {json, quiet, noProgress, stderrIsTerminal, progressVariable, clockVariable} (the variables a string or
// null), as app::ProgressEnvironment. A field missing or of another type reads as false / unset.
pb::app::ProgressSettings SettingsFromJson(const std::string& text) {
  pb::app::ProgressEnvironment env;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    auto flag = [&](const char* key) { return j.contains(key) && j[key].is_boolean() && j[key].get<bool>(); };
    auto variable = [&](const char* key) {
      return j.contains(key) && j[key].is_string() ? std::optional<std::string>(j[key].get<std::string>())
                                                   : std::nullopt;
    };
    env.json = flag("json");
    env.quiet = flag("quiet");
    env.no_progress = flag("noProgress");
    env.stderr_is_terminal = flag("stderrIsTerminal");
    env.progress_variable = variable("progressVariable");
    env.clock_variable = variable("clockVariable");
  }
  return pb::app::ProgressSettingsFor(env);
}

// Byte counts cross as doubles (exact up to 2^53); a negative or non-finite one reads as 0.
uint64_t Bytes(double n) { return n > 0 && n < 18446744073709551616.0 ? static_cast<uint64_t>(n) : 0; }

class Progress {
 public:
  Progress(double total, const std::string& environment_json)
      : meter_(Bytes(total), SettingsFromJson(environment_json)) {}
  std::string start_file(const std::string& name, double done, double seconds) {
    return meter_.StartFile(name, Bytes(done), seconds);
  }
  // Shards merged at once (the npm CLI's shard workers): one line for all, named as the native CLI names it.
  std::string start_files_at_once(double count, double done, double seconds) {
    return meter_.StartFile(pb::app::FilesAtOnceLabel(static_cast<size_t>(Bytes(count))), Bytes(done), seconds);
  }
  std::string update(double done, double seconds) { return meter_.Update(Bytes(done), seconds); }
  std::string finish(double seconds) { return meter_.Finish(seconds); }
  std::string abandon() { return meter_.Abandon(); }

 private:
  ProgressMeter meter_;
};

}  // namespace

EMSCRIPTEN_BINDINGS(peft_bridge_progress) {
  emscripten::class_<Progress>("ProgressMeter")
      .constructor<double, std::string>()
      .function("startFile", &Progress::start_file)
      .function("startFilesAtOnce", &Progress::start_files_at_once)
      .function("update", &Progress::update)
      .function("finish", &Progress::finish)
      .function("abandon", &Progress::abandon);
  // The line's time alone ("ETA 0:05", "in 0:12"): the page's ETA beside its own progress bar.
  emscripten::function(
      "progressTimeText", +[](double done, double total, double seconds) {
        return pb::app::ProgressTimeText(Bytes(done), Bytes(total), seconds);
      });
}

// The output policy for the npm CLI (app/output_policy_json.h): Node gathers the facts, the core decides and
// words every refusal, so both CLIs refuse the same things with the same bytes.
#include <emscripten/bind.h>

#include "app/output_policy_json.h"
#include "app/report.h"
#include "failure_value.h"

namespace {

using emscripten::val;

// {ok: true, value} or {ok: false, errorJson, errorText}.
val Outcome(const pb::Result<std::string>& r, const char* key) {
  if (!r.ok()) return pb::wasm::FailureValue(r.error());
  val out = val::object();
  out.set("ok", true);
  out.set(key, r.value());
  return out;
}

}  // namespace

EMSCRIPTEN_BINDINGS(peft_bridge_output_policy) {
  emscripten::function(
      "planOutput", +[](const std::string& request) { return Outcome(pb::app::PlanOutputJson(request), "planJson"); });
  emscripten::function(
      "planExtraFiles",
      +[](const std::string& request) { return Outcome(pb::app::PlanExtraFilesJson(request), "planJson"); });
  emscripten::function(
      "namedInputs", +[](const std::string& line) { return Outcome(pb::app::NamedInputsJson(line), "inputsJson"); });
  emscripten::function(
      "renderCommitJournal",
      +[](const std::string& request) { return Outcome(pb::app::RenderCommitJournalJson(request), "text"); });
  emscripten::function(
      "parseCommitJournal", +[](const std::string& text, const std::string& path) {
        return Outcome(pb::app::ParseCommitJournalJson(text, path), "journalJson");
      });
  // {ok: true} or the refusal of a journal too large to be ours, checked before Node reads the file.
  emscripten::function(
      "checkCommitJournalSize", +[](double bytes, const std::string& path) {
        const auto status = pb::app::CheckCommitJournalSize(static_cast<uint64_t>(bytes), path);
        if (!status.ok()) return pb::wasm::FailureValue(status.error());
        val out = val::object();
        out.set("ok", true);
        return out;
      });
}

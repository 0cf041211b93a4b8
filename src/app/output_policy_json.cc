#include "app/output_policy_json.h"

#include <nlohmann/json.hpp>

namespace pb::app {
namespace {

using nlohmann::json;

// Templates over the JSON type: the npm CLI's requests arrive as text (nlohmann's json), a job's options already
// parsed (pb::Json).
template <class J>
std::string Str(const J& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].template get<std::string>() : std::string();
}

template <class J>
bool Flag(const J& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].template get<bool>();
}

EntryKind KindOf(const std::string& kind) {
  if (kind == "file") return EntryKind::kFile;
  if (kind == "directory") return EntryKind::kDirectory;
  if (kind == "symlink") return EntryKind::kSymlink;
  return EntryKind::kOther;
}

json Names(const std::vector<std::string>& names) {
  json a = json::array();
  for (const auto& n : names) a.push_back(n);
  return a;
}

Result<json> Parse(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return MakeError(ErrorCode::InvalidArgument, "output policy request is not a JSON object");
  return j;
}

}  // namespace

namespace {

template <class J>
OutputPolicyRequest RequestOf(const J& j) {
  OutputPolicyRequest r;
  if (j.contains("inputs") && j["inputs"].is_array())
    for (const auto& i : j["inputs"]) {
      InputFact in{Str(i, "label"), Str(i, "path"),       Str(i, "real"), Str(i, "entry"),
                   Str(i, "id"),    Flag(i, "directory"), std::nullopt,   Str(i, "withinPath")};
      if (i.is_object() && i.contains("within") && i["within"].is_string())
        in.within = i["within"].template get<std::string>();
      r.inputs.push_back(std::move(in));
    }
  r.flags = OutputFlags{Flag(j, "force"), Flag(j, "followLinks")};
  r.command = Str(j, "command");
  if (j.contains("out") && j["out"].is_object()) {
    const J& o = j["out"];
    OutputRequest out;
    out.label = Str(o, "label");
    out.path = Str(o, "path");
    out.real = Str(o, "real");
    out.exists = Flag(o, "exists");
    out.single_file = Flag(o, "singleFile");
    if (o.contains("listing") && o["listing"].is_array())
      for (const auto& e : o["listing"])
        out.listing.push_back({Str(e, "name"), KindOf(Str(e, "kind")), Str(e, "id"), Str(e, "targetId")});
    if (o.contains("writes") && o["writes"].is_array())
      for (const auto& w : o["writes"])
        if (w.is_string()) out.writes.push_back(w.template get<std::string>());
    r.out = std::move(out);
  }
  return r;
}

template <class J>
CommandLine LineOf(const J& j) {
  CommandLine line;
  if (!j.is_object()) return line;
  line.command = Str(j, "command");
  if (j.contains("positional") && j["positional"].is_array())
    for (const auto& p : j["positional"])
      if (p.is_string()) line.positional.push_back(p.template get<std::string>());
  if (j.contains("options") && j["options"].is_object())
    for (const auto& [name, values] : j["options"].items())
      if (values.is_array())
        for (const auto& v : values)
          if (v.is_string()) line.options[name].push_back(v.template get<std::string>());
  return line;
}

}  // namespace

Result<OutputPolicyRequest> ParseOutputPolicyRequest(const std::string& request) {
  PB_ASSIGN_OR_RETURN(auto parsed, Parse(request));
  return RequestOf(parsed);
}

Result<OutputPolicyRequest> OutputPolicyRequestOf(const Json& request) {
  if (!request.is_object()) return MakeError(ErrorCode::InvalidArgument, "output policy request is not a JSON object");
  return RequestOf(request);
}

std::string RenderOutputPlanJson(const OutputPlan& plan) {
  return json{{"commit", Names(plan.commit)},
              {"replace", Names(plan.replace)},
              {"remove", Names(plan.remove)},
              {"stale", Names(plan.stale)}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<std::string> PlanOutputJson(const std::string& request) {
  PB_ASSIGN_OR_RETURN(auto r, ParseOutputPolicyRequest(request));
  OutputPlan plan;
  if (!r.out) {
    PB_RETURN_IF_ERROR(CheckInputLinks(r.command, r.inputs, r.flags));
  } else {
    PB_ASSIGN_OR_RETURN(auto planned, PlanOutput(r.command, r.inputs, *r.out, r.flags));
    plan = std::move(planned);
  }
  return RenderOutputPlanJson(plan);
}

CommandLine CommandLineFromJson(const std::string& line_json) {
  return LineOf(json::parse(line_json, nullptr, /*allow_exceptions=*/false));
}

CommandLine CommandLineOf(const Json& line) { return LineOf(line); }

Result<std::string> NamedInputsJson(const std::string& line_json) {
  PB_RETURN_IF_ERROR(Parse(line_json).status());  // a request that is not JSON is refused, not read as empty
  const CommandLine line = CommandLineFromJson(line_json);
  json a = json::array();
  for (const auto& n : NamedInputs(line)) a.push_back({{"label", n.label}, {"path", n.path}});
  return a.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<std::string> RenderCommitJournalJson(const std::string& request) {
  PB_ASSIGN_OR_RETURN(auto parsed, Parse(request));
  const json& j = parsed;
  CommitJournal journal;
  auto strings = [&](const char* key) {
    std::vector<std::string> v;
    if (j.contains(key) && j[key].is_array())
      for (const auto& s : j[key])
        if (s.is_string()) v.push_back(s.get<std::string>());
    return v;
  };
  if (j.contains("renames") && j["renames"].is_array())
    for (const auto& r : j["renames"]) journal.renames.push_back({Str(r, "temp"), Str(r, "final")});
  journal.remove = strings("remove");
  journal.asides = strings("asides");
  return RenderCommitJournal(journal);
}

Result<std::string> ParseCommitJournalJson(const std::string& text, const std::string& path) {
  PB_ASSIGN_OR_RETURN(auto journal, ParseCommitJournal(text, path));
  json renames = json::array();
  for (const auto& r : journal.renames) renames.push_back({{"temp", r.temp}, {"final", r.final}});
  return json{{"renames", renames}, {"remove", Names(journal.remove)}, {"asides", Names(journal.asides)}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

Result<std::string> PlanExtraFilesJson(const std::string& request) {
  PB_ASSIGN_OR_RETURN(auto parsed, Parse(request));
  const json& j = parsed;
  ExtraFilesRequest r;
  r.base_path = Str(j, "basePath");
  r.base_is_directory = Flag(j, "baseIsDirectory");
  r.writes_config = Flag(j, "writesConfig");
  r.copy_extra = Flag(j, "copyExtra");
  if (j.contains("listing") && j["listing"].is_array())
    for (const auto& e : j["listing"]) r.listing.push_back({Str(e, "name"), KindOf(Str(e, "kind"))});
  if (j.contains("written") && j["written"].is_array())
    for (const auto& w : j["written"])
      if (w.is_string()) r.written.push_back(w.get<std::string>());
  ExtraFiles extra = PlanExtraFiles(r);
  return json{{"copy", Names(extra.copy)}, {"warnings", extra.warnings}}.dump(-1, ' ', false,
                                                                              json::error_handler_t::replace);
}

}  // namespace pb::app

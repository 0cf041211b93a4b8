#include "app/output_policy.h"

#include <algorithm>
#include <set>

#include "net/remote_address.h"

namespace pb::app {
namespace {

// The CLIs' Join: no normalisation, so messages name paths as the user gave them.
std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool Inside(const std::string& path, const std::string& dir) {
  if (dir == "/") return path.size() > 1 && path[0] == '/';
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

std::string Parent(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Named(const InputFact& in) { return in.label + " `" + in.path + "`"; }

Error Refuse(std::string message) { return MakeError(ErrorCode::InvalidArgument, std::move(message)); }

// The output path of `name` as messages show it.
std::string OutputPath(const OutputRequest& out, const std::string& name) {
  return out.single_file ? out.path : Join(out.path, name);
}

std::string OutputNamed(const OutputRequest& out, const std::string& name) {
  return out.single_file ? out.label + " `" + out.path + "`" : "`" + Join(out.path, name) + "`";
}

const OutputEntry* FindEntry(const OutputRequest& out, const std::string& name) {
  for (const auto& e : out.listing)
    if (e.name == name) return &e;
  return nullptr;
}

// The input the entry `name` of the output directory is, if any: by path (the link itself or where it leads)
// and by identity (hard links).
const InputFact* InputAt(const std::vector<InputFact>& inputs, const OutputRequest& out, const std::string& name) {
  const OutputEntry* entry = FindEntry(out, name);
  for (const auto& in : inputs) {
    if (in.directory) continue;
    auto at = [&](const std::string& p) { return !p.empty() && Parent(p) == out.real && BaseName(p) == name; };
    if (at(in.entry) || at(in.real)) return &in;
    if (entry && !in.id.empty() && (entry->id == in.id || entry->target_id == in.id)) return &in;
  }
  return nullptr;
}

}  // namespace

bool IsModelFile(std::string_view name) {
  constexpr std::string_view kSuffix = ".safetensors";
  return (name.size() > kSuffix.size() && name.ends_with(kSuffix)) || name == "model.safetensors.index.json" ||
         name == "adapter_config.json";
}

bool IsOwnTemporary(std::string_view name) {
  constexpr size_t kSuffix = 5 + 6;  // ".tmp-" or ".old-", then six letters
  if (name.size() <= kSuffix) return false;
  const std::string_view tag = name.substr(name.size() - kSuffix, 5);
  if (tag != ".tmp-" && tag != ".old-") return false;
  for (char c : name.substr(name.size() - 6))
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

std::vector<NamedInput> NamedInputs(const CommandLine& line) {
  std::vector<NamedInput> named;
  auto add = [&](const std::string& label, const std::string& path) {
    if (!net::IsRemoteArgument(path)) named.push_back({label, path});
  };
  const std::string& c = line.command;
  if (c == "convert" && !line.positional.empty()) add("IN", line.positional[0]);
  if (c == "translate" && !line.positional.empty()) add("IN_DIR", line.positional[0]);
  if (c == "combine")
    for (const auto& p : line.positional) add("ADAPTER", p);
  for (const char* option : {"base", "adapter", "tuned", "base-config", "naming-table"})
    for (const auto& v : line.Values(option)) add(std::string("--") + option, v);
  return named;
}

namespace {

bool PlainName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos && name.find('\n') == std::string_view::npos;
}

}  // namespace

// One line per entry: "rename TEMP FINAL" (a tab between the names), "remove NAME", "aside NAME", after a first
// line naming the format.
std::string RenderCommitJournal(const CommitJournal& journal) {
  std::string text = "peft-bridge commit journal 1\n";
  for (const auto& r : journal.renames) text += "rename " + r.temp + "\t" + r.final + "\n";
  for (const auto& n : journal.remove) text += "remove " + n + "\n";
  for (const auto& n : journal.asides) text += "aside " + n + "\n";
  return text;
}

Status CheckCommitJournalSize(uint64_t bytes, std::string_view path) {
  if (bytes <= kMaxCommitJournalBytes) return Status::Ok();
  return MakeError(ErrorCode::InvalidArgument,
                   "`" + std::string(path) + "` is not a commit journal peft-bridge wrote (it is " +
                       std::to_string(bytes) + " bytes; a journal is at most " +
                       std::to_string(kMaxCommitJournalBytes) + "); remove it once you have checked the directory");
}

Result<CommitJournal> ParseCommitJournal(std::string_view text, std::string_view path) {
  PB_RETURN_IF_ERROR(CheckCommitJournalSize(text.size(), path));
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::InvalidArgument, "`" + std::string(path) +
                                                     "` is not a commit journal peft-bridge wrote (" + why +
                                                     "); remove it once you have checked the directory");
  };
  constexpr std::string_view kFirst = "peft-bridge commit journal 1\n";
  if (!text.starts_with(kFirst)) return bad("its first line");
  if (!text.ends_with('\n')) return bad("it ends mid-line");
  CommitJournal journal;
  text.remove_prefix(kFirst.size());
  for (size_t line_no = 2; !text.empty(); ++line_no) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    const std::string where = "line " + std::to_string(line_no);
    if (line.starts_with("rename ")) {
      line.remove_prefix(7);
      const size_t tab = line.find('\t');
      if (tab == std::string_view::npos) return bad(where);
      std::string temp(line.substr(0, tab)), final(line.substr(tab + 1));
      if (!PlainName(temp) || !PlainName(final) || !IsOwnTemporary(temp)) return bad(where);
      journal.renames.push_back({std::move(temp), std::move(final)});
    } else if (line.starts_with("remove ")) {
      std::string name(line.substr(7));
      if (!PlainName(name) || !IsModelFile(name)) return bad(where);
      journal.remove.push_back(std::move(name));
    } else if (line.starts_with("aside ")) {
      std::string name(line.substr(6));
      if (!PlainName(name) || !IsOwnTemporary(name)) return bad(where);
      journal.asides.push_back(std::move(name));
    } else {
      return bad(where);
    }
  }
  return journal;
}

Status CheckInputLinks(std::string_view command, const std::vector<InputFact>& inputs, const OutputFlags& flags) {
  if (flags.follow_links) return Status::Ok();
  std::string lines;
  size_t count = 0;
  std::set<std::string> seen;
  for (const auto& in : inputs) {
    if (!in.within || in.real == *in.within || Inside(in.real, *in.within)) continue;
    if (!seen.insert(in.path).second) continue;
    ++count;
    lines += "\n  " + in.path + " -> " + in.real + " (outside " + in.within_path + ")";
  }
  if (count == 0) return Status::Ok();
  return Refuse(
      std::string(command) + ": " + std::to_string(count) +
      " input file(s) are links leading outside their directory; pass --follow-links to read them anyway:" + lines);
}

Result<OutputPlan> PlanOutput(std::string_view command, const std::vector<InputFact>& inputs, const OutputRequest& out,
                              const OutputFlags& flags) {
  PB_RETURN_IF_ERROR(CheckInputLinks(command, inputs, flags));
  if (out.failure) return *out.failure;
  const std::string never = "; " + std::string(command) + " never writes over its inputs";
  const std::string out_named = out.label + " `" + out.path + "`";

  // The output directory itself: not an input directory, not inside one.
  if (!out.single_file)
    for (const auto& in : inputs) {
      if (!in.directory) continue;
      if (out.real == in.real) return Refuse(out_named + " is the input directory " + Named(in) + never);
      if (Inside(out.real, in.real)) return Refuse(out_named + " is inside the input directory " + Named(in) + never);
    }

  OutputPlan plan;
  plan.commit = out.writes;
  std::set<std::string> writes(out.writes.begin(), out.writes.end());
  // Our own temporaries a killed run left are removed, not kept and not counted (never an input's name, though).
  std::vector<OutputEntry> listing;
  for (const auto& e : out.listing) {
    if (!out.single_file && (e.kind == EntryKind::kFile || e.kind == EntryKind::kSymlink) && !writes.count(e.name) &&
        IsOwnTemporary(e.name) && !InputAt(inputs, out, e.name))
      plan.stale.push_back(e.name);
    else listing.push_back(e);
  }
  std::sort(plan.stale.begin(), plan.stale.end());
  std::sort(listing.begin(), listing.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& e : listing) {
    bool replaceable = e.kind == EntryKind::kFile || e.kind == EntryKind::kSymlink;
    if (writes.count(e.name)) {
      if (replaceable) plan.replace.push_back(e.name);
    } else if (flags.force && !out.single_file && replaceable && IsModelFile(e.name)) {
      plan.remove.push_back(e.name);
    }
  }

  // No file written, replaced or removed may be an input.
  for (const auto& name : out.writes)
    if (const InputFact* in = InputAt(inputs, out, name))
      return Refuse(OutputNamed(out, name) + " is " + Named(*in) + never);
  for (const auto& name : plan.remove)
    if (const InputFact* in = InputAt(inputs, out, name))
      return Refuse("--force would remove " + OutputNamed(out, name) + ", which is " + Named(*in) + never);

  // A name to write that is taken by a directory (or a device, a socket...) is refused before anything is written.
  std::string blocked;
  for (const auto& e : listing) {
    if (!writes.count(e.name) || e.kind == EntryKind::kFile || e.kind == EntryKind::kSymlink) continue;
    blocked += "\n  " + OutputPath(out, e.name) +
               (e.kind == EntryKind::kDirectory ? " is a directory" : " is not a regular file");
  }
  if (!blocked.empty())
    return Refuse(std::string(command) + " cannot replace what is in the way of its output files:" + blocked);

  if (!out.single_file && !flags.force && !listing.empty()) {
    std::string names;
    for (size_t i = 0; i < listing.size() && i < 20; ++i) names += (i ? ", " : "") + listing[i].name;
    if (listing.size() > 20) names += ", and " + std::to_string(listing.size() - 20) + " more";
    return Refuse(out_named + " is not empty (" + names +
                  "); pass --force to replace the model files in it (other files are kept)");
  }
  return plan;
}

}  // namespace pb::app

#include "app/output_policy.h"

#include <algorithm>
#include <set>

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
  return Refuse(std::string(command) + ": " + std::to_string(count) +
                " input file(s) are links leading outside their directory; pass --follow-links to read them anyway:" +
                lines);
}

Result<OutputPlan> PlanOutput(std::string_view command, const std::vector<InputFact>& inputs,
                              const OutputRequest& out, const OutputFlags& flags) {
  PB_RETURN_IF_ERROR(CheckInputLinks(command, inputs, flags));
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
  std::vector<OutputEntry> listing = out.listing;
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
    blocked += "\n  " + OutputPath(out, e.name) + (e.kind == EntryKind::kDirectory ? " is a directory" : " is not a regular file");
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

// The output policy every writing command (translate, merge, unmerge, convert) follows, in both CLIs. Sans-I/O:
// the caller resolves paths and lists the output directory; this decides, and words every refusal, so the native
// and the npm CLI refuse the same things with the same bytes.
//
//  - No command writes over (or removes) any of its inputs, whatever their names: the output directory may not be
//    an input directory or lie inside one, and no file the command writes, replaces or removes may be an input.
//  - A non-empty output directory is refused unless --force; with --force the command replaces the files it
//    writes and removes the model files it would otherwise leave stale (old shards, old index, ...), nothing else.
//  - An input file reached through a link that leaves its input directory is refused unless --follow-links.
//  - A name the command writes that exists as a directory (or anything but a file or link) is refused up front.
//  - Our own temporary files left in the output directory by a run that was killed (NAME.tmp-XXXXXX,
//    NAME.old-XXXXXX: IsOwnTemporary) are stale: the next run into that directory removes them, and they do not make
//    it non-empty. An interrupted commit is completed from its journal (CommitJournal) before the directory is
//    described, so the policy decides on what a finished commit left.
#pragma once

#include "adapter/adapter.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/command_line.h"
#include "core/error.h"
#include "core/result.h"

namespace pb::app {

// One input of the command, as the caller resolved it.
struct InputFact {
  std::string label;  // how messages name it: "IN_DIR", "--adapter", "--base", "--base-config", "IN"
  std::string path;   // as the command opened it (messages)
  std::string real;   // canonical path, every link resolved
  std::string entry;  // canonical directory of `path` + "/" + its last component (the link itself, if it is one)
  std::string id;     // identity of what `path` resolves to ("device:inode"); empty when unknown
  bool directory = false;
  // A file found in a directory the user named (a shard, the adapter's weights, a config beside them), or a
  // file named directly (then its own directory): that directory's canonical path and its path as given.
  // Its real path must stay inside unless --follow-links.
  std::optional<std::string> within;
  std::string within_path;
};

enum class EntryKind { kFile, kDirectory, kSymlink, kOther };

// One entry of the output directory as it is now (not following links).
struct OutputEntry {
  std::string name;
  EntryKind kind = EntryKind::kFile;
  std::string id;         // "device:inode" of the entry itself
  std::string target_id;  // for a link, of what it leads to (empty when dangling): a link to an input is refused
};

struct OutputRequest {
  std::string label = "OUT_DIR";  // "OUT_DIR", "--out" or "OUT" (messages)
  std::string path;               // as given (messages)
  std::string real;               // canonical path; for a directory still to be created, canonical parent + name
  bool exists = false;
  std::vector<OutputEntry> listing;  // the directory's entries (convert: at least the one named like OUT)
  std::vector<std::string> writes;   // the names the command writes into it, in the order it commits them
  bool single_file = false;          // convert: OUT is one file in a shared directory, replaced without --force
  // Describing it failed (an interrupted commit the CLI could not complete): PlanOutput returns it.
  std::optional<Error> failure;
};

struct OutputFlags {
  bool force = false;
  bool follow_links = false;
};

struct OutputPlan {
  std::vector<std::string> commit;   // names renamed into place, in this order
  std::vector<std::string> replace;  // existing entries the commit replaces: moved aside, restored on failure
  std::vector<std::string> remove;   // stale model files (--force): moved aside, deleted once all are in place
  std::vector<std::string> stale;    // our own temporaries a killed run left (IsOwnTemporary): removed at the start
};

// Model files --force may remove: *.safetensors, model.safetensors.index.json, adapter_config.json.
bool IsModelFile(std::string_view name);

// The names our transactions give their temporary files, and nothing else: NAME.tmp-XXXXXX (a file being written)
// and NAME.old-XXXXXX (a file moved aside during a commit), NAME not empty, XXXXXX six of [A-Za-z0-9_-] (mkstemp's
// letters natively, base64url in the npm CLI).
bool IsOwnTemporary(std::string_view name);

// A path the command line names that the command reads (every one, whatever flag names it): merge and unmerge's
// --base and --adapter, extract's --tuned, create and extract's --base, convert's IN, translate's IN_DIR, combine's
// ADAPTERs, and every command's --base-config and --naming-table. Remote addresses are left out. Each CLI turns
// them into InputFacts (with the files it finds inside the directories) for PlanOutput.
struct NamedInput {
  std::string label;  // "--naming-table", "--base", "IN"...
  std::string path;
};
std::vector<NamedInput> NamedInputs(const CommandLine& line);

// The journal of a commit in progress, kept in the output directory under kCommitJournalName from before the
// first rename until every new file is in place. A run that finds one (the last run was killed mid-commit: SIGKILL,
// the OOM killer, a power cut) completes that commit before anything else: every temporary file still there is
// renamed to its final name, every stale file and every file moved aside is removed, then the journal. The new
// files were complete and synced before the journal was written, so completing is always possible; the directory
// then holds exactly the model that run wrote.
inline constexpr std::string_view kCommitJournalName = ".peft-bridge-commit";
struct CommitJournal {
  struct Rename {
    std::string temp;   // a plain name in the directory (IsOwnTemporary)
    std::string final;  // a plain name in the directory
  };
  std::vector<Rename> renames;      // the new files
  std::vector<std::string> remove;  // stale files --force removes, if still there
  std::vector<std::string> asides;  // files moved aside (IsOwnTemporary), removed at the end
};
std::string RenderCommitJournal(const CommitJournal& journal);
// A journal names files of one directory, a line each, so even a model of 100,000 shards writes a few MiB; a larger
// file is not one of ours, and the edges check its size before reading it (a hostile or corrupt OUT must not make a
// run read gigabytes into memory). Ok, or InvalidArgument naming `path` and both sizes.
inline constexpr uint64_t kMaxCommitJournalBytes = uint64_t{16} << 20;
Status CheckCommitJournalSize(uint64_t bytes, std::string_view path);
// The journal as written, or InvalidArgument when it is not one (every name must be a plain name; temporary names
// must be our own), naming `path`.
Result<CommitJournal> ParseCommitJournal(std::string_view text, std::string_view path);

// The refusal for links leaving their input directory (every one, one per line), or Ok.
Status CheckInputLinks(std::string_view command, const std::vector<InputFact>& inputs, const OutputFlags& flags);

// Every check above; the plan, or the first refusal (InvalidArgument, naming what is aliased or what blocks).
Result<OutputPlan> PlanOutput(std::string_view command, const std::vector<InputFact>& inputs, const OutputRequest& out,
                              const OutputFlags& flags);

// A tensor of the input the output will not hold, and why; the no-silent-loss rule is the core's
// (adapter::CheckDropped), which translate, merge and combine apply themselves.
using DroppedTensor = adapter::RejectedTensor;
using adapter::CheckDropped;

}  // namespace pb::app

// All-or-nothing output of several files into one directory (translate, merge, convert). Every file is written
// under a temporary name; Commit then checks every final name and, in a critical section an interrupt waits for
// (cli/interrupts.h), writes the commit journal (app::CommitJournal), moves aside what the new files replace and the
// stale files --force removes, renames the new files into place, removes the journal, and deletes what was moved
// aside. A failure at any step undoes the ones before it; a run killed outright (SIGKILL) leaves the journal, and
// the next run into the directory completes that commit (RecoverOutputDirectory) before anything else. A
// transaction that never commits (any error path, by plain scope exit) removes its temporary files and the
// directory if it created it. A single file (convert's OUT) is renamed over its destination in one step.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/output_policy.h"
#include "cli/file_io.h"

namespace pb::cli {

// A file a transaction of this process committed: its name in the output (the repo path --push-to gives it) and
// where it was written.
struct CommittedOutput {
  std::string name;
  std::string path;
};
// Every file committed so far, in order.
const std::vector<CommittedOutput>& CommittedOutputs();

// Completes the commit an earlier run was killed in, if `dir` holds its journal: its new files renamed into place,
// what it moved aside and the stale files it removes deleted, then the journal. Error: a journal that is not ours,
// or a step that failed (the journal stays).
Status RecoverOutputDirectory(const std::string& dir);

class OutputTransaction {
 public:
  // Creates `dir` unless it is a directory already, and removes the stale temporary files the plan lists. `plan`
  // comes from app::PlanOutput.
  static Result<std::unique_ptr<OutputTransaction>> Begin(std::string dir, app::OutputPlan plan);
  // A single file (convert's OUT): no directory to create, the plan commits just its name.
  static std::unique_ptr<OutputTransaction> ForFile(const std::string& path, app::OutputPlan plan);
  ~OutputTransaction();
  OutputTransaction(const OutputTransaction&) = delete;
  OutputTransaction& operator=(const OutputTransaction&) = delete;

  // A new temporary file for `name` (one of the plan's commit names), written through the returned sink.
  Result<AtomicOutputFile*> Add(const std::string& name);
  // Prepares every file, then commits them all or none.
  Status Commit();

 private:
  OutputTransaction(std::string dir, app::OutputPlan plan, bool created, bool single_file)
      : dir_(std::move(dir)), plan_(std::move(plan)), created_(created), single_file_(single_file) {}
  std::string PathOf(const std::string& name) const;
  Status CommitDirectory();

  std::string dir_;
  app::OutputPlan plan_;
  bool created_;
  bool single_file_;
  bool committed_ = false;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<AtomicOutputFile>> files_;
};

}  // namespace pb::cli

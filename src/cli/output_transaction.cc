#include "cli/output_transaction.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/adapter_dir.h"
#include "cli/input_facts.h"
#include "cli/interrupts.h"

namespace pb::cli {
namespace {

Error IoFailure(const std::string& what, const std::string& path) {
  return MakeError(ErrorCode::IoError, what + " `" + path + "`: " + std::strerror(errno));
}

void SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);  // best effort: the renames are durable on most file systems without it
  ::close(fd);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::string BaseNameOf(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::vector<CommittedOutput>& MutableCommittedOutputs() {
  static std::vector<CommittedOutput> outputs;
  return outputs;
}

}  // namespace

const std::vector<CommittedOutput>& CommittedOutputs() { return MutableCommittedOutputs(); }

Status RecoverOutputDirectory(const std::string& dir) {
  const std::string journal_path = Join(dir, std::string(app::kCommitJournalName));
  if (!Exists(journal_path)) return Status::Ok();
  auto hold = CriticalSection();
  struct stat st {};
  if (::stat(journal_path.c_str(), &st) == 0)  // before reading it: a huge file is refused unread
    PB_RETURN_IF_ERROR(app::CheckCommitJournalSize(static_cast<uint64_t>(st.st_size), journal_path));
  PB_ASSIGN_OR_RETURN(auto bytes, ReadWholeFile(journal_path));
  PB_ASSIGN_OR_RETURN(auto journal, app::ParseCommitJournal(std::string(bytes.begin(), bytes.end()), journal_path));
  for (const auto& r : journal.renames) {
    const std::string temp = Join(dir, r.temp), final = Join(dir, r.final);
    if (Exists(temp) && ::rename(temp.c_str(), final.c_str()) != 0)
      return IoFailure("cannot complete the interrupted commit: cannot rename into", final);
  }
  for (const auto& name : journal.remove) ::unlink(Join(dir, name).c_str());
  SyncDirectory(dir);
  if (::unlink(journal_path.c_str()) != 0 && errno != ENOENT) return IoFailure("cannot remove", journal_path);
  for (const auto& name : journal.asides) ::unlink(Join(dir, name).c_str());
  SyncDirectory(dir);
  return Status::Ok();
}

Result<std::unique_ptr<OutputTransaction>> OutputTransaction::Begin(std::string dir, app::OutputPlan plan) {
  auto hold = CriticalSection();  // an interrupt finds the directory it created registered
  PB_ASSIGN_OR_RETURN(auto created, EnsureDirectory(dir));
  if (created) TrackCreatedDirectory(dir);
  for (const auto& name : plan.stale) ::unlink(Join(dir, name).c_str());  // what a killed run left
  return std::unique_ptr<OutputTransaction>(new OutputTransaction(std::move(dir), std::move(plan), created, false));
}

std::unique_ptr<OutputTransaction> OutputTransaction::ForFile(const std::string& path, app::OutputPlan plan) {
  return std::unique_ptr<OutputTransaction>(new OutputTransaction(path, std::move(plan), false, true));
}

OutputTransaction::~OutputTransaction() {
  auto hold = CriticalSection();
  files_.clear();  // unlinks every temporary file not renamed into place
  if (created_) {
    if (!committed_) RemoveEmptyDirectory(dir_);
    ForgetCreatedDirectory(dir_);
  }
}

std::string OutputTransaction::PathOf(const std::string& name) const { return single_file_ ? dir_ : Join(dir_, name); }

Result<AtomicOutputFile*> OutputTransaction::Add(const std::string& name) {
  PB_ASSIGN_OR_RETURN(auto file, AtomicOutputFile::Create(PathOf(name)));
  names_.push_back(name);
  files_.push_back(std::move(file));
  return files_.back().get();
}

Status OutputTransaction::Commit() {
  for (auto& f : files_) PB_RETURN_IF_ERROR(f->Prepare());
  // Every final name is checked before anything is renamed: a directory in the way fails the whole commit.
  for (const auto& f : files_) {
    struct stat st;
    if (::lstat(f->final_path().c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
      return MakeError(ErrorCode::IoError,
                       "cannot replace `" + f->final_path() +
                           "`: " + (S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file"));
  }
  auto hold = CriticalSection();  // an interrupt waits until the commit is done or undone
  if (single_file_) {
    // One rename replaces the destination at once: nothing to move aside.
    AtomicOutputFile& f = *files_.at(0);
    if (::rename(f.temp_path().c_str(), f.final_path().c_str()) != 0)
      return IoFailure("cannot rename into", f.final_path());
    f.MarkRenamed();
  } else {
    PB_RETURN_IF_ERROR(CommitDirectory());
  }
  committed_ = true;
  if (created_) ForgetCreatedDirectory(dir_);
  for (size_t i = 0; i < files_.size(); ++i)
    MutableCommittedOutputs().push_back(
        {single_file_ ? BaseNameOf(files_[i]->final_path()) : names_[i], files_[i]->final_path()});
  SyncDirectory(single_file_ ? DirectoryOf(dir_) : dir_);
  return Status::Ok();
}

// The journal first, then the moves aside, the renames, the journal's removal, the deletions; undone on failure.
Status OutputTransaction::CommitDirectory() {
  struct Aside {
    std::string original;
    std::string temp;
    bool moved = false;
  };
  std::vector<Aside> asides;
  auto drop_reserved = [&] {
    for (const auto& a : asides)
      if (!a.moved) ::unlink(a.temp.c_str());
  };
  // The names the files moved aside get, reserved now (mkstemp) so that the journal can list them.
  std::vector<std::string> moving = names_;
  moving.insert(moving.end(), plan_.remove.begin(), plan_.remove.end());
  for (const auto& name : moving) {
    const std::string path = PathOf(name);
    if (!Exists(path)) continue;  // nothing there (any more)
    std::string temp = path + ".old-XXXXXX";
    int fd = ::mkstemp(temp.data());
    if (fd < 0) {
      Error e = IoFailure("cannot move aside", path);
      drop_reserved();
      return e;
    }
    ::close(fd);
    asides.push_back({path, temp});
  }
  app::CommitJournal journal;
  for (size_t i = 0; i < files_.size(); ++i) journal.renames.push_back({BaseNameOf(files_[i]->temp_path()), names_[i]});
  journal.remove = plan_.remove;
  for (const auto& a : asides) journal.asides.push_back(BaseNameOf(a.temp));
  const std::string journal_path = Join(dir_, std::string(app::kCommitJournalName));
  {
    const std::string text = app::RenderCommitJournal(journal);
    auto file = AtomicOutputFile::Create(journal_path);
    Status s = file.ok() ? file.value()->Write({reinterpret_cast<const uint8_t*>(text.data()), text.size()})
                         : Status(file.error());
    if (s.ok()) s = file.value()->Persist();
    if (!s.ok()) {
      drop_reserved();
      return s;
    }
  }
  SyncDirectory(dir_);
  size_t renamed = 0;
  auto undo = [&] {
    for (size_t j = 0; j < renamed; ++j) ::rename(files_[j]->final_path().c_str(), files_[j]->temp_path().c_str());
    for (auto it = asides.rbegin(); it != asides.rend(); ++it)
      if (it->moved) ::rename(it->temp.c_str(), it->original.c_str());
    drop_reserved();
    ::unlink(journal_path.c_str());
    SyncDirectory(dir_);
  };
  for (auto& a : asides) {
    if (::rename(a.original.c_str(), a.temp.c_str()) != 0) {
      Error e = IoFailure("cannot move aside", a.original);
      undo();
      return e;
    }
    a.moved = true;
  }
  for (; renamed < files_.size(); ++renamed) {
    if (::rename(files_[renamed]->temp_path().c_str(), files_[renamed]->final_path().c_str()) != 0) {
      Error e = IoFailure("cannot rename into", files_[renamed]->final_path());
      undo();
      return e;
    }
  }
  for (auto& f : files_) f->MarkRenamed();
  SyncDirectory(dir_);
  ::unlink(journal_path.c_str());  // the commit point: the new files are all in place
  for (const auto& a : asides) ::unlink(a.temp.c_str());
  return Status::Ok();
}

}  // namespace pb::cli

#include "cli/output_transaction.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/adapter_dir.h"
#include "cli/input_facts.h"

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

std::vector<CommittedOutput>& MutableCommittedOutputs() {
  static std::vector<CommittedOutput> outputs;
  return outputs;
}

}  // namespace

const std::vector<CommittedOutput>& CommittedOutputs() { return MutableCommittedOutputs(); }

Result<std::unique_ptr<OutputTransaction>> OutputTransaction::Begin(std::string dir, app::OutputPlan plan) {
  PB_ASSIGN_OR_RETURN(auto created, EnsureDirectory(dir));
  return std::unique_ptr<OutputTransaction>(new OutputTransaction(std::move(dir), std::move(plan), created, false));
}

std::unique_ptr<OutputTransaction> OutputTransaction::ForFile(const std::string& path, app::OutputPlan plan) {
  return std::unique_ptr<OutputTransaction>(new OutputTransaction(path, std::move(plan), false, true));
}

OutputTransaction::~OutputTransaction() {
  files_.clear();  // unlinks every temporary file not renamed into place
  if (!committed_ && created_) RemoveEmptyDirectory(dir_);
}

std::string OutputTransaction::PathOf(const std::string& name) const { return single_file_ ? dir_ : Join(dir_, name); }

Result<AtomicOutputFile*> OutputTransaction::Add(const std::string& name) {
  PB_ASSIGN_OR_RETURN(auto file, AtomicOutputFile::Create(PathOf(name)));
  names_.push_back(name);
  files_.push_back(std::move(file));
  return files_.back().get();
}

Status OutputTransaction::MoveAside(const std::string& name, std::vector<Aside>& asides) {
  std::string path = PathOf(name);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::Ok();  // nothing there (any more)
  std::string temp = path + ".old-XXXXXX";
  int fd = ::mkstemp(temp.data());  // reserves a unique name; the rename below replaces it
  if (fd < 0) return IoFailure("cannot move aside", path);
  ::close(fd);
  if (::rename(path.c_str(), temp.c_str()) != 0) {
    Error e = IoFailure("cannot move aside", path);
    ::unlink(temp.c_str());
    return e;
  }
  asides.push_back({path, temp});
  return Status::Ok();
}

void OutputTransaction::Restore(std::vector<Aside>& asides) {
  for (auto it = asides.rbegin(); it != asides.rend(); ++it) ::rename(it->temp.c_str(), it->original.c_str());
  asides.clear();
}

Status OutputTransaction::Commit() {
  for (auto& f : files_)
    PB_RETURN_IF_ERROR(f->Prepare());
  // Every final name is checked before anything is renamed: a directory in the way fails the whole commit.
  for (const auto& f : files_) {
    struct stat st;
    if (::lstat(f->final_path().c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
      return MakeError(ErrorCode::IoError, "cannot replace `" + f->final_path() + "`: " +
                                               (S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file"));
  }
  std::vector<Aside> asides;
  for (const auto& name : names_)
    if (Status s = MoveAside(name, asides); !s.ok()) {
      Restore(asides);
      return s;
    }
  for (const auto& name : plan_.remove)
    if (Status s = MoveAside(name, asides); !s.ok()) {
      Restore(asides);
      return s;
    }
  for (size_t i = 0; i < files_.size(); ++i) {
    if (::rename(files_[i]->temp_path().c_str(), files_[i]->final_path().c_str()) != 0) {
      Error e = IoFailure("cannot rename into", files_[i]->final_path());
      for (size_t j = 0; j < i; ++j) {  // undo: the new files go, what they replaced comes back
        ::unlink(files_[j]->final_path().c_str());
        files_[j]->MarkRenamed();
      }
      Restore(asides);
      return e;
    }
    files_[i]->MarkRenamed();
  }
  for (const auto& a : asides) ::unlink(a.temp.c_str());
  committed_ = true;
  for (size_t i = 0; i < files_.size(); ++i)
    MutableCommittedOutputs().push_back(
        {single_file_ ? files_[i]->final_path().substr(files_[i]->final_path().rfind('/') + 1) : names_[i], files_[i]->final_path()});
  SyncDirectory(single_file_ ? DirectoryOf(dir_) : dir_);
  return Status::Ok();
}

}  // namespace pb::cli

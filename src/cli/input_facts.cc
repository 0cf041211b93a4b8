#include "cli/input_facts.h"

#include "net/remote_address.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "cli/adapter_dir.h"
#include "cli/file_io.h"
#include "cli/output_transaction.h"

namespace pb::cli {
namespace {

std::string StripTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::optional<std::string> RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) return std::nullopt;
  return std::string(buffer);
}

// The canonical path of `path`, which may not exist: its deepest existing ancestor resolved, the rest appended.
std::string Canonical(const std::string& given) {
  std::string path = StripTrailingSlashes(given);
  if (auto real = RealPath(path)) return *real;
  if (path == "/" || path.empty() || path == "." || path == "..") return path;
  std::string parent = Canonical(DirectoryOf(path));
  return parent == "/" ? "/" + BaseName(path) : parent + "/" + BaseName(path);
}

std::string IdOf(const struct stat& st) {
  return std::to_string(static_cast<unsigned long long>(st.st_dev)) + ":" +
         std::to_string(static_cast<unsigned long long>(st.st_ino));
}

std::string Identity(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? IdOf(st) : std::string();
}

app::EntryKind KindOf(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return app::EntryKind::kFile;
  if (S_ISDIR(st.st_mode)) return app::EntryKind::kDirectory;
  if (S_ISLNK(st.st_mode)) return app::EntryKind::kSymlink;
  return app::EntryKind::kOther;
}

}  // namespace

std::string DirectoryOf(const std::string& path) {
  std::string p = StripTrailingSlashes(path);
  size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

app::InputFact DirectoryFact(const std::string& label, const std::string& path) {
  app::InputFact f;
  f.label = label;
  f.path = path;
  f.real = Canonical(path);
  f.entry = f.real;
  f.id = Identity(path);
  f.directory = true;
  return f;
}

app::InputFact FileFact(const std::string& label, const std::string& path, const std::optional<std::string>& within) {
  app::InputFact f;
  f.label = label;
  f.path = path;
  f.real = Canonical(path);
  std::string parent = Canonical(DirectoryOf(path));
  f.entry = (parent == "/" ? "" : parent) + "/" + BaseName(StripTrailingSlashes(path));
  f.id = Identity(path);
  if (within) {
    f.within = Canonical(*within);
    f.within_path = *within;
  }
  return f;
}

void AddAdapterFacts(const std::string& label, const std::string& given, const std::string& weights_path,
                     std::vector<app::InputFact>& facts) {
  if (net::IsRemoteArgument(given)) return;  // nothing local to alias or to leave by a link
  std::optional<std::string> folder;
  if (IsDirectory(given)) {
    facts.push_back(DirectoryFact(label, given));
    folder = given;
    facts.push_back(FileFact(label, weights_path, folder));
  } else {
    facts.push_back(FileFact(label, weights_path, std::nullopt));  // named directly
    folder = DirectoryOf(weights_path);
  }
  if (std::string config = Join(*folder, "adapter_config.json"); IsRegularFile(config))
    facts.push_back(FileFact(label, config, folder));
}

void AddNamedInputFacts(const app::CommandLine& line, std::vector<app::InputFact>& facts) {
  for (const auto& named : app::NamedInputs(line))
    facts.push_back(IsDirectory(named.path) ? DirectoryFact(named.label, named.path)
                                            : FileFact(named.label, named.path, std::nullopt));
}

app::OutputRequest DescribeOutputDirectory(const std::string& label, const std::string& path,
                                           std::vector<std::string> writes) {
  app::OutputRequest out;
  out.label = label;
  out.path = path;
  out.real = Canonical(path);
  out.writes = std::move(writes);
  out.exists = IsDirectory(path);
  if (!out.exists) return out;
  if (Status s = RecoverOutputDirectory(path); !s.ok()) out.failure = s.error();
  if (DIR* d = ::opendir(path.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      if (::lstat(Join(path, name).c_str(), &st) != 0) continue;  // vanished meanwhile
      out.listing.push_back({name, KindOf(st), IdOf(st), S_ISLNK(st.st_mode) ? Identity(Join(path, name)) : ""});
    }
    ::closedir(d);
  }
  return out;
}

app::OutputRequest DescribeOutputFile(const std::string& path) {
  app::OutputRequest out;
  out.label = "OUT";
  out.path = path;
  out.real = Canonical(DirectoryOf(path));
  out.exists = true;
  out.single_file = true;
  out.writes = {BaseName(StripTrailingSlashes(path))};
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0)
    out.listing.push_back({out.writes[0], KindOf(st), IdOf(st), S_ISLNK(st.st_mode) ? Identity(path) : ""});
  return out;
}

}  // namespace pb::cli

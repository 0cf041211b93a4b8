#include "cli/base_model.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <span>

#include "app/base_layout.h"
#include "cli/adapter_dir.h"
#include "cli/file_io.h"
#include "cli/http_source.h"
#include "cli/input_facts.h"
#include "cli/local_model.h"
#include "net/http_policy.h"
#include "net/remote_address.h"

namespace pb::cli {
namespace {

constexpr size_t kReadChunk = 4 << 20;

// A local shard, opened only while it is read: a base of thousands of shards must not hold a descriptor per shard
// (the default limit is 1,024). Opened again, it must be the file whose header was read (same file, same size).
class LocalShard final : public ShardBytes {
 public:
  LocalShard(std::string path, const InputFile& file)
      : path_(std::move(path)), size_(file.size()), id_(file.Identity()) {}
  Status Stream(uint64_t begin, uint64_t end, const Deliver& deliver) override {
    std::optional<InputFile> opened;  // for this read only, unless the shard is acquired
    if (!file_) {
      PB_ASSIGN_OR_RETURN(auto f, Reopen());
      opened.emplace(std::move(f));
    }
    const InputFile& file = file_ ? *file_ : *opened;
    std::vector<uint8_t> buffer(static_cast<size_t>(std::min<uint64_t>(kReadChunk, end - begin)));
    for (uint64_t pos = begin; pos < end;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), end - pos));
      PB_RETURN_IF_ERROR(file.ReadAt(pos, std::span<uint8_t>(buffer.data(), n)));
      PB_RETURN_IF_ERROR(deliver(std::span<const uint8_t>(buffer.data(), n)));
      pos += n;
    }
    return Status::Ok();
  }
  bool ConcurrentStreams() const override { return true; }
  const InputFile* local_file() const override { return file_ ? &*file_ : nullptr; }
  Status Acquire() override {
    if (file_) return Status::Ok();
    PB_ASSIGN_OR_RETURN(auto f, Reopen());
    file_.emplace(std::move(f));
    return Status::Ok();
  }
  void Release() override { file_.reset(); }

 private:
  Result<InputFile> Reopen() const {
    PB_ASSIGN_OR_RETURN(auto f, InputFile::Open(path_));
    if (f.size() != size_ || f.Identity() != id_)
      return MakeError(ErrorCode::IoError,
                       "`" + path_ + "` changed while the command ran (it is not the file whose header was read)");
    return f;
  }
  std::string path_;
  uint64_t size_;
  std::string id_;
  std::optional<InputFile> file_;
};

class RemoteShard final : public ShardBytes {
 public:
  explicit RemoteShard(RemoteReader reader) : reader_(std::move(reader)) {}
  Status Stream(uint64_t begin, uint64_t end, const Deliver& deliver) override {
    return reader_.Stream(begin, end, deliver);
  }

 private:
  RemoteReader reader_;
};

// "name: message", as a local merge names the shard an error is about.
Error InShard(const std::string& name, Error e) {
  e.message = name + ": " + e.message;
  return e;
}

Status CheckIndex(const BaseModel& base) {
  if (!base.index) return Status::Ok();
  std::vector<merge::BaseShardHeader> shards;  // every weight_map entry must be in the shard it names
  for (size_t i = 0; i < base.headers.size(); ++i) shards.push_back({base.shard_names[i], &base.headers[i]});
  return merge::CheckIndexAgainstShards(*base.index, shards);
}

Result<BaseModel> OpenRemoteBase(const std::string& given) {
  PB_ASSIGN_OR_RETURN(auto address, ParseRemote(given));
  const net::RemoteAddress& a = address;
  std::vector<std::string> names;
  if (a.folder) {
    PB_ASSIGN_OR_RETURN(auto listing, ReadRemoteWhole(net::RemoteSelf(a), WholeCap::kJson));
    PB_ASSIGN_OR_RETURN(names, net::ParseHubListing(std::string(listing.bytes.begin(), listing.bytes.end()), a.label));
  }
  PB_ASSIGN_OR_RETURN(auto files, app::ChooseRemoteBase(a, names));
  BaseModel base;
  base.remote = true;
  base.is_directory = a.folder;
  base.listing = std::move(files.listing);
  if (files.index) {
    PB_ASSIGN_OR_RETURN(auto text, ReadRemoteWhole(net::RemoteEntry(a, *files.index), WholeCap::kJson));
    PB_ASSIGN_OR_RETURN(auto index, merge::ParseModelIndex(std::string(text.bytes.begin(), text.bytes.end())));
    base.shard_names = index.shard_names;
    base.index = std::move(index);
    base.commit = text.commit;  // every other file from the index's commit, even if the branch moves meanwhile
  } else {
    base.shard_names = {files.single};
  }
  if (files.config != app::RemoteBaseFiles::Config::kNone) {
    int status = 0;
    auto text = ReadRemoteWhole(net::RemoteEntry(a, "config.json", base.commit), WholeCap::kJson, &status);
    if (text.ok()) {
      base.config = std::string(text->bytes.begin(), text->bytes.end());
      if (!base.commit) base.commit = text->commit;
    } else if (files.config == app::RemoteBaseFiles::Config::kListed || status != 404) {
      return text.error();
    }
  }
  for (const auto& name : base.shard_names) {
    auto reader = RemoteReader::Open(net::RemoteEntry(a, name, base.commit));
    if (!reader.ok()) return InShard(name, reader.error());
    auto header = reader->ReadHeader();
    if (!header.ok()) return InShard(name, header.error());
    base.headers.push_back(std::move(header.value()));
    base.shards.push_back(std::make_unique<RemoteShard>(std::move(reader.value())));
  }
  return base;
}

Result<BaseModel> OpenLocalBase(const std::string& path) {
  BaseModel base;
  PB_ASSIGN_OR_RETURN(auto files, ChooseLocalModel(path));  // the rule of a remote folder's files
  base.is_directory = files.is_directory;
  base.dir = std::move(files.dir);
  base.shard_names = std::move(files.shard_names);
  base.index = std::move(files.index);
  if (IsRegularFile(Join(base.dir, "config.json"))) {
    PB_ASSIGN_OR_RETURN(auto text, ReadText(Join(base.dir, "config.json")));
    base.config = std::move(text);
  }
  for (const auto& name : base.shard_names) {
    PB_ASSIGN_OR_RETURN(auto file, InputFile::Open(Join(base.dir, name)));
    auto header = file.ReadHeader();
    if (!header.ok()) return InShard(name, header.error());
    base.headers.push_back(std::move(header.value()));
    base.shards.push_back(std::make_unique<LocalShard>(Join(base.dir, name), file));  // closed until read
  }
  return base;
}

}  // namespace

Result<BaseModel> OpenBase(const std::string& path, const std::optional<std::string>& config_path) {
  PB_ASSIGN_OR_RETURN(auto base, IsRemoteAddress(path) ? OpenRemoteBase(path) : OpenLocalBase(path));
  base.given = path;
  if (config_path) {
    PB_ASSIGN_OR_RETURN(auto text, ReadText(*config_path));
    base.config = std::move(text);
  }
  PB_RETURN_IF_ERROR(CheckIndex(base));
  return base;
}

std::vector<app::BaseEntry> ListBase(const BaseModel& base) {
  if (base.remote) return base.listing;
  std::vector<app::BaseEntry> entries;
  if (DIR* d = ::opendir(base.dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      app::EntryKind kind = app::EntryKind::kOther;
      if (::stat(Join(base.dir, name).c_str(), &st) == 0)
        kind = S_ISREG(st.st_mode)   ? app::EntryKind::kFile
               : S_ISDIR(st.st_mode) ? app::EntryKind::kDirectory
                                     : app::EntryKind::kOther;
      entries.push_back({name, kind});
    }
    ::closedir(d);
  }
  return entries;
}

Status CopyBaseFile(const BaseModel& base, const std::string& name, ByteSink& sink) {
  auto write = [&](std::span<const uint8_t> bytes) -> Status { return sink.Write(bytes); };
  if (base.remote) {
    PB_ASSIGN_OR_RETURN(auto address, ParseRemote(base.given));
    PB_ASSIGN_OR_RETURN(auto reader, RemoteReader::Open(net::RemoteEntry(address, name, base.commit)));
    return reader.Stream(0, net::kUnbounded, write);
  }
  PB_ASSIGN_OR_RETURN(auto in, InputFile::Open(Join(base.dir, name)));
  LocalShard file(Join(base.dir, name), in);
  return file.Stream(0, in.size(), write);
}

std::vector<app::InputFact> BaseFacts(const BaseModel& base, const std::optional<std::string>& config_path) {
  std::vector<app::InputFact> facts;
  if (!base.remote) {
    const bool named_dir = base.is_directory;
    if (named_dir) facts.push_back(DirectoryFact("--base", base.given));
    const bool index_file = !named_dir && base.index;  // --base names an index: its shards are in its folder
    if (index_file) facts.push_back(FileFact("--base", base.given, std::nullopt));
    for (const auto& name : base.shard_names)
      facts.push_back(named_dir || index_file ? FileFact("--base", Join(base.dir, name), base.dir)
                                              : FileFact("--base", base.given, std::nullopt));
    for (const char* name : {"model.safetensors.index.json", "config.json"})
      if ((named_dir || std::string(name) == "config.json") && IsRegularFile(Join(base.dir, name)))
        facts.push_back(FileFact("--base", Join(base.dir, name), base.dir));
  }
  if (config_path) facts.push_back(FileFact("--base-config", *config_path, std::nullopt));
  return facts;
}

}  // namespace pb::cli

// The base model of `merge` / `unmerge`, local or remote: its shard names (from the index, or the one file), each
// shard's header, config.json, the index, and the other files a merged folder gets. A local base is read with
// pread; a remote one (hf://owner/repo[/folder][@rev], or the URL of a .safetensors file or an index) by Range
// requests, in the order app::ChooseRemoteBase gives, every shard from the commit the index answered with.
// Only shard *bytes* are streamed: nothing here holds a shard.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <optional>
#include <string>
#include <vector>

#include "app/base_extras.h"
#include "app/output_policy.h"
#include "cli/file_io.h"
#include "core/header.h"
#include "core/writer.h"
#include "merge/model_index.h"

namespace pb::cli {

// One shard's bytes, wherever they are.
class ShardBytes {
 public:
  using Deliver = std::function<Status(std::span<const uint8_t>)>;
  virtual ~ShardBytes() = default;
  // Bytes [begin, end) of the file, in order, handed to `deliver` (which may stop the read with an error).
  virtual Status Stream(uint64_t begin, uint64_t end, const Deliver& deliver) = 0;
  // Whether several threads may Stream at once (a local file: pread; not a remote one's connection).
  virtual bool ConcurrentStreams() const { return false; }
  // A local shard's file while it is acquired (its ranges may be copied straight into an output:
  // AtomicOutputFile::CopyRegionFrom), else nullptr.
  virtual const InputFile* local_file() const { return nullptr; }
  // A local shard is open only between Acquire and Release (and for the length of a Stream otherwise), so that a
  // base of thousands of shards holds a few descriptors, not one per shard.
  virtual Status Acquire() { return Status::Ok(); }
  virtual void Release() {}
};

struct BaseModel {
  bool remote = false;
  std::string dir;  // a local base's directory (the one its file is in, for a file)
  std::vector<std::string> shard_names;
  std::vector<std::unique_ptr<ShardBytes>> shards;
  std::vector<Header> headers;
  std::optional<std::string> config;       // config.json beside the weights, or --base-config
  std::optional<merge::ModelIndex> index;  // model.safetensors.index.json
  bool is_directory = false;               // --base names a folder (local or remote): its other files are copied
  std::vector<app::BaseEntry> listing;     // a remote folder's files (a local one is listed when needed)
  std::string given;                       // --base as given
  std::optional<std::string> commit;       // a remote base's pinned commit
};

// Opens every shard and reads its header; checks the index against them. `config_path`: --base-config.
Result<BaseModel> OpenBase(const std::string& path, const std::optional<std::string>& config_path);

// The base's entries for app::PlanExtraFiles (a local directory is listed here, kinds as links lead).
std::vector<app::BaseEntry> ListBase(const BaseModel& base);

// Copies the base's other file `name` into `sink`, a chunk at a time.
Status CopyBaseFile(const BaseModel& base, const std::string& name, ByteSink& sink);

// The base's local inputs for the output policy: its directory (when one was named), every shard (and the index
// when --base names it), the index and config.json found beside them, and --base-config. A remote base has none
// but the last.
std::vector<app::InputFact> BaseFacts(const BaseModel& base, const std::optional<std::string>& config_path);

}  // namespace pb::cli

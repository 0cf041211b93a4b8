#include "cli/local_model.h"

#include <dirent.h>
#include <sys/stat.h>

#include "app/base_layout.h"
#include "app/report.h"
#include "cli/adapter_dir.h"
#include "cli/file_io.h"

namespace pb::cli {
namespace {

Result<merge::ModelIndex> ReadIndex(const std::string& path) {
  PB_ASSIGN_OR_RETURN(auto text, ReadText(path));
  return merge::ParseModelIndex(text);
}

}  // namespace

Result<LocalModelFiles> ChooseLocalModel(const std::string& path) {
  LocalModelFiles files;
  files.is_directory = IsDirectory(path);
  std::string first;
  if (files.is_directory) {
    files.dir = path;
    PB_ASSIGN_OR_RETURN(first, app::ChooseBaseFile(path, RegularFiles(path)));
    if (app::IsModelIndexName(first)) first = Join(path, first);
  } else {
    size_t slash = path.rfind('/');
    files.dir = slash == std::string::npos ? "." : path.substr(0, slash);
    first = path;
  }
  const std::string name = first.substr(first.rfind('/') == std::string::npos ? 0 : first.rfind('/') + 1);
  if (app::IsModelIndexName(name)) {  // the index of a sharded model: its shards are beside it
    PB_ASSIGN_OR_RETURN(auto index, ReadIndex(first));
    files.shard_names = index.shard_names;
    files.index = std::move(index);
  } else {
    files.shard_names.push_back(name);
  }
  return files;
}

Result<std::string> InspectLocalModel(const std::string& path, bool json) {
  PB_ASSIGN_OR_RETURN(auto files, ChooseLocalModel(path));
  std::vector<Header> headers;
  std::vector<RenderedReport> reports;
  for (const std::string& name : files.shard_names) {
    PB_ASSIGN_OR_RETURN(auto file, InputFile::Open(Join(files.dir, name)));
    auto header = file.ReadHeader();
    if (!header.ok()) {
      Error e = header.error();
      e.message = name + ": " + e.message;  // as a merge names the shard
      return e;
    }
    reports.push_back(
        {name, json ? RenderInspectJson(header.value()) : RenderInspectText(header.value()), TotalsOf(header.value())});
    headers.push_back(std::move(header.value()));
  }
  if (files.index) {  // every weight_map entry must be in the shard it names
    std::vector<merge::BaseShardHeader> shards;
    for (size_t i = 0; i < headers.size(); ++i) shards.push_back({files.shard_names[i], &headers[i]});
    PB_RETURN_IF_ERROR(merge::CheckIndexAgainstShards(*files.index, shards));
  }
  return json ? RenderInspectFilesJson(reports) : RenderInspectFilesText(reports);
}

}  // namespace pb::cli

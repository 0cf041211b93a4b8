#include "cli/remote_model.h"

#include <vector>

#include "app/base_layout.h"
#include "app/report.h"
#include "cli/http_source.h"
#include "merge/model_index.h"

namespace pb::cli {

Result<std::string> InspectRemoteModel(const net::RemoteAddress& a, bool json) {
  // Which file first: the folder's index or single file (as a local model directory), or the index named.
  std::optional<net::RemoteFile> index_file;
  std::vector<std::string> names;
  if (a.folder) {
    PB_ASSIGN_OR_RETURN(auto listing, ReadRemoteWhole(net::RemoteSelf(a), WholeCap::kJson));
    PB_ASSIGN_OR_RETURN(auto files,
                        net::ParseHubListing(std::string(listing.bytes.begin(), listing.bytes.end()), a.label));
    PB_ASSIGN_OR_RETURN(auto first, app::ChooseBaseFile(a.label, files));
    if (app::IsModelIndexName(first)) index_file = net::RemoteEntry(a, first);
    else names.push_back(first);
  } else {
    index_file = net::RemoteSelf(a);
  }
  std::optional<merge::ModelIndex> index;
  std::optional<std::string> commit;
  if (index_file) {
    PB_ASSIGN_OR_RETURN(auto text, ReadRemoteWhole(*index_file, WholeCap::kJson));
    PB_ASSIGN_OR_RETURN(auto parsed, merge::ParseModelIndex(std::string(text.bytes.begin(), text.bytes.end())));
    names = parsed.shard_names;
    index = std::move(parsed);
    commit = text.commit;  // every shard from the index's commit, even if the branch moves meanwhile
  }
  std::vector<Header> headers;
  std::vector<RenderedReport> reports;
  for (const std::string& name : names) {
    auto header = ReadRemoteHeader(net::RemoteEntry(a, name, commit));
    if (!header.ok()) {
      Error e = header.error();
      e.message = name + ": " + e.message;  // as a local merge names the shard
      return e;
    }
    reports.push_back(
        {name, json ? RenderInspectJson(header.value()) : RenderInspectText(header.value()), TotalsOf(header.value())});
    headers.push_back(std::move(header.value()));
  }
  if (index) {  // every weight_map entry must be in the shard it names
    std::vector<merge::BaseShardHeader> shards;
    for (size_t i = 0; i < headers.size(); ++i) shards.push_back({names[i], &headers[i]});
    PB_RETURN_IF_ERROR(merge::CheckIndexAgainstShards(*index, shards));
  }
  return json ? RenderInspectFilesJson(reports) : RenderInspectFilesText(reports);
}

}  // namespace pb::cli

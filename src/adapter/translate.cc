#include "adapter/translate.h"

#include <map>

namespace pb::adapter {

namespace {

std::string ComposeActions(const std::string& read, const std::string& write) {
  if (read == "copy") return write;
  if (write == "copy") return read;
  return read + ", " + write;
}

}  // namespace

Result<TranslateResult> Translate(const AdapterSource& source, AdapterFormat to, const ReadOptions& read_options,
                                  const WriteOptions& write_options) {
  PB_ASSIGN_OR_RETURN(auto read, ReadAdapter(source, read_options));
  WriteOptions options = write_options;
  if (!options.base_config) options.base_config = source.base_config;
  if (!options.arch) options.arch = read_options.arch;
  PB_ASSIGN_OR_RETURN(auto written, WriteAdapter(read.adapter, to, options));
  TranslateResult result{std::move(read), std::move(written), {}};
  std::map<std::string, const TensorMapping*> by_canonical;
  for (const auto& m : result.output.mappings) by_canonical[m.from] = &m;
  for (const auto& in : result.read.mappings) {
    if (in.to.empty()) {
      result.plan.push_back(in);
      continue;
    }
    auto out = by_canonical.find(in.to);
    if (out == by_canonical.end()) {
      // Consumed into the config (kohya's alpha tensors) or carried by another tensor.
      result.plan.push_back({in.from, in.to, in.action, ""});
    } else if (out->second->to.empty()) {
      result.plan.push_back({in.from, "", "rejected", out->second->reason});
    } else {
      result.plan.push_back({in.from, out->second->to, ComposeActions(in.action, out->second->action), ""});
    }
  }
  std::vector<RejectedTensor> dropped;
  for (const auto& m : result.plan)
    if (m.to.empty()) dropped.push_back({m.from, m.reason});
  PB_ASSIGN_OR_RETURN(result.warnings, CheckDropped("translate", dropped, write_options.allow_partial));
  return result;
}

}  // namespace pb::adapter

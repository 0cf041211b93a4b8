#include "app/merge_args.h"

#include "core/dtype_vocabulary.h"
#include "merge/quantize_plan.h"

namespace pb::app {

Result<merge::MergeOptions> MergeOptionsOf(const CommandLine& line, bool unmerge) {
  merge::MergeOptions options;
  options.unmerge = unmerge;
  if (auto dtype = line.Value("dtype")) options.dtype = ParseFloatDtypeName(*dtype);  // checked by the grammar
  options.safe = line.Has("safe");
  if (auto method = line.Value("quantize")) {
    auto scheme = line.Value("scheme"), group = line.Value("group-size");
    auto q = merge::MakeQuantizeOptions(*method, scheme ? std::optional<std::string_view>(*scheme) : std::nullopt,
                                        group ? std::optional<std::string_view>(*group) : std::nullopt);
    if (!q.ok()) return q.error();
    options.quantize = q.value();
  }
  options.allow_partial = line.Has("allow-partial");
  options.arch = line.Value("arch");
  return options;
}

}  // namespace pb::app

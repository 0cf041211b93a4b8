#include <cstdio>

#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/http_source.h"
#include "cli/local_model.h"
#include "cli/remote_model.h"
#include "app/base_layout.h"
#include "app/cli_text.h"
#include "app/input_hint.h"
#include "app/report.h"
#include "cli/text_output.h"

namespace pb::cli {

int RunInspect(const app::CommandLine& line) {
  const bool json = line.Has("json");
  const std::vector<std::string>& positional = line.positional;

  auto fail = [&](const Error& e) { return ReportFailure(e, json); };
  if (IsRemoteAddress(positional[0])) {  // a repo, a folder or an index: every shard's header
    auto address = ParseRemote(positional[0]);
    if (!address.ok()) return fail(address.error());
    if (app::NamesRemoteModel(address.value())) {
      auto out = InspectRemoteModel(address.value(), json);
      if (!out.ok()) return fail(out.error());
      WriteText(stdout, out.value());
      return 0;
    }
  }
  // A model's folder or its index, as for a Hub repo: every shard's header and the totals.
  if (!IsRemoteAddress(positional[0]) &&
      (IsDirectory(positional[0]) || app::IsModelIndexName(positional[0].substr(positional[0].rfind('/') + 1)))) {
    auto out = InspectLocalModel(positional[0], json);
    if (!out.ok()) return fail(ExplainInput(out.error(), positional[0], app::InputRole::kBase));
    WriteText(stdout, out.value());
    return 0;
  }
  auto read_header = [](const std::string& arg) -> Result<Header> {
    if (IsRemoteAddress(arg)) return ReadRemoteHeader(arg);  // http(s):// or hf://: Range requests
    PB_ASSIGN_OR_RETURN(auto file, InputFile::Open(arg));
    return file.ReadHeader();
  };
  auto header = read_header(positional[0]);
  if (!header.ok() && IsRemoteAddress(positional[0])) return fail(header.error());
  if (!header.ok()) return fail(ExplainInput(header.error(), positional[0], app::InputRole::kTensorFile));
  std::string out = json ? RenderInspectJson(header.value()) : RenderInspectText(header.value());
  WriteText(stdout, out);
  return 0;
}

}  // namespace pb::cli

#include <cstdio>

#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/http_source.h"
#include "app/cli_text.h"
#include "app/report.h"

namespace pb::cli {

int RunInspect(const std::vector<std::string>& args) {
  bool json = false;
  std::vector<std::string> positional;
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::string_view help = CliHelp("inspect");
      std::fwrite(help.data(), 1, help.size(), stdout);
      return 0;
    }
    if (a == "--json") json = true;
    else if (a.size() > 1 && a[0] == '-') return UsageError("inspect", "unknown option `" + a + "`");
    else positional.push_back(a);
  }
  if (positional.size() != 1) return UsageError("inspect", "expected exactly one FILE");

  auto fail = [&](const Error& e) { return ReportFailure(e, json); };
  auto read_header = [](const std::string& arg) -> Result<Header> {
    if (IsRemoteAddress(arg)) return ReadRemoteHeader(arg);  // http(s):// or hf://: Range requests
    auto file = InputFile::Open(arg);
    if (!file.ok()) return file.error();
    return file->ReadHeader();
  };
  auto header = read_header(positional[0]);
  if (!header.ok()) return fail(header.error());
  std::string out = json ? RenderInspectJson(header.value()) : RenderInspectText(header.value());
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace pb::cli

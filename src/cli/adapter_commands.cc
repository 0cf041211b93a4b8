// `adapter-info` and `translate`: gather an adapter directory's files, hand the bytes to the core, write
// the translated files atomically (all prepared before any is renamed into place).
#include <cstdio>

#include "adapter/adapter_report.h"
#include "adapter/delta_norm.h"
#include "adapter/safetensors_emitter.h"
#include "cli/commands.h"
#include "cli/adapter_dir.h"
#include "cli/file_io.h"
#include "app/cli_text.h"

namespace pb::cli {
namespace {

using adapter::AdapterFormat;

// Options both commands share. Returns false (after printing) on a usage error.
struct CommonOptions {
  bool json = false;
  bool strict = false;
  std::optional<std::string> arch;
  std::optional<std::string> base_config;
  std::optional<AdapterFormat> from;
  std::vector<std::string> positional;
};

// Parses one option at args[i]; returns 0 if consumed, 1 if not an option this function knows, or the usage
// exit status.
int ParseCommon(const std::string& command, const std::vector<std::string>& args, size_t& i, CommonOptions& o) {
  const std::string& a = args[i];
  if (a == "--json") o.json = true;
  else if (a == "--strict") o.strict = true;
  else if (a == "--arch" || a == "--base-config" || a == "--from") {
    if (i + 1 >= args.size()) return UsageError(command, a + " needs a value");
    const std::string& v = args[++i];
    if (a == "--arch") o.arch = v;
    else if (a == "--base-config") o.base_config = v;
    else if (!(o.from = adapter::ParseFormatName(v)))
      return UsageError(command, "unknown format `" + v + "` (expected peft, mlx, kohya, gguf-names or diffusers-attnproc)");
  } else if (a.size() > 1 && a[0] == '-') {
    return 1;
  } else {
    o.positional.push_back(a);
  }
  return 0;
}

bool WantsHelp(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

int PrintHelp(const char* command) {
  std::string_view help = CliHelp(command);
  std::fwrite(help.data(), 1, help.size(), stdout);
  return 0;
}

}  // namespace

int RunAdapterInfo(const std::vector<std::string>& args) {
  if (WantsHelp(args)) return PrintHelp("adapter-info");
  CommonOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    int r = ParseCommon("adapter-info", args, i, o);
    if (r == 1) return UsageError("adapter-info", "unknown option `" + args[i] + "`");
    if (r != 0) return r;
  }
  if (o.positional.size() != 1) return UsageError("adapter-info", "expected exactly one DIR");
  auto fail = [&](const Error& e) { return ReportFailure(e, o.json); };
  auto dir = LoadAdapterDir(o.positional[0], o.base_config);
  if (!dir.ok()) return fail(dir.error());
  adapter::ReadOptions options{o.from, o.arch, o.strict, nullptr};
  auto read = adapter::ReadAdapter(SourceOf(dir.value()), options);
  if (!read.ok()) return fail(read.error());
  adapter::DeltaNormPass norms(read->adapter);  // module by module, each one's factors read with pread
  if (Status s = SupplyAdapterBytes(norms, dir.value()); !s.ok()) return fail(s.error());
  read->delta_norms = norms.norms();
  std::string out = o.json ? adapter::RenderAdapterInfoJson(read.value()) : adapter::RenderAdapterInfoText(read.value());
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int RunTranslate(const std::vector<std::string>& args) {
  if (WantsHelp(args)) return PrintHelp("translate");
  CommonOptions o;
  std::optional<AdapterFormat> to;
  bool dry_run = false, old_peft = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--dry-run") { dry_run = true; continue; }
    if (a == "--old-peft") { old_peft = true; continue; }
    if (a == "--to") {
      if (i + 1 >= args.size()) return UsageError("translate", "--to needs a value");
      to = adapter::ParseFormatName(args[++i]);
      if (to == AdapterFormat::kDiffusersAttnProc) to.reset();  // read only
      if (!to) return UsageError("translate", "unknown format `" + args[i] + "` (expected peft, mlx, kohya or gguf-names)");
      continue;
    }
    int r = ParseCommon("translate", args, i, o);
    if (r == 1) return UsageError("translate", "unknown option `" + a + "`");
    if (r != 0) return r;
  }
  if (o.positional.size() != 2) return UsageError("translate", "expected IN_DIR and OUT_DIR");
  if (!to) return UsageError("translate", "--to is required");
  auto fail = [&](const Error& e) { return ReportFailure(e, o.json); };
  auto dir = LoadAdapterDir(o.positional[0], o.base_config);
  if (!dir.ok()) return fail(dir.error());
  adapter::ReadOptions read_options{o.from, o.arch, o.strict, nullptr};
  adapter::WriteOptions write_options;
  write_options.strict = o.strict;
  write_options.compat_pre_014 = old_peft;
  auto result = adapter::Translate(SourceOf(dir.value()), *to, read_options, write_options);
  if (!result.ok()) return fail(result.error());
  std::string summary = o.json ? adapter::RenderTranslateJson(result.value(), *to, dry_run)
                               : adapter::RenderTranslateText(result.value(), *to, dry_run);
  if (!dry_run) {
    const std::string& out_dir = o.positional[1];
    auto created = EnsureDirectory(out_dir);
    if (!created.ok()) return fail(created.error());
    const auto& output = result->output;
    auto weights = AtomicOutputFile::Create(Join(out_dir, output.weights_name));
    std::unique_ptr<AtomicOutputFile> config;
    auto cleanup = [&](const Error& e) {
      // The temporary files go first (their destructors unlink them), then the directory we created.
      if (weights.ok()) weights.value().reset();
      config.reset();
      if (created.value()) RemoveEmptyDirectory(out_dir);
      return fail(e);
    };
    if (!weights.ok()) return cleanup(weights.error());
    adapter::SafetensorsEmitter emitter(output.weights, *weights.value());  // tensor by tensor, read with pread
    if (Status s = emitter.Begin(); !s.ok()) return cleanup(s.error());
    if (Status s = SupplyAdapterBytes(emitter, dir.value()); !s.ok()) return cleanup(s.error());
    if (Status s = emitter.Finish(); !s.ok()) return cleanup(s.error());
    if (Status s = weights.value()->Prepare(); !s.ok()) return cleanup(s.error());
    if (output.config_name) {
      auto c = AtomicOutputFile::Create(Join(out_dir, *output.config_name));
      if (!c.ok()) return cleanup(c.error());
      config = std::move(c.value());
      const auto* text = reinterpret_cast<const uint8_t*>(output.config_text.data());
      if (Status s = config->Write({text, output.config_text.size()}); !s.ok()) return cleanup(s.error());
      if (Status s = config->Prepare(); !s.ok()) return cleanup(s.error());
    }
    if (Status s = weights.value()->Persist(); !s.ok()) return cleanup(s.error());
    if (config)
      if (Status s = config->Persist(); !s.ok()) return fail(s.error());
  }
  std::fwrite(summary.data(), 1, summary.size(), stdout);
  return 0;
}

}  // namespace pb::cli

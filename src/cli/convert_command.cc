#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/input_facts.h"
#include "cli/output_transaction.h"
#include "app/output_policy.h"
#include "app/cli_text.h"
#include "convert/convert_stream.h"
#include "app/report.h"

namespace pb::cli {
namespace {

constexpr size_t kReadChunk = 4 << 20;

std::optional<Dtype> ParseTargetDtype(const std::string& s) {
  if (s == "bf16") return Dtype::BF16;
  if (s == "f16") return Dtype::F16;
  if (s == "f32") return Dtype::F32;
  return std::nullopt;
}

// Streams every planned tensor's source bytes, in plan order, through the converter.
Status ConvertFile(const InputFile& in, const Header& header, ConversionPlan plan, ByteSink& sink) {
  TensorBytesConverter converter(std::move(plan), sink);
  if (Status s = converter.Begin(); !s.ok()) return s;
  std::vector<uint8_t> buffer(kReadChunk);
  for (size_t src : converter.plan().source_tensor) {
    TensorInfo t = header.tensor(src);
    uint64_t pos = header.data_start() + t.begin, end = header.data_start() + t.end;
    while (pos < end) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kReadChunk, end - pos));
      if (Status s = in.ReadAt(pos, std::span<uint8_t>(buffer.data(), n)); !s.ok()) return s;
      if (Status s = converter.Push(std::span<const uint8_t>(buffer.data(), n)); !s.ok()) return s;
      pos += n;
    }
  }
  return converter.Finish();
}

}  // namespace

int RunConvert(const std::vector<std::string>& args) {
  bool json = false;
  std::optional<Dtype> dtype;
  TensorOrder order = TensorOrder::kReference;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::string_view help = CliHelp("convert");
      std::fwrite(help.data(), 1, help.size(), stdout);
      return 0;
    }
    if (a == "--json") {
      json = true;
    } else if (a == "--dtype" || a == "--order") {
      if (i + 1 >= args.size()) return UsageError("convert", a + " needs a value");
      const std::string& v = args[++i];
      if (a == "--dtype") {
        dtype = ParseTargetDtype(v);
        if (!dtype) return UsageError("convert", "unknown dtype `" + v + "` (expected bf16, f16 or f32)");
      } else if (v == "reference") {
        order = TensorOrder::kReference;
      } else if (v == "input") {
        order = TensorOrder::kInput;
      } else {
        return UsageError("convert", "unknown order `" + v + "` (expected reference or input)");
      }
    } else if (a.size() > 1 && a[0] == '-') {
      return UsageError("convert", "unknown option `" + a + "`");
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) return UsageError("convert", "expected IN and OUT");
  if (!dtype) return UsageError("convert", "--dtype is required");

  auto fail = [&](const Error& e) { return ReportFailure(e, json); };
  auto in = InputFile::Open(positional[0]);
  if (!in.ok()) return fail(in.error());
  // OUT may replace a file, never IN (whatever the path: a hard link, a path through a link to IN's directory).
  auto output = app::PlanOutput("convert", {FileFact("IN", positional[0], std::nullopt)},
                                DescribeOutputFile(positional[1]), app::OutputFlags{});
  if (!output.ok()) return fail(output.error());
  auto header = in->ReadHeader();
  if (!header.ok()) return fail(header.error());
  auto plan = PlanConversion(header.value(), *dtype, order);
  if (!plan.ok()) return fail(plan.error());
  std::string summary = json ? RenderConvertJson(plan.value(), header.value())
                             : RenderConvertText(plan.value(), header.value());
  auto transaction = OutputTransaction::ForFile(positional[1], std::move(output.value()));
  auto out = transaction->Add(DescribeOutputFile(positional[1]).writes[0]);
  if (!out.ok()) return fail(out.error());
  if (Status s = ConvertFile(in.value(), header.value(), std::move(plan.value()), *out.value()); !s.ok())
    return fail(s.error());  // the temporary file is removed when `transaction` goes away
  if (Status s = transaction->Commit(); !s.ok()) return fail(s.error());
  std::fwrite(summary.data(), 1, summary.size(), stdout);
  return 0;
}

}  // namespace pb::cli

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

int RunConvert(const app::CommandLine& line) {
  const bool json = line.Has("json");
  const std::optional<Dtype> dtype = app::ParseFloatDtypeName(*line.Value("dtype"));  // checked by the grammar
  const TensorOrder order = line.Value("order") == "input" ? TensorOrder::kInput : TensorOrder::kReference;
  const std::vector<std::string>& positional = line.positional;

  auto fail = [&](const Error& e) { return ReportFailure(e, json); };
  auto in = InputFile::Open(positional[0]);
  if (!in.ok()) return fail(ExplainInput(in.error(), positional[0], app::InputRole::kTensorFile));
  // OUT may replace a file, never IN (whatever the path: a hard link, a path through a link to IN's directory).
  auto output = app::PlanOutput("convert", {FileFact("IN", positional[0], std::nullopt)},
                                DescribeOutputFile(positional[1]), app::OutputFlags{});
  if (!output.ok()) return fail(output.error());
  auto header = in->ReadHeader();
  if (!header.ok()) return fail(ExplainInput(header.error(), positional[0], app::InputRole::kTensorFile));
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
  if (json || !line.Has("quiet")) std::fwrite(summary.data(), 1, summary.size(), stdout);
  return 0;
}

}  // namespace pb::cli

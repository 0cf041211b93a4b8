#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/input_facts.h"
#include "cli/output_transaction.h"
#include "cli/stderr_progress.h"
#include "app/output_policy.h"
#include "app/cli_text.h"
#include "convert/convert_stream.h"
#include "app/report.h"
#include "cli/text_output.h"
#include "core/dtype_vocabulary.h"

namespace pb::cli {
namespace {

constexpr size_t kReadChunk = 4 << 20;

// Streams every planned tensor's source bytes, in plan order, through the converter.
// Progress counts the bytes of IN read: the header, then each tensor's.
Status ConvertFile(const InputFile& in, const Header& header, ConversionPlan plan, ByteSink& sink, StderrProgress& progress) {
  uint64_t done = header.data_start();
  TensorBytesConverter converter(std::move(plan), sink);
  PB_RETURN_IF_ERROR(converter.Begin());
  std::vector<uint8_t> buffer(kReadChunk);
  for (size_t src : converter.plan().source_tensor) {
    TensorInfo t = header.tensor(src);
    uint64_t pos = header.data_start() + t.begin, end = header.data_start() + t.end;
    while (pos < end) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kReadChunk, end - pos));
      PB_RETURN_IF_ERROR(in.ReadAt(pos, std::span<uint8_t>(buffer.data(), n)));
      PB_RETURN_IF_ERROR(converter.Push(std::span<const uint8_t>(buffer.data(), n)));
      pos += n;
      done += n;
      progress.Update(done);
    }
  }
  return converter.Finish();
}

}  // namespace

int RunConvert(const app::CommandLine& line) {
  const bool json = line.Has("json");
  const std::optional<Dtype> dtype = ParseFloatDtypeName(*line.Value("dtype"));  // checked by the grammar
  const TensorOrder order = line.Value("order") == "input" ? TensorOrder::kInput : TensorOrder::kReference;
  const std::vector<std::string>& positional = line.positional;

  auto fail = [&](const Error& e) { return ReportFailure(e, json); };
  auto in = InputFile::Open(positional[0]);
  if (!in.ok()) return fail(ExplainInput(in.error(), positional[0], app::InputRole::kTensorFile));
  // OUT may replace a file, never IN (whatever the path: a hard link, a path through a link to IN's directory).
  std::vector<app::InputFact> inputs{FileFact("IN", positional[0], std::nullopt)};
  AddNamedInputFacts(line, inputs);
  auto output = app::PlanOutput("convert", inputs, DescribeOutputFile(positional[1]), app::OutputFlags{});
  if (!output.ok()) return fail(output.error());
  auto header = in->ReadHeader();
  if (!header.ok()) return fail(ExplainInput(header.error(), positional[0], app::InputRole::kTensorFile));
  auto plan = PlanConversion(header.value(), *dtype, order);
  if (!plan.ok()) return fail(plan.error());
  // The text is the plan, told before the work starts; the JSON, one document, comes once the output is in place.
  const bool quiet = line.Has("quiet");
  if (!json && !quiet) {
    std::string text = RenderConvertText(plan.value(), header.value());
    WriteText(stdout, text);
    std::fflush(stdout);
  }
  std::string summary = json ? RenderConvertJson(plan.value(), header.value()) : "";
  auto transaction = OutputTransaction::ForFile(positional[1], std::move(output.value()));
  auto out = transaction->Add(DescribeOutputFile(positional[1]).writes[0]);
  if (!out.ok()) return fail(out.error());
  StderrProgress progress(line, header->file_size());
  progress.StartFile(positional[0].substr(positional[0].rfind('/') + 1), 0);  // the file name, not its path
  Status status = ConvertFile(in.value(), header.value(), std::move(plan.value()), *out.value(), progress);
  if (status.ok()) status = transaction->Commit();
  if (!status.ok()) {
    progress.Abandon();
    return fail(status.error());  // the temporary file is removed when `transaction` goes away
  }
  progress.Finish();
  WriteText(stdout, summary);
  return 0;
}

}  // namespace pb::cli

// Human and JSON renderings of headers and errors. They live in the core so the native CLI and the
// npm package's CLI (WASM under Node) print byte-identical output.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>

#include "convert/convert_stream.h"
#include "core/header.h"
#include "core/result.h"

namespace pb {

// `peft-bridge inspect` text: tensors (name, dtype, shape, bytes), metadata, parameters per dtype.
std::string RenderInspectText(const Header& header);
// `peft-bridge inspect --json`: {"ok":true, headerSize, dataSize, fileSize, metadata, tensors, parameters…}
std::string RenderInspectJson(const Header& header);
// The same document with an empty "tensors" list: sizes, metadata and parameter counts. The JS edge reads the
// tensors from a compact table instead (wasm/header_table.h): rendering and parsing 200,000 of them as JSON
// cost seconds and tens of MB of WASM heap.
std::string RenderInspectSummaryJson(const Header& header);
// RenderInspectJson when `with_tensors`, else RenderInspectSummaryJson.
std::string RenderInspectJsonWith(const Header& header, bool with_tensors);
// `inspect` of a sharded model (a local folder or index, a Hub repo, an index URL): every file's report, as
// RenderInspectText (or Json) made it, under the file's name ("==> name <==" lines between the text reports, as
// `head` shows several files), then the totals over all files ("==> total: N files <==" in text when there are
// several; in JSON {"ok":true,"files":[{"path":name,"report":{...}}...],"total":{files, tensors, headerSize,
// dataSize, fileSize, parameters, totalParameters}}). The edges render each file and join them here.
struct InspectTotals {
  uint64_t files = 0, tensors = 0, header_size = 0, data_size = 0, file_size = 0;
  std::map<Dtype, uint64_t> parameters;  // elements per dtype
};
InspectTotals TotalsOf(const Header& header);
// The same numbers from a file's RenderInspectJson document (the npm CLI's edge has the document, not the Header).
Result<InspectTotals> TotalsOfReportJson(std::string_view report_json);
struct RenderedReport {
  std::string name;
  std::string report;
  InspectTotals totals;  // this file's
};
std::string RenderInspectFilesText(std::span<const RenderedReport> files);
std::string RenderInspectFilesJson(std::span<const RenderedReport> files);
// {"ok":false,"error":{"code","message","tensor","offset"}}, and "problems":[{"code","module","message"}...] when
// the error reports several problems (every one of them, where the message caps its list).
std::string RenderErrorJson(const Error& error);
// One line for stderr: "error: <code>: <message>"
std::string RenderErrorText(const Error& error);
// The plan of a conversion, printed before it starts: "convert 3 of 4 tensors; output 1.16 GB" (or JSON, with
// exact sizes, printed once it is done).
std::string RenderConvertText(const ConversionPlan& plan, const Header& source);
std::string RenderConvertJson(const ConversionPlan& plan, const Header& source);

}  // namespace pb

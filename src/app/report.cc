#include "app/report.h"

#include "core/printable.h"
#include "text/size_text.h"

#include "core/writer.h"

#include <cassert>
#include <map>
#include "core/json.h"

namespace pb {
namespace {

// Elements per dtype, in the dtype enum order. Every tensor counts, scalars as one element.
std::map<Dtype, uint64_t> ParametersByDtype(const Header& h) {
  std::map<Dtype, uint64_t> counts;
  for (size_t i = 0; i < h.tensor_count(); ++i) {
    TensorInfo t = h.tensor(i);
    counts[t.dtype] += t.element_count();
  }
  return counts;
}

using pb::Printable;

std::string ShapeText(std::span<const uint64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string WithThousands(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace

std::string RenderInspectText(const Header& h) {
  std::string out;
  out += "header: " + WithThousands(h.header_size()) + " bytes, data: " + WithThousands(h.data_size()) +
         " bytes, file: " + WithThousands(h.file_size()) + " bytes\n";
  if (h.has_metadata()) {
    out += "metadata:\n";
    for (const auto& [k, v] : h.metadata()) out += "  " + Printable(k) + ": " + Printable(v) + "\n";
  } else {
    out += "metadata: none\n";
  }
  out += "tensors: " + std::to_string(h.tensor_count()) + "\n";
  size_t name_width = 4;
  std::vector<std::string> names(h.tensor_count());
  for (size_t i = 0; i < h.tensor_count(); ++i) {
    names[i] = Printable(h.tensor(i).name);
    name_width = std::max(name_width, names[i].size());
  }
  name_width = std::min<size_t>(name_width, 80);
  for (size_t i = 0; i < h.tensor_count(); ++i) {
    TensorInfo t = h.tensor(i);
    std::string line = "  " + names[i];
    if (names[i].size() < name_width) line.append(name_width - names[i].size(), ' ');
    std::string dtype(DtypeName(t.dtype));
    dtype.resize(std::max<size_t>(dtype.size(), 11), ' ');
    line += "  " + dtype + " " + ShapeText(t.shape) + "  " + WithThousands(t.byte_length()) + " bytes\n";
    out += line;
  }
  out += "parameters:\n";
  uint64_t total = 0;
  for (const auto& [dtype, n] : ParametersByDtype(h)) {
    out += "  " + std::string(DtypeName(dtype)) + ": " + WithThousands(n) + "\n";
    total += n;
  }
  out += "  total: " + WithThousands(total) + "\n";
  return out;
}

InspectTotals TotalsOf(const Header& h) {
  InspectTotals t{1, h.tensor_count(), h.header_size(), h.data_size(), h.file_size(), ParametersByDtype(h)};
  return t;
}

Result<InspectTotals> TotalsOfReportJson(std::string_view report_json) {
  auto bad = [] { return MakeError(ErrorCode::InvalidArgument, "not an inspect report"); };
  auto parsed = ParseJson(report_json, "an inspect report");
  if (!parsed.ok() || !parsed->is_object()) return bad();
  const Json& j = parsed.value();
  auto number = [&](const char* key, uint64_t& out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned()) return false;
    out = it->get<uint64_t>();
    return true;
  };
  InspectTotals t;
  t.files = 1;
  auto tensors = j.find("tensors");
  auto parameters = j.find("parameters");
  if (!number("headerSize", t.header_size) || !number("dataSize", t.data_size) || !number("fileSize", t.file_size) ||
      tensors == j.end() || !tensors->is_array() || parameters == j.end() || !parameters->is_object())
    return bad();
  t.tensors = tensors->size();
  for (const auto& [name, n] : parameters->items()) {
    auto dtype = ParseDtype(name);
    if (!dtype || !n.is_number_unsigned()) return bad();
    t.parameters[*dtype] += n.get<uint64_t>();
  }
  return t;
}

namespace {

InspectTotals Sum(std::span<const RenderedReport> files) {
  InspectTotals sum;
  for (const auto& f : files) {
    sum.files += f.totals.files;
    sum.tensors += f.totals.tensors;
    sum.header_size += f.totals.header_size;
    sum.data_size += f.totals.data_size;
    sum.file_size += f.totals.file_size;
    for (const auto& [dtype, n] : f.totals.parameters) sum.parameters[dtype] += n;
  }
  return sum;
}

}  // namespace

std::string RenderInspectFilesText(std::span<const RenderedReport> files) {
  std::string out;
  for (size_t i = 0; i < files.size(); ++i) {
    if (i) out += '\n';
    out += "==> " + Printable(files[i].name) + " <==\n" + files[i].report;
  }
  if (files.size() < 2) return out;
  const InspectTotals t = Sum(files);
  out += "\n==> total: " + std::to_string(files.size()) + " files <==\n";
  out += "header: " + WithThousands(t.header_size) + " bytes, data: " + WithThousands(t.data_size) +
         " bytes, files: " + WithThousands(t.file_size) + " bytes\n";
  out += "tensors: " + WithThousands(t.tensors) + "\n";
  out += "parameters:\n";
  uint64_t total = 0;
  for (const auto& [dtype, n] : t.parameters) {
    out += "  " + std::string(DtypeName(dtype)) + ": " + WithThousands(n) + "\n";
    total += n;
  }
  out += "  total: " + WithThousands(total) + "\n";
  return out;
}

std::string RenderInspectFilesJson(std::span<const RenderedReport> files) {
  std::string out = "{\"ok\":true,\"files\":[";
  for (size_t i = 0; i < files.size(); ++i) {
    if (i) out += ',';
    out += "{\"path\":";
    AppendJsonString(out, files[i].name);
    std::string_view report = files[i].report;
    while (!report.empty() && report.back() == '\n') report.remove_suffix(1);
    out += ",\"report\":";
    out += report;
    out += '}';
  }
  const InspectTotals t = Sum(files);
  out += "],\"total\":{\"files\":" + std::to_string(t.files) + ",\"tensors\":" + std::to_string(t.tensors) +
         ",\"headerSize\":" + std::to_string(t.header_size) + ",\"dataSize\":" + std::to_string(t.data_size) +
         ",\"fileSize\":" + std::to_string(t.file_size) + ",\"parameters\":{";
  uint64_t total = 0;
  bool first = true;
  for (const auto& [dtype, n] : t.parameters) {
    if (!first) out += ',';
    first = false;
    out += "\"" + std::string(DtypeName(dtype)) + "\":" + std::to_string(n);
    total += n;
  }
  return out + "},\"totalParameters\":" + std::to_string(total) + "}}\n";
}

std::string RenderInspectJson(const Header& h) { return RenderInspectJsonWith(h, true); }

std::string RenderInspectSummaryJson(const Header& h) { return RenderInspectJsonWith(h, false); }

std::string RenderInspectJsonWith(const Header& h, bool with_tensors) {
  // Written directly rather than through a JSON DOM: a 200,000-tensor header would otherwise build
  // 200,000 objects (hundreds of MB in the WASM heap) just to print them.
  // Reserve the exact size (give or take a few bytes of the fixed parts) so the output, 30 MB for a
  // 200,000-tensor header, is never reallocated: in WASM every byte of slack grows the heap for good.
  auto digits = [](uint64_t v) {
    size_t n = 1;
    while (v >= 10) v /= 10, ++n;
    return n;
  };
  size_t estimate = 256;
  const size_t listed = with_tensors ? h.tensor_count() : 0;
  for (size_t i = 0; i < listed; ++i) {
    TensorInfo t = h.tensor(i);
    // {"name":…,"dtype":"…","shape":[…],"dataOffsets":[b,e],"byteLength":n}, plus a comma.
    estimate += 80 + JsonStringLength(t.name) + digits(t.begin) + digits(t.end) + digits(t.byte_length());
    for (uint64_t d : t.shape) estimate += digits(d) + 1;
  }
  for (const auto& [k, v] : h.metadata()) estimate += JsonStringLength(k) + JsonStringLength(v) + 2;
  estimate += 64 * kDtypeCount;  // parameters
  std::string out;
  out.reserve(estimate);
  auto number = [&](uint64_t v) { out += std::to_string(v); };
  out += "{\"ok\":true,\"headerSize\":";
  number(h.header_size());
  out += ",\"dataSize\":";
  number(h.data_size());
  out += ",\"fileSize\":";
  number(h.file_size());
  out += ",\"metadata\":";
  if (h.has_metadata()) {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : h.metadata()) {
      if (!first) out += ',';
      first = false;
      AppendJsonString(out, k);
      out += ':';
      AppendJsonString(out, v);
    }
    out += '}';
  } else {
    out += "null";
  }
  out += ",\"tensors\":[";
  for (size_t i = 0; i < listed; ++i) {
    TensorInfo t = h.tensor(i);
    if (i) out += ',';
    out += "{\"name\":";
    AppendJsonString(out, t.name);
    out += ",\"dtype\":\"";
    out += DtypeName(t.dtype);
    out += "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d) out += ',';
      number(t.shape[d]);
    }
    out += "],\"dataOffsets\":[";
    number(t.begin);
    out += ',';
    number(t.end);
    out += "],\"byteLength\":";
    number(t.byte_length());
    out += '}';
  }
  out += "],\"parameters\":{";
  uint64_t total = 0;
  bool first = true;
  for (const auto& [dtype, n] : ParametersByDtype(h)) {
    if (!first) out += ',';
    first = false;
    out += '"';
    out += DtypeName(dtype);
    out += "\":";
    number(n);
    total += n;
  }
  out += "},\"totalParameters\":";
  number(total);
  out += "}\n";
  assert(out.size() <= estimate);
  return out;
}

std::string RenderErrorJson(const Error& e) {
  Json err;
  err["code"] = std::string(ErrorCodeName(e.code));
  err["message"] = e.message;
  err["tensor"] = e.tensor ? Json(*e.tensor) : Json(nullptr);
  err["offset"] = e.offset ? Json(*e.offset) : Json(nullptr);
  if (!e.problems.empty()) {  // present only when the error reports several problems (a merge plan's)
    Json problems = Json::array();
    for (const Problem& p : e.problems) {
      Json one;
      one["code"] = std::string(ErrorCodeName(p.code));
      one["module"] = p.module ? Json(*p.module) : Json(nullptr);
      one["message"] = p.message;
      problems.push_back(std::move(one));
    }
    err["problems"] = std::move(problems);
  }
  Json j;
  j["ok"] = false;
  j["error"] = std::move(err);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string RenderErrorText(const Error& e) {
  return "error: " + std::string(ErrorCodeName(e.code)) + ": " + e.message + "\n";
}

std::string RenderConvertText(const ConversionPlan& plan, const Header& source) {
  (void)source;
  return "convert " + std::to_string(plan.converted_count) + " of " + std::to_string(plan.write.tensors.size()) +
         " tensors; output " + text::SizeText(plan.write.total_size()) + "\n";
}

std::string RenderConvertJson(const ConversionPlan& plan, const Header& source) {
  Json j;
  j["ok"] = true;
  j["tensors"] = plan.write.tensors.size();
  j["converted"] = plan.converted_count;
  j["inputSize"] = source.file_size();
  j["outputSize"] = plan.write.total_size();
  return j.dump() + "\n";
}

}  // namespace pb

#include "core/report.h"

#include <map>
#include <nlohmann/json.hpp>

namespace pb {
namespace {

using nlohmann::ordered_json;

// Elements per dtype, in the dtype enum order. Every tensor counts, scalars as one element.
std::map<Dtype, uint64_t> ParametersByDtype(const Header& h) {
  std::map<Dtype, uint64_t> counts;
  for (size_t i = 0; i < h.tensor_count(); ++i) {
    TensorInfo t = h.tensor(i);
    counts[t.dtype] += t.element_count();
  }
  return counts;
}

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

ordered_json MetadataJson(const Header& h) {
  if (!h.has_metadata()) return nullptr;
  ordered_json m = ordered_json::object();
  for (const auto& [k, v] : h.metadata()) m[k] = v;
  return m;
}

}  // namespace

std::string RenderInspectText(const Header& h) {
  std::string out;
  out += "header: " + WithThousands(h.header_size()) + " bytes, data: " + WithThousands(h.data_size()) +
         " bytes, file: " + WithThousands(h.file_size()) + " bytes\n";
  if (h.has_metadata()) {
    out += "metadata:\n";
    for (const auto& [k, v] : h.metadata()) out += "  " + k + ": " + v + "\n";
  } else {
    out += "metadata: none\n";
  }
  out += "tensors: " + std::to_string(h.tensor_count()) + "\n";
  size_t name_width = 4;
  for (size_t i = 0; i < h.tensor_count(); ++i) name_width = std::max(name_width, h.tensor(i).name.size());
  name_width = std::min<size_t>(name_width, 80);
  for (size_t i = 0; i < h.tensor_count(); ++i) {
    TensorInfo t = h.tensor(i);
    std::string line = "  " + std::string(t.name);
    if (t.name.size() < name_width) line.append(name_width - t.name.size(), ' ');
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

std::string RenderInspectJson(const Header& h) {
  ordered_json j;
  j["ok"] = true;
  j["headerSize"] = h.header_size();
  j["dataSize"] = h.data_size();
  j["fileSize"] = h.file_size();
  j["metadata"] = MetadataJson(h);
  ordered_json tensors = ordered_json::array();
  for (size_t i = 0; i < h.tensor_count(); ++i) {
    TensorInfo t = h.tensor(i);
    tensors.push_back({{"name", std::string(t.name)},
                       {"dtype", std::string(DtypeName(t.dtype))},
                       {"shape", std::vector<uint64_t>(t.shape.begin(), t.shape.end())},
                       {"dataOffsets", {t.begin, t.end}},
                       {"byteLength", t.byte_length()}});
  }
  j["tensors"] = std::move(tensors);
  ordered_json params = ordered_json::object();
  uint64_t total = 0;
  for (const auto& [dtype, n] : ParametersByDtype(h)) {
    params[std::string(DtypeName(dtype))] = n;
    total += n;
  }
  j["parameters"] = std::move(params);
  j["totalParameters"] = total;
  // Names may hold any bytes the UTF-8 check allowed; replace nothing, error on nothing.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string RenderErrorJson(const Error& e) {
  ordered_json err;
  err["code"] = std::string(ErrorCodeName(e.code));
  err["message"] = e.message;
  err["tensor"] = e.tensor ? ordered_json(*e.tensor) : ordered_json(nullptr);
  err["offset"] = e.offset ? ordered_json(*e.offset) : ordered_json(nullptr);
  ordered_json j;
  j["ok"] = false;
  j["error"] = std::move(err);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string RenderErrorText(const Error& e) {
  return "error: " + std::string(ErrorCodeName(e.code)) + ": " + e.message + "\n";
}

std::string RenderConvertText(const ConversionPlan& plan, const Header& source) {
  (void)source;
  return "converted " + std::to_string(plan.converted_count) + " of " + std::to_string(plan.write.tensors.size()) +
         " tensors; wrote " + WithThousands(plan.write.total_size()) + " bytes\n";
}

std::string RenderConvertJson(const ConversionPlan& plan, const Header& source) {
  ordered_json j;
  j["ok"] = true;
  j["tensors"] = plan.write.tensors.size();
  j["converted"] = plan.converted_count;
  j["inputSize"] = source.file_size();
  j["outputSize"] = plan.write.total_size();
  return j.dump() + "\n";
}

}  // namespace pb

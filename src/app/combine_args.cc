#include "app/combine_args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/dtype_vocabulary.h"
#include "core/utf8.h"

namespace pb::app {
namespace {

std::optional<double> Number(const std::string& text) {
  if (text.empty() || text.front() == ' ') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<uint64_t> Count(const std::string& text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == ',') {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

}  // namespace

std::optional<std::string> CheckCombineNumbers(const CommandLine& line) {
  if (auto w = line.Value("weights"))
    for (const auto& part : SplitCommas(*w))
      if (!Number(part)) return "--weights: `" + ClipForMessage(part) + "` is not a number (W1,W2,... one per adapter)";
  for (const char* name : {"density", "svd-clamp"})
    if (auto v = line.Value(name); v && !Number(*v))
      return "--" + std::string(name) + ": `" + ClipForMessage(*v) + "` is not a number";
  if (auto v = line.Value("rank"); v && (!Count(*v) || *Count(*v) == 0))
    return "--rank: `" + ClipForMessage(*v) + "` is not a positive integer";
  if (auto v = line.Value("seed"); v && !Count(*v))
    return "--seed: `" + ClipForMessage(*v) + "` is not a non-negative integer below 10^19";
  return std::nullopt;
}

compose::CombineOptions CombineOptionsOf(const CommandLine& line) {
  compose::CombineOptions o;
  if (auto m = line.Value("method")) o.method = *compose::ParseCombineMethod(*m);  // a choice the grammar checked
  if (auto w = line.Value("weights"))
    for (const auto& part : SplitCommas(*w)) o.weights.push_back(*Number(part));
  if (auto v = line.Value("rank")) o.rank = *Count(*v);
  if (auto v = line.Value("density")) o.density = *Number(*v);
  if (auto v = line.Value("svd-clamp")) o.svd_clamp = *Number(*v);
  if (auto v = line.Value("seed")) o.seed = *Count(*v);
  if (line.Value("majority-sign") == std::optional<std::string>("frequency"))
    o.majority_sign = compose::MajoritySign::kFrequency;
  o.peft_compat = line.Has("peft-compat");
  o.allow_partial = line.Has("allow-partial");
  if (auto d = line.Value("dtype")) o.dtype = ParseFloatDtypeName(*d);
  return o;
}

Json CombineOptionsToJson(const compose::CombineOptions& o) {
  Json j = Json::object();
  j["method"] = std::string(compose::CombineMethodName(o.method));
  j["weights"] = o.weights;
  j["rank"] = o.rank ? Json(*o.rank) : Json(nullptr);
  j["density"] = o.density ? Json(*o.density) : Json(nullptr);
  j["svdClamp"] = o.svd_clamp ? Json(*o.svd_clamp) : Json(nullptr);
  j["seed"] = o.seed;
  j["majoritySign"] = o.majority_sign == compose::MajoritySign::kFrequency ? "frequency" : "total";
  j["peftCompat"] = o.peft_compat;
  j["allowPartial"] = o.allow_partial;
  j["dtype"] = o.dtype ? Json(std::string(FloatDtypeOptionName(*o.dtype))) : Json(nullptr);
  return j;
}

}  // namespace pb::app

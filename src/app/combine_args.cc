#include "app/combine_args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

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
  if (line.Value("majority-sign") == std::optional<std::string>("frequency")) o.majority_sign = compose::MajoritySign::kFrequency;
  o.peft_compat = line.Has("peft-compat");
  o.allow_partial = line.Has("allow-partial");
  if (auto d = line.Value("dtype")) o.dtype = ParseFloatDtypeName(*d);
  return o;
}

Result<compose::CombineOptions> CombineOptionsFromJson(const Json& j) {
  compose::CombineOptions o;
  auto invalid = [](const std::string& field, const std::string& want) {
    return MakeError(ErrorCode::InvalidArgument, "combine option `" + field + "` must be " + want);
  };
  auto present = [&](const char* key) { return j.is_object() && j.contains(key) && !j[key].is_null(); };
  auto number = [&](const char* key) -> std::optional<double> {
    if (!j[key].is_number()) return std::nullopt;
    const double v = j[key].get<double>();
    return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
  };
  auto count = [&](const char* key) -> std::optional<uint64_t> {
    if (j[key].is_number_unsigned()) return j[key].get<uint64_t>();
    if (j[key].is_number_integer() && j[key].get<int64_t>() >= 0) return static_cast<uint64_t>(j[key].get<int64_t>());
    if (j[key].is_number_float()) {
      const double v = j[key].get<double>();
      if (v >= 0 && v < 18446744073709551616.0 && std::floor(v) == v) return static_cast<uint64_t>(v);
    }
    return std::nullopt;
  };
  if (!j.is_object()) return MakeError(ErrorCode::InvalidArgument, "combine options must be an object");
  if (present("method")) {
    auto m = j["method"].is_string() ? compose::ParseCombineMethod(j["method"].get<std::string>()) : std::nullopt;
    if (!m) return invalid("method", "one of cat, linear, svd, ties, ties_svd, dare_linear, dare_ties, dare_linear_svd, "
                                     "dare_ties_svd, magnitude_prune, magnitude_prune_svd");
    o.method = *m;
  }
  if (present("weights")) {
    if (!j["weights"].is_array()) return invalid("weights", "an array of numbers, one per adapter");
    for (const auto& w : j["weights"]) {
      if (!w.is_number() || !std::isfinite(w.get<double>())) return invalid("weights", "an array of finite numbers");
      o.weights.push_back(w.get<double>());
    }
  }
  if (present("rank")) {
    auto r = count("rank");
    if (!r || *r == 0) return invalid("rank", "a positive integer");
    o.rank = *r;
  }
  for (const char* key : {"density", "svdClamp"}) {
    if (!present(key)) continue;
    auto v = number(key);
    if (!v) return invalid(key, "a number");
    (std::string(key) == "density" ? o.density : o.svd_clamp) = *v;
  }
  if (present("seed")) {
    auto s = count("seed");
    if (!s) return invalid("seed", "a non-negative integer");
    o.seed = *s;
  }
  if (present("majoritySign")) {
    const std::string v = j["majoritySign"].is_string() ? j["majoritySign"].get<std::string>() : "";
    if (v != "total" && v != "frequency") return invalid("majoritySign", "\"total\" or \"frequency\"");
    o.majority_sign = v == "frequency" ? compose::MajoritySign::kFrequency : compose::MajoritySign::kTotal;
  }
  if (present("peftCompat")) {
    if (!j["peftCompat"].is_boolean()) return invalid("peftCompat", "a boolean");
    o.peft_compat = j["peftCompat"].get<bool>();
  }
  if (present("allowPartial")) {
    if (!j["allowPartial"].is_boolean()) return invalid("allowPartial", "a boolean");
    o.allow_partial = j["allowPartial"].get<bool>();
  }
  if (present("dtype")) {
    auto d = j["dtype"].is_string() ? ParseFloatDtypeName(j["dtype"].get<std::string>()) : std::nullopt;
    if (!d) return invalid("dtype", "bf16, f16 or f32");
    o.dtype = d;
  }
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
  j["dtype"] = o.dtype ? Json(*o.dtype == Dtype::BF16 ? "bf16" : *o.dtype == Dtype::F16 ? "f16" : "f32") : Json(nullptr);
  return j;
}

}  // namespace pb::app

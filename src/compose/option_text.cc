#include "compose/option_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace pb::compose {

std::optional<uint64_t> PositiveInteger(std::string_view t) {
  if (t.empty() || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || v == 0 || v > (uint64_t(1) << 31)) return std::nullopt;
  return v;
}

std::optional<double> PositiveDecimal(std::string_view t) {
  const bool shape = !t.empty() && t.find_first_not_of("0123456789.eE+-") == std::string_view::npos &&
                     (t[0] == '.' || (t[0] >= '0' && t[0] <= '9'));
  if (!shape) return std::nullopt;
  const std::string text(t);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v) || !(v > 0)) return std::nullopt;
  return v;
}

}  // namespace pb::compose

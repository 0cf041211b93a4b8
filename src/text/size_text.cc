#include "text/size_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace pb::text {
namespace {

constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
constexpr int kUnitCount = sizeof kUnits / sizeof kUnits[0];

// `value` (>= 0) with three significant digits in the largest unit that keeps it below 1000.
std::string ScaledText(double value) {
  if (value < 1000) return std::to_string(static_cast<uint64_t>(value)) + " B";  // whole bytes
  int unit = 0;
  while (value >= 1000 && unit + 1 < kUnitCount) value /= 1000, ++unit;
  for (;; ++unit, value /= 1000) {
    // Three significant digits of the rounded value: 9.996 rounds to "10.00", shown as "10.0".
    int decimals = value < 10 ? 2 : value < 100 ? 1 : 0;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
    while (decimals > 0 && std::strtod(buf, nullptr) >= (decimals == 2 ? 10 : 100))
      std::snprintf(buf, sizeof buf, "%.*f", --decimals, value);
    // 999.6 kB rounds to "1000": that is 1.00 MB (unless there is no larger unit).
    if (std::strtod(buf, nullptr) < 1000 || unit + 1 == kUnitCount) return std::string(buf) + " " + kUnits[unit];
  }
}

}  // namespace

std::string SizeText(uint64_t bytes) { return ScaledText(static_cast<double>(bytes)); }

std::string RateText(double bytes_per_second) {
  if (!(bytes_per_second > 0) || !std::isfinite(bytes_per_second)) return "0 B/s";
  return ScaledText(bytes_per_second) + "/s";
}

}  // namespace pb::text

#include "adapter/natural_order.h"

#include <algorithm>
#include <numeric>

namespace pb::adapter {
namespace {

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// <0, 0, >0 as a is before, equal to, after b; numbers of any length (no integer overflow).
int CompareSegments(std::string_view a, std::string_view b) {
  if (AllDigits(a) && AllDigits(b)) {
    std::string_view x = a.substr(std::min(a.find_first_not_of('0'), a.size() - 1));
    std::string_view y = b.substr(std::min(b.find_first_not_of('0'), b.size() - 1));
    if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
    if (int c = x.compare(y); c != 0) return c;
    // Equal values ("01" and "1"): fall through to the bytes so the order stays total.
  }
  return a.compare(b);
}

}  // namespace

bool NaturalPathLess(std::string_view a, std::string_view b) {
  auto segments = [](std::string_view s) {
    std::vector<std::string_view> out;
    for (size_t start = 0;;) {
      size_t dot = s.find('.', start);
      out.push_back(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
      if (dot == std::string_view::npos) return out;
      start = dot + 1;
    }
  };
  const auto x = segments(a), y = segments(b);
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    if (int c = CompareSegments(x[i], y[i]); c != 0) return c < 0;
  return x.size() < y.size();  // "a" before "a.b"
}

std::vector<size_t> NaturalOrder(const std::vector<std::string_view>& paths) {
  std::vector<size_t> order(paths.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return NaturalPathLess(paths[x], paths[y]); });
  return order;
}

}  // namespace pb::adapter

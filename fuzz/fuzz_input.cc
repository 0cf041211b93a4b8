#include "fuzz_input.h"

#include <algorithm>

namespace pb::fuzz {

namespace {

constexpr uint64_t kMaxCount = 1000000;
constexpr int kMaxNesting = 3;
constexpr uint64_t kMaxIterations = 4000000;  // bounds empty bodies repeated inside repeated bodies

struct Expander {
  std::string out;
  uint64_t iterations = 0;

  bool Full() const { return out.size() >= kMaxExpandedSize || iterations >= kMaxIterations; }

  // The end of the body that starts at `i` (the index of its \x03, or in.size()).
  static size_t BodyEnd(std::string_view in, size_t i) {
    int open = 0;
    for (; i < in.size(); ++i) {
      if (in[i] == '\x02') ++open;
      if (in[i] == '\x03') {
        if (open == 0) return i;
        --open;
      }
    }
    return in.size();
  }

  void Run(std::string_view in, uint64_t index, int nesting) {
    size_t i = 0;
    while (i < in.size() && !Full()) {
      char c = in[i];
      if (c != '\x01' || i + 1 >= in.size()) {
        out += c;
        ++i;
        continue;
      }
      if (in[i + 1] == '#') {
        out += std::to_string(index);
        i += 2;
        continue;
      }
      size_t j = i + 2;
      uint64_t count = 0;
      while (j < in.size() && j < i + 9 && in[j] >= '0' && in[j] <= '9') count = count * 10 + (in[j++] - '0');
      if (in[i + 1] != 'R' || j == i + 2 || j >= in.size() || in[j] != '\x02' || nesting >= kMaxNesting) {
        out += c;  // not a directive: the byte stands for itself
        ++i;
        continue;
      }
      size_t body_begin = j + 1;
      size_t body_end = BodyEnd(in, body_begin);
      std::string_view body = in.substr(body_begin, body_end - body_begin);
      count = std::min(count, kMaxCount);
      for (uint64_t k = 0; k < count && !Full(); ++k) {
        ++iterations;
        Run(body, k, nesting + 1);
      }
      i = std::min(in.size(), body_end + 1);
    }
  }
};

}  // namespace

std::string Expand(std::string_view input) {
  if (input.find('\x01') == std::string_view::npos) return std::string(input);
  Expander e;
  e.Run(input, 0, 0);
  if (e.out.size() > kMaxExpandedSize) e.out.resize(kMaxExpandedSize);
  return std::move(e.out);
}

std::vector<std::string_view> SplitParts(std::string_view input, size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    size_t at = input.find(kPartSeparator);
    if (at == std::string_view::npos) break;
    parts.push_back(input.substr(0, at));
    input.remove_prefix(at + kPartSeparator.size());
  }
  parts.push_back(input);
  return parts;
}

std::string JoinParts(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += kPartSeparator;
    out += parts[i];
  }
  return out;
}

}  // namespace pb::fuzz

#include "known_bugs.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace pb::fuzz {

namespace {

constexpr std::array<const char*, 4> kNames = {"regex-nested-quantifier", "regex-long-subject", "json-many-members",
                                               "json-deep-nesting"};
std::array<std::atomic<unsigned long>, 4> skipped{};

void Report() {
  std::fprintf(stderr, "PB_FUZZ_KNOWN_BUGS: inputs skipped:");
  for (size_t i = 0; i < kNames.size(); ++i) std::fprintf(stderr, " %s=%lu", kNames[i], skipped[i].load());
  std::fprintf(stderr, "\n");
}

}  // namespace

bool KnownBugsMode() {
  static const bool on = [] {
    const char* v = std::getenv("PB_FUZZ_KNOWN_BUGS");
    bool enabled = v != nullptr && std::strcmp(v, "1") == 0;
    if (enabled) std::atexit(Report);
    return enabled;
  }();
  return on;
}

bool SkipKnownBug(KnownBug bug, bool hit) {
  if (!hit || !KnownBugsMode()) return false;
  ++skipped[static_cast<size_t>(bug)];
  return true;
}

bool SkipKnownJsonBugs(std::string_view json_text) {
  if (!KnownBugsMode()) return false;
  JsonShape shape = ScanJsonShape(json_text);
  return SkipKnownBug(KnownBug::kJsonManyMembers, shape.max_members > kKnownManyMembers) ||
         SkipKnownBug(KnownBug::kJsonDeepNesting, shape.max_depth > kKnownDeepNesting);
}

bool HasNestedQuantifier(std::string_view p) {
  std::vector<bool> repeats_inside;  // per open group: holds a quantifier or an alternation
  bool previous_quantified = false;  // the atom before the current one carried an unbounded quantifier
  bool current_quantified = false;
  bool in_class = false;
  auto next_atom = [&] {
    previous_quantified = current_quantified;
    current_quantified = false;
  };
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (in_class) {
      if (c == '\\') ++i;
      else if (c == ']') in_class = false;
      continue;
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (c == '?' && current_quantified) continue;  // lazy
      bool unbounded = c == '*' || c == '+';
      if (c == '{') {
        size_t close = p.find('}', i);
        unbounded = close != std::string_view::npos && close > 0 && p[close - 1] == ',';
        i = close == std::string_view::npos ? p.size() : close;
      }
      if (!repeats_inside.empty()) repeats_inside.back() = true;
      if (unbounded && previous_quantified) return true;  // ".*.*": polynomial backtracking
      current_quantified = unbounded;
      continue;
    }
    switch (c) {
      case '\\': ++i; next_atom(); break;
      case '[': in_class = true; next_atom(); break;
      case '(':
        repeats_inside.push_back(false);
        previous_quantified = current_quantified = false;
        break;
      case '|':
        if (!repeats_inside.empty()) repeats_inside.back() = true;
        previous_quantified = current_quantified = false;
        break;
      case ')': {
        bool group_repeats = !repeats_inside.empty() && repeats_inside.back();
        if (!repeats_inside.empty()) repeats_inside.pop_back();
        if (!repeats_inside.empty() && group_repeats) repeats_inside.back() = true;
        size_t n = i + 1;
        if (group_repeats && n < p.size() && (p[n] == '*' || p[n] == '+' || p[n] == '{' || p[n] == '?')) return true;
        next_atom();
        break;
      }
      default: next_atom(); break;
    }
  }
  return false;
}

}  // namespace pb::fuzz

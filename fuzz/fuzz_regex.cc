// libFuzzer target for the linear-time Python-regex engine (python_regex.h).
//
// Input: part 0 = the pattern, parts 1..8 = subjects (none: the pattern itself and a few module names are the
// subjects). Compact encoding expanded first, so patterns and names can be long. No crash, no exception, and
// bounded time (libFuzzer's -timeout) for every pattern the engine accepts, "(a+)+$" included, under the work
// limit the readers match with (RegexStepsFor); past it every match says no.
//
// Oracles (abort() on failure):
//   - the limits: a pattern over kMaxPatternBytes is refused; a refusal is InvalidConfig with a message that
//     echoes at most a clipped pattern (no 100 KB messages);
//   - FullMatch(s) implies Match(s) (re.fullmatch implies re.match);
//   - MatchGroups(s) exists exactly when Match(s), has group_count() + 1 groups, group 0 starts at 0, every
//     set group is a range within s on code-point boundaries, and a group 0 covering all of s implies
//     FullMatch(s);
//   - FullMatch(s) == Match(s) of the pattern wrapped as "(?:p)$" (a leading (?i) kept in front), for every
//     s not ending in "\n" (where Python's $ matches only at the end), whenever the wrapped pattern compiles;
//   - a pattern of only letters, digits and '_' matches literally: FullMatch(s) == (s == p), Match(s) ==
//     s.starts_with(p) with group 0 = [0, p.size()); with a leading (?i), the same ASCII-case-insensitively
//     for ASCII subjects.
// The engine has no search (PEFT only calls re.match and re.fullmatch).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "text/python_regex.h"
#include "text/python_regex_internal.h"
#include "fuzz_input.h"
#include "json_mutator.h"

namespace {

[[noreturn]] void Fail(const std::string& what, const std::string& pattern, const std::string& subject) {
  std::fprintf(stderr, "fuzz_regex: %s\n  pattern: %s\n  subject: %s\n", what.c_str(), pattern.substr(0, 2000).c_str(),
               subject.substr(0, 2000).c_str());
  std::abort();
}

bool IsWordOnly(std::string_view s) {
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '_') return false;
  return true;
}

// The byte offsets where the engine's code points start, plus the end (an invalid byte is one code point).
std::vector<bool> Boundaries(std::string_view s) {
  pb::text::RegexSubject subject(s);
  std::vector<bool> at(s.size() + 1, false);
  for (size_t i = 0; i <= subject.size(); ++i) at[subject.byte_offset(i)] = true;
  return at;
}

bool EqualsIcase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

constexpr size_t kMaxSubjectBytes = 64 << 10;

}  // namespace

PB_FUZZ_DEFINE_MUTATOR((pb::fuzz::MutatorVocabulary{
    {}, {"(?i)", "q_proj", ".*",     "\\.",      "(a+)+$", "[^.]+",   "(?:",   "(?=",
         "(?!",  "(?P<n>", "(?P=n)", "\\d{1,3}", "\\b",    "\\Z",     "\\A",   "{,3}",
         "{2,}", "|",      "[\\w.]", "\\x41",    "\\101",  "\\u0041", "(?#c)", "model.layers.0.self_attn",
         "$",    "^",      "*?",     "+?",       "??",     "[]]",     "[^]]",  "\\1"}}))

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  auto parts = pb::fuzz::SplitParts(input, 9);
  const std::string pattern(parts[0]);
  // Subjects are cut at 64 KiB: matching costs about 0.2 us per byte and call natively and 15 times that under
  // ASan, so the expanded megabyte names the encoding can make (1.6 MB: 23 s of CPU for one input) would time out
  // on linear work; real module names are under 1 KB, and long-name linearity has its own unit tests.
  std::vector<std::string> subjects;
  for (auto it = parts.begin() + 1; it != parts.end(); ++it) subjects.emplace_back(it->substr(0, kMaxSubjectBytes));
  if (subjects.empty()) subjects = {pattern, "model.layers.0.self_attn.q_proj", "q_proj", ""};

  using pb::text::CompilePythonRegex;
  auto compiled = CompilePythonRegex(pattern);
  if (!compiled.ok()) {
    if (compiled.error().code != pb::ErrorCode::InvalidConfig || compiled.error().message.empty())
      Fail("rejection is not InvalidConfig with a message", pattern, compiled.error().message);
    if (compiled.error().message.size() > 1024) Fail("the rejection's message is not clipped", pattern, "");
    return 0;
  }
  if (pattern.size() > pb::text::regex_internal::kMaxPatternBytes)
    Fail("a pattern over the size limit compiled", pattern, "");

  std::string_view literal = pattern;
  bool icase = literal.substr(0, 4) == "(?i)";
  if (icase) literal.remove_prefix(4);
  const bool word_only = IsWordOnly(literal);
  auto anchored = CompilePythonRegex((icase ? "(?i)" : "") + ("(?:" + std::string(literal) + ")$"));
  const int groups = compiled->group_count();
  if (anchored.ok() && anchored->group_count() != groups) Fail("(?:...) changed the group count", pattern, "");
  for (const auto& s : subjects) {
    // The library's allowance for matching against names this long (the calls below make four passes over s):
    // linear time is the engine's promise, and its cost is the program's size times the subject's, so a
    // 10,000-instruction program against a megabyte subject stays within -timeout only under the work limit
    // every reader matches with. Past it, the answers are discarded (every call says no) and the oracles skip.
    pb::text::RegexWorkLimit limit(4 * pb::text::RegexStepsFor(s.size()));
    bool full = compiled->FullMatch(s);
    bool prefix = compiled->Match(s);
    auto spans = compiled->MatchGroups(s);
    const bool anchored_match = anchored.ok() && anchored->Match(s);
    if (limit.exceeded()) {
      if (compiled->Match(s) || compiled->FullMatch(s) || compiled->MatchGroups(s))
        Fail("a match past the work limit answered yes", pattern, s);
      continue;
    }
    if (full && !prefix) Fail("FullMatch without Match", pattern, s);
    if (spans.has_value() != prefix) Fail("MatchGroups disagrees with Match", pattern, s);
    if (spans) {
      if (spans->size() != static_cast<size_t>(groups) + 1)
        Fail("MatchGroups has the wrong number of groups", pattern, s);
      if (!(*spans)[0] || (*spans)[0]->first != 0) Fail("group 0 is unset or does not start at 0", pattern, s);
      const std::vector<bool> boundary = Boundaries(s);
      for (const auto& g : *spans) {
        if (!g) continue;
        if (g->first > g->second || g->second > s.size()) Fail("a group's range is not within the subject", pattern, s);
        if (!boundary[g->first] || !boundary[g->second]) Fail("a group's range cuts a code point", pattern, s);
      }
      if ((*spans)[0]->second == s.size() && !full) Fail("re.match covers the subject but FullMatch fails", pattern, s);
    }
    if (anchored.ok() && (s.empty() || s.back() != '\n') && anchored_match != full)
      Fail("FullMatch disagrees with Match of (?:p)$", pattern, s);
    // (?i) also folds U+0130, U+0131, U+017F and U+212A onto ASCII letters: the byte comparison below is the
    // oracle for ASCII subjects only.
    const bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    if (word_only && (!icase || ascii)) {
      bool want_full = icase ? EqualsIcase(s, literal) : s == literal;
      bool want_prefix =
          s.size() >= literal.size() &&
          (icase ? EqualsIcase(std::string_view(s).substr(0, literal.size()), literal) : s.starts_with(literal));
      if (full != want_full) Fail("literal pattern: FullMatch disagrees with ==", pattern, s);
      if (prefix != want_prefix) Fail("literal pattern: Match disagrees with starts_with", pattern, s);
      if (spans && (*spans)[0]->second != literal.size())
        Fail("literal pattern: group 0 is not the literal", pattern, s);
    }
  }
  return 0;
}

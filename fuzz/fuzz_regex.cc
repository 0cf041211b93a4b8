// libFuzzer target for the Python-regex translator and matcher (module_select.h).
//
// Input: part 0 = the pattern, parts 1..8 = subjects (none: the pattern itself and a few module names are the
// subjects). Compact encoding expanded first, so patterns and names can be long. No crash, no exception, and
// bounded time (libFuzzer's -timeout) for every pattern the translator accepts.
//
// Oracles (abort() on failure):
//   - FullMatch(s) implies Match(s) (re.fullmatch implies re.match);
//   - a pattern of only letters, digits and '_' matches literally: FullMatch(s) == (s == p), Match(s) ==
//     s.starts_with(p); with a leading (?i), the same ASCII-case-insensitively;
//   - a rejected pattern is InvalidConfig with a message.
//
// The engine is reached only through CompilePythonRegex / PythonRegex (a linear-time engine is replacing
// std::regex behind that interface): switching engines needs no change here beyond the known-bug filter.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "adapter/module_select.h"
#include "fuzz_input.h"
#include "json_mutator.h"
#include "known_bugs.h"

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

bool EqualsIcase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

}  // namespace

PB_FUZZ_DEFINE_MUTATOR((pb::fuzz::MutatorVocabulary{
    {},
    {"(?i)", "q_proj", ".*", "\\.", "(a+)+$", "[^.]+", "(?:", "(?=", "(?!", "(?P<n>", "(?P=n)", "\\d{1,3}", "\\b",
     "\\Z", "\\A", "{,3}", "{2,}", "|", "[\\w.]", "\\x41", "\\101", "\\u0041", "(?#c)", "model.layers.0.self_attn",
     "$", "^", "*?", "+?", "??", "[]]", "[^]]", "\\1"}}))

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  auto parts = pb::fuzz::SplitParts(input, 9);
  const std::string pattern(parts[0]);
  std::vector<std::string> subjects(parts.begin() + 1, parts.end());
  if (subjects.empty()) subjects = {pattern, "model.layers.0.self_attn.q_proj", "q_proj", ""};

  using pb::fuzz::KnownBug;
  auto compiled = pb::adapter::CompilePythonRegex(pattern);
  if (!compiled.ok()) {
    if (compiled.error().code != pb::ErrorCode::InvalidConfig || compiled.error().message.empty())
      Fail("rejection is not InvalidConfig with a message", pattern, compiled.error().message);
    return 0;
  }
  if (pb::fuzz::SkipKnownBug(KnownBug::kRegexNestedQuantifier, pb::fuzz::HasNestedQuantifier(pattern))) return 0;

  std::string_view literal = pattern;
  bool icase = literal.substr(0, 4) == "(?i)";
  if (icase) literal.remove_prefix(4);
  const bool word_only = IsWordOnly(literal);
  for (const auto& s : subjects) {
    if (pb::fuzz::SkipKnownBug(KnownBug::kRegexLongSubject, s.size() > pb::fuzz::kKnownLongSubject)) continue;
    bool full = compiled->FullMatch(s);
    bool prefix = compiled->Match(s);
    if (full && !prefix) Fail("FullMatch without Match", pattern, s);
    if (word_only) {
      bool want_full = icase ? EqualsIcase(s, literal) : s == literal;
      bool want_prefix = s.size() >= literal.size() &&
                         (icase ? EqualsIcase(std::string_view(s).substr(0, literal.size()), literal) : s.starts_with(literal));
      if (full != want_full) Fail("literal pattern: FullMatch disagrees with ==", pattern, s);
      if (prefix != want_prefix) Fail("literal pattern: Match disagrees with starts_with", pattern, s);
    }
  }
  return 0;
}

// Python `re` patterns, matched in linear time.
//
// Module-name patterns in adapter configs are Python `re` syntax. CompilePythonRegex parses the subset
// PEFT users write (literals, `.`, classes, \d \w \s and negations, * + ? {m,n} greedy and lazy, groups,
// (?:...), alternation, ^ $ \b \B, lookahead (?=...) (?!...), a leading (?i)) and validates it the way
// sre_parse does; anything else is InvalidConfig naming the construct (backreferences, lookbehind, named
// groups, inline flags elsewhere, conditionals, atomic groups, possessive quantifiers, \A \Z).
//
// The pattern becomes a Thompson NFA simulated over a set of states, never by backtracking: a match costs
// O(program size x text length) whatever the pattern ("(a+)+$" included), uses no recursion proportional
// to the text or the pattern, and cannot fail at run time. Lookahead is decided without backtracking by
// a backward pass per lookahead that marks, for every position, whether the assertion holds there.
// Limits, each a precise InvalidConfig: 100,000 bytes of pattern, 100 nested groups, repeat counts up to 1000, 10000
// instructions after {m,n} expansion.
//
// Text is matched by code point (UTF-8 decoded; an invalid byte is one code point that only `.` and
// negated classes match), as Python matches a str. Patterns are ASCII. Outside ASCII, \d matches nothing,
// \s matches Unicode white space and \w every other code point (module names are Python identifiers,
// whose non-ASCII characters are letters); (?i) folds ASCII plus the four code points Python folds onto
// ASCII letters (U+0130, U+0131, U+017F, U+212A).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace pb::text {

namespace regex_internal {
struct Program;
}

// A text decoded once for matching against many patterns (a module name against every rank_pattern key).
class RegexSubject {
 public:
  explicit RegexSubject(std::string_view text);
  size_t size() const { return ascii_ ? text_.size() : code_points_.size(); }
  uint32_t at(size_t i) const { return ascii_ ? static_cast<unsigned char>(text_[i]) : code_points_[i]; }
  size_t byte_offset(size_t i) const { return ascii_ ? i : offsets_[i]; }  // i in [0, size()]

 private:
  std::string_view text_;
  bool ascii_ = true;
  std::vector<uint32_t> code_points_;  // only when the text is not ASCII
  std::vector<size_t> offsets_;        // byte offset of each code point, plus the end
};

// A compiled Python regular expression. Cheap to copy (the program is shared and immutable).
class PythonRegex {
 public:
  bool FullMatch(std::string_view text) const { return FullMatch(RegexSubject(text)); }  // re.fullmatch
  bool Match(std::string_view text) const { return Match(RegexSubject(text)); }          // re.match: anchored at start
  bool FullMatch(const RegexSubject& text) const;
  bool Match(const RegexSubject& text) const;

  // re.match(...) with its groups: std::nullopt when there is no match; else one entry per group (0 is the
  // whole match) holding the byte range [begin, end) or std::nullopt for a group that did not take part.
  // The match is the one Python's backtracking finds first (leftmost-first priority, greedy/lazy order).
  // Groups inside a lookahead are reported unset.
  using Span = std::pair<size_t, size_t>;
  std::optional<std::vector<std::optional<Span>>> MatchGroups(std::string_view text) const;

  int group_count() const;  // capturing groups
  const std::string& source() const { return source_; }

 private:
  friend Result<PythonRegex> CompilePythonRegex(std::string_view pattern);
  bool TailFits(const RegexSubject& text, size_t end) const;

  std::string source_;
  std::shared_ptr<const regex_internal::Program> program_;
  // The last characters every match must end with (the backward program's first, branch-free literals;
  // 0 stands for `.`), kept inline: 50,000 rank_pattern keys are mostly rejected by comparing a few
  // characters of a contiguous array, without touching (and missing the cache on) their programs.
  static constexpr size_t kTail = 32;
  char tail_[kTail] = {};
  uint8_t tail_size_ = 0;
  bool ends_with_dollar_ = false;  // Program::ends_with_dollar, inline for the same reason
};

// Bounds the matching work done on this thread while it is alive, so that a hostile config against hostile
// module names (16,000 modules_to_save entries x a 200,000-character name) ends in a precise error instead
// of minutes of matching; PEFT's `re` would need at least as long. One step is one NFA thread moved over
// one character. The branch-free start of a program and the tail test are not counted: they cost at most
// the program's size per call, so a read stays within (sum of program sizes) x names + the limit. Past the
// limit every match in scope returns false and exceeded() tells the caller, which reports it instead of
// the answers. Scopes nest (the innermost one counts).
class RegexWorkLimit {
 public:
  explicit RegexWorkLimit(uint64_t steps);
  ~RegexWorkLimit();
  RegexWorkLimit(const RegexWorkLimit&) = delete;
  RegexWorkLimit& operator=(const RegexWorkLimit&) = delete;
  bool exceeded() const { return over_; }
  uint64_t steps() const { return steps_; }
  // Takes n steps; false (and exceeded() from then on) once the limit is passed.
  bool Spend(uint64_t n);

 private:
  uint64_t steps_, left_;
  bool over_ = false;
  RegexWorkLimit* outer_;
};

// The NFA simulation one read of an adapter may take (a RegexWorkLimit of this many steps): a fixed 2^22 steps
// (0.1 s natively), far above what a small adapter's patterns need, plus 16 steps per byte of the names the patterns
// are matched against. Matching is linear in a name's length (each character moves the few live threads of the
// patterns PEFT users write), so a real adapter's work grows with its names and the allowance grows with it: size
// alone never refuses an adapter (89,088 MoE tensor names against `.*\.(gate_proj|up_proj|down_proj)$`), while a
// hostile config, whose cost grows with its pattern count instead, still ends in a precise error in bounded time.
constexpr uint64_t RegexStepsFor(uint64_t name_bytes) { return (uint64_t{1} << 22) + 16 * name_bytes; }

// InvalidConfig naming the construct and its position when the pattern is malformed, uses syntax outside
// the subset above, or exceeds a limit. The pattern is echoed at most 200 bytes long.
Result<PythonRegex> CompilePythonRegex(std::string_view pattern);

}  // namespace pb::text

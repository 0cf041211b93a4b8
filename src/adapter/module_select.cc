#include "adapter/module_select.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace pb::adapter {

namespace {

// std::regex (libstdc++) expands {m,n} into copies of the repeated fragment and throws past ~100000 states;
// the WASM build cannot catch that, so sizes are bounded before construction. Module-name patterns are tiny.
constexpr uint64_t kMaxRepeat = 1000;
constexpr uint64_t kMaxCost = 10000;
constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();

struct Translation {
  std::string ecma;  // ECMAScript source for std::regex
  bool icase = false;
  int groups = 0;  // capturing groups, to know where PEFT's group(1) lands
};

// What the previous element was, which decides whether a quantifier may follow it.
enum class Last { kNothing, kAtom, kAssertion, kLookahead, kRepeat };

struct Frame {
  uint64_t cost = 0;       // rough count of NFA states for the group's content
  uint64_t last_cost = 0;  // of the element a quantifier would repeat
  bool lookahead = false;
};

uint64_t SaturatingMul(uint64_t a, uint64_t b) { return (b != 0 && a > kUnbounded / b) ? kUnbounded : a * b; }

bool IsOctal(char c) { return c >= '0' && c <= '7'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(unsigned char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

uint64_t ParseDigits(std::string_view digits) {  // at most 9 digits: no overflow
  uint64_t v = 0;
  for (char c : digits) v = v * 10 + static_cast<uint64_t>(c - '0');
  return v;
}

std::string Hex2(unsigned v) {
  const char* d = "0123456789ABCDEF";
  return std::string("\\x") + d[(v >> 4) & 15] + d[v & 15];
}

// Walks a Python `re` pattern once, validating it the way sre_parse does and writing the ECMAScript
// equivalent. Anything whose meaning differs between the two, or that std::regex would throw on, is an error.
class Translator {
 public:
  explicit Translator(std::string_view p) : p_(p) {}

  Result<Translation> Run() {
    if (p_.substr(0, 4) == "(?i)") {  // the one inline flag with an exact std::regex equivalent
      out_.icase = true;
      i_ = 4;
    }
    frames_.push_back({});
    while (i_ < p_.size()) {
      if (auto e = Step()) return *e;
    }
    if (frames_.size() > 1) return Fail("missing ), unterminated subpattern", open_.back());
    if (frames_[0].cost > kMaxCost) return Fail("pattern too large for std::regex", 0);
    return out_;
  }

 private:
  Error Fail(const std::string& what, size_t at) const {
    return MakeError(ErrorCode::InvalidConfig,
                     what + " at position " + std::to_string(at) + " of \"" + std::string(p_) + "\"");
  }

  Frame& frame() { return frames_.back(); }
  void Atom(const std::string& text, uint64_t cost = 1) {
    out_.ecma += text;
    frame().cost += cost;
    frame().last_cost = cost;
    last_ = Last::kAtom;
  }
  void Assertion(const std::string& text) {
    out_.ecma += text;
    frame().cost += 1;
    last_ = Last::kAssertion;
  }

  std::optional<Error> Step() {
    size_t at = i_;
    char c = p_[i_++];
    switch (c) {
      case '\\': return Escape(at);
      case '[': return Class(at);
      case '(': return Open(at);
      case ')': return Close(at);
      case '*': return Quantifier(at, 0, kUnbounded, "*");
      case '+': return Quantifier(at, 1, kUnbounded, "+");
      case '?': return Quantifier(at, 0, 1, "?");
      case '{': return Brace(at);
      case '|':
        out_.ecma += '|';
        frame().cost += 1;
        last_ = Last::kNothing;
        return std::nullopt;
      case '^':
      case '$': Assertion(std::string(1, c)); return std::nullopt;
      case '.': Atom("."); return std::nullopt;
      default: return Literal(at, static_cast<unsigned char>(c));
    }
  }

  // A literal character outside a class. std::regex works on bytes and Python on code points, so a
  // multi-byte UTF-8 character would behave differently under `.`, quantifiers and classes.
  std::optional<Error> Literal(size_t at, unsigned v) {
    if (v >= 0x80) return Fail("non-ASCII characters are not supported", at);
    std::string_view special = "^$\\.*+?()[]{}|";
    if (IsAlnum(static_cast<unsigned char>(v)) || v == '_')
      Atom(std::string(1, static_cast<char>(v)));
    else if (special.find(static_cast<char>(v)) != std::string_view::npos)
      Atom(std::string("\\") + static_cast<char>(v));
    else if (v >= 0x20 && v < 0x7F)
      Atom(std::string(1, static_cast<char>(v)));
    else
      Atom(Hex2(v));
    return std::nullopt;
  }

  // Escapes that denote one character, shared by classes and the outside (sre_parse _escape/_class_escape).
  // `e` is the character after the backslash, already consumed.
  std::optional<Error> CharEscape(size_t at, char e, bool in_class, unsigned* value) {
    auto hex = [&](size_t digits) -> std::optional<Error> {
      unsigned v = 0;
      for (size_t k = 0; k < digits; ++k) {
        if (i_ >= p_.size() || HexValue(p_[i_]) < 0) return Fail(std::string("incomplete escape \\") + e, at);
        v = v * 16 + static_cast<unsigned>(HexValue(p_[i_++]));
        if (v >= 0x80) return Fail("non-ASCII characters are not supported", at);
      }
      *value = v;
      return std::nullopt;
    };
    switch (e) {
      case 'n': *value = '\n'; return std::nullopt;
      case 'r': *value = '\r'; return std::nullopt;
      case 't': *value = '\t'; return std::nullopt;
      case 'f': *value = '\f'; return std::nullopt;
      case 'v': *value = '\v'; return std::nullopt;
      case 'a': *value = 0x07; return std::nullopt;
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      case '0': {
        unsigned v = 0;
        for (int k = 0; k < 2 && i_ < p_.size() && IsOctal(p_[i_]); ++k)
          v = v * 8 + static_cast<unsigned>(p_[i_++] - '0');
        *value = v;
        return std::nullopt;
      }
      default: break;
    }
    if (in_class && e == 'b') {  // backspace inside a class, as in ECMAScript
      *value = 0x08;
      return std::nullopt;
    }
    if (e == 'N') return Fail("named Unicode escapes \\N{...} are not supported", at);
    if (IsDigit(e)) return Fail(std::string("backreferences and octal escapes (\\") + e + ") are not supported", at);
    if (IsAlnum(static_cast<unsigned char>(e))) return Fail(std::string("bad escape \\") + e, at);
    *value = static_cast<unsigned char>(e);  // an escaped punctuation character stands for itself
    return std::nullopt;
  }

  std::optional<Error> Escape(size_t at) {
    if (i_ >= p_.size()) return Fail("bad escape (end of pattern)", at);
    char e = p_[i_++];
    switch (e) {
      case 'd':
      case 'D':
      case 's':
      case 'S':
      case 'w':
      case 'W': Atom(std::string("\\") + e); return std::nullopt;
      case 'b':  // (Python's \B never matches an empty string; module names are never empty)
      case 'B': Assertion(std::string("\\") + e); return std::nullopt;
      case 'A': return Fail("\\A (use ^) is not supported", at);
      case 'Z': return Fail("\\Z (use $) is not supported", at);
      case 'z': return Fail("\\z (use $) is not supported", at);
      default: break;
    }
    unsigned v = 0;
    if (auto err = CharEscape(at, e, /*in_class=*/false, &v)) return err;
    return Literal(at, v);
  }

  struct ClassAtom {
    bool is_set = false;  // \d \w \s and their negations: cannot be a range end
    std::string text;     // for is_set
    unsigned value = 0;   // otherwise
  };

  std::optional<Error> ReadClassAtom(size_t at, ClassAtom* a) {
    char c = p_[i_++];
    if (c != '\\') {
      if (static_cast<unsigned char>(c) >= 0x80) return Fail("non-ASCII characters are not supported", at);
      a->value = static_cast<unsigned char>(c);
      return std::nullopt;
    }
    if (i_ >= p_.size()) return Fail("bad escape (end of pattern)", at);
    char e = p_[i_++];
    if (e == 'd' || e == 'D' || e == 's' || e == 'S' || e == 'w' || e == 'W') {
      a->is_set = true;
      a->text = std::string("\\") + e;
      return std::nullopt;
    }
    if (e == 'A' || e == 'B' || e == 'Z' || e == 'z') return Fail(std::string("bad escape \\") + e, at);
    return CharEscape(at, e, /*in_class=*/true, &a->value);
  }

  // Inside a class every non-alphanumeric character is written as \xHH, so none of ECMAScript's class
  // syntax ([:alpha:], a stray ] or -) can be triggered by what Python reads as a literal.
  static std::string ClassChar(unsigned v) {
    return IsAlnum(static_cast<unsigned char>(v)) ? std::string(1, static_cast<char>(v)) : Hex2(v);
  }

  std::optional<Error> Class(size_t at) {
    std::string body = "[";
    if (i_ < p_.size() && p_[i_] == '^') {
      body += '^';
      ++i_;
    }
    bool first = true;  // Python reads a ] right after [ or [^ as a literal
    for (;;) {
      if (i_ >= p_.size()) return Fail("unterminated character set", at);
      if (p_[i_] == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      size_t item_at = i_;
      ClassAtom a;
      if (auto err = ReadClassAtom(item_at, &a)) return err;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        ClassAtom b;
        if (auto err = ReadClassAtom(i_, &b)) return err;
        if (a.is_set || b.is_set || a.value > b.value) return Fail("bad character range", item_at);
        body += ClassChar(a.value) + "-" + ClassChar(b.value);
      } else {
        body += a.is_set ? a.text : ClassChar(a.value);
      }
    }
    Atom(body + "]");
    return std::nullopt;
  }

  std::optional<Error> Open(size_t at) {
    if (i_ < p_.size() && p_[i_] == '?') {
      ++i_;
      if (i_ >= p_.size()) return Fail("unexpected end of pattern", at);
      char k = p_[i_];
      char k2 = i_ + 1 < p_.size() ? p_[i_ + 1] : '\0';
      if (k == ':' || k == '=' || k == '!') {
        ++i_;
        out_.ecma += std::string("(?") + k;
        Push(at, k != ':');
        return std::nullopt;
      }
      if (k == 'P' && k2 == '<') return Fail("named groups (?P<name>...) are not supported", at);
      if (k == 'P' && k2 == '=') return Fail("named backreferences (?P=name) are not supported", at);
      if (k == 'P') return Fail("unknown extension ?P", at);
      if (k == '<' && (k2 == '=' || k2 == '!')) return Fail("lookbehind (?<=...) / (?<!...) is not supported", at);
      if (k == '<') return Fail("unknown extension ?<", at);
      if (k == '#') return Fail("comments (?#...) are not supported", at);
      if (k == '(') return Fail("conditional groups (?(id)yes|no) are not supported", at);
      if (k == '>') return Fail("atomic groups (?>...) are not supported", at);
      if (std::string_view("aiLmsux-").find(k) != std::string_view::npos)
        return Fail("inline flags are not supported (only a leading (?i) is)", at);
      return Fail(std::string("unknown extension ?") + k, at);
    }
    ++out_.groups;
    out_.ecma += '(';
    Push(at, false);
    return std::nullopt;
  }

  void Push(size_t at, bool lookahead) {
    frames_.push_back({0, 0, lookahead});
    open_.push_back(at);
    last_ = Last::kNothing;
  }

  std::optional<Error> Close(size_t at) {
    if (frames_.size() == 1) return Fail("unbalanced parenthesis", at);
    Frame inner = frames_.back();
    frames_.pop_back();
    open_.pop_back();
    out_.ecma += ')';
    uint64_t cost = inner.cost + 2;
    frame().cost += cost;
    frame().last_cost = cost;
    last_ = inner.lookahead ? Last::kLookahead : Last::kAtom;
    return std::nullopt;
  }

  // sre_parse: "{" starts a repeat only as {m}, {m,}, {,n} or {m,n}; otherwise it is a literal.
  std::optional<Error> Brace(size_t at) {
    size_t j = i_;
    std::string lo, hi;
    while (j < p_.size() && IsDigit(p_[j])) lo += p_[j++];
    bool comma = j < p_.size() && p_[j] == ',';
    if (comma) {
      ++j;
      while (j < p_.size() && IsDigit(p_[j])) hi += p_[j++];
    } else {
      hi = lo;
    }
    bool is_repeat = j < p_.size() && p_[j] == '}' && j != i_;  // "{}" is two literals
    if (!is_repeat) return Literal(at, '{');
    i_ = j + 1;
    if (lo.size() > 9 || hi.size() > 9) return Fail("the repetition number is too large", at);
    uint64_t min = lo.empty() ? 0 : ParseDigits(lo);
    uint64_t max = hi.empty() ? kUnbounded : ParseDigits(hi);
    if (max < min) return Fail("min repeat greater than max repeat", at);
    std::string text = "{" + std::to_string(min);
    if (comma) text += "," + (max == kUnbounded ? std::string() : std::to_string(max));
    return Quantifier(at, min, max, text + "}");
  }

  std::optional<Error> Quantifier(size_t at, uint64_t min, uint64_t max, const std::string& text) {
    switch (last_) {
      case Last::kNothing:
      case Last::kAssertion: return Fail("nothing to repeat", at);
      case Last::kLookahead: return Fail("a quantified lookahead is not supported", at);
      case Last::kRepeat: return Fail("multiple repeat", at);
      case Last::kAtom: break;
    }
    if (min > kMaxRepeat || (max != kUnbounded && max > kMaxRepeat))
      return Fail("repeat counts above " + std::to_string(kMaxRepeat) + " are not supported", at);
    out_.ecma += text;
    if (i_ < p_.size() && p_[i_] == '?') {  // lazy: same in both
      out_.ecma += '?';
      ++i_;
    } else if (i_ < p_.size() && p_[i_] == '+') {
      return Fail("possessive quantifiers (*+, ++, ?+, {m,n}+) are not supported", at);
    }
    uint64_t copies = (max == kUnbounded ? min : max) + 1;
    frame().cost = std::min(kUnbounded - 1, frame().cost) + SaturatingMul(frame().last_cost, copies);
    frame().last_cost = SaturatingMul(frame().last_cost, copies + 1);
    if (frame().cost > kMaxCost) return Fail("pattern too large for std::regex", at);
    last_ = Last::kRepeat;
    return std::nullopt;
  }

  std::string_view p_;
  size_t i_ = 0;
  Translation out_;
  std::vector<Frame> frames_;
  std::vector<size_t> open_;  // positions of the open parentheses, for the error message
  Last last_ = Last::kNothing;
};

Result<Translation> Translate(std::string_view pattern) { return Translator(pattern).Run(); }

std::regex Build(const Translation& t) {
  auto flags = std::regex::ECMAScript;
  if (t.icase) flags |= std::regex::icase;
  return std::regex(t.ecma, flags);
}

using SvMatch = std::match_results<std::string_view::const_iterator>;

// The Python patterns PEFT builds around user strings.
std::string RankKeyPattern(std::string_view key) { return R"((.*\.)?()" + std::string(key) + ")$"; }
std::string SavedModulePattern(std::string_view m) { return R"((^|.*\.))" + std::string(m) + R"(($|\..*))"; }
std::string LayersPattern(std::string_view p) { return R"(.*?\.)" + std::string(p) + R"(\.(\d+)\.)"; }
// PEFT >= 0.20: lazy, so the first numbered segment wins ("layers.1" in "layers.1.experts.0.w1");
// <= 0.19 used a greedy ".*\." and took the last one.
constexpr std::string_view kDefaultLayersPattern = R"(.*?\.[^.]*\.(\d+)\.)";

bool EndsWithDotted(std::string_view name, std::string_view suffix) {
  return name.size() > suffix.size() && name.ends_with(suffix) && name[name.size() - suffix.size() - 1] == '.';
}

std::string Quote(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status CheckPattern(const std::string& what, const std::string& python, int allowed_groups = -1) {
  auto t = Translate(python);
  if (!t.ok()) return MakeError(ErrorCode::InvalidConfig, "adapter_config.json: " + what + ": " + t.error().message);
  if (allowed_groups >= 0 && t->groups > allowed_groups)
    return MakeError(ErrorCode::InvalidConfig, "adapter_config.json: " + what +
                                                   " has a capturing group; PEFT would read the layer index from it");
  return Status::Ok();
}

// First key (file order) whose PEFT pattern matches; PEFT then looks the name itself up when none does.
template <class V>
std::optional<std::pair<std::string, V>> FirstPatternMatch(const std::vector<std::pair<std::string, V>>& patterns,
                                                           std::string_view name) {
  for (const auto& entry : patterns) {
    auto re = CompilePythonRegex(RankKeyPattern(entry.first));
    if (re.ok() && re->Match(name)) return entry;
  }
  for (const auto& entry : patterns)
    if (entry.first == name) return entry;
  return std::nullopt;
}

}  // namespace

bool PythonRegex::FullMatch(std::string_view text) const { return std::regex_match(text.begin(), text.end(), regex_); }

bool PythonRegex::Match(std::string_view text) const {
  return std::regex_search(text.begin(), text.end(), regex_, std::regex_constants::match_continuous);
}

Result<PythonRegex> CompilePythonRegex(std::string_view pattern) {
  auto t = Translate(pattern);
  if (!t.ok()) return MakeError(ErrorCode::InvalidConfig, "regex: " + t.error().message);
  PythonRegex re;
  re.source_ = std::string(pattern);
#if defined(__cpp_exceptions)
  // The translator validates first, but fuzzing found patterns it accepts that std::regex still rejects
  // (a libstdc++ limit): natively that is a precise error, not an abort. The WASM build has no exceptions.
  try {
    re.regex_ = Build(t.value());
  } catch (const std::regex_error& e) {
    return MakeError(ErrorCode::InvalidConfig, "regex " + std::string(pattern.substr(0, 200)) +
                                                   ": not supported by the regex engine (" + e.what() + ")");
  }
#else
  re.regex_ = Build(t.value());
#endif
  return re;
}

Status ValidateConfigPatterns(const LoraConfig& config) {
  Status s;
  if (config.target_modules.form == ModuleSelector::Form::kRegex && !config.target_modules.is_all_linear())
    s = CheckPattern("`target_modules` regex " + Quote(config.target_modules.regex), config.target_modules.regex);
  if (s.ok() && config.exclude_modules.form == ModuleSelector::Form::kRegex)
    s = CheckPattern("`exclude_modules` regex " + Quote(config.exclude_modules.regex), config.exclude_modules.regex);
  for (const auto& [key, r] : config.rank_pattern)
    if (s.ok()) s = CheckPattern("`rank_pattern` key " + Quote(key), RankKeyPattern(key));
  for (const auto& [key, alpha] : config.alpha_pattern)
    if (s.ok()) s = CheckPattern("`alpha_pattern` key " + Quote(key), RankKeyPattern(key));
  // PEFT splices these into regexes too (check_target_module_exists).
  for (const auto& m : config.modules_to_save)
    if (s.ok()) s = CheckPattern("`modules_to_save` entry " + Quote(m), SavedModulePattern(m));
  if (!config.layers_to_transform.empty())
    for (const auto& p : config.layers_pattern)
      if (s.ok()) s = CheckPattern("`layers_pattern` entry " + Quote(p), LayersPattern(p), /*allowed_groups=*/1);
  return s;
}

std::optional<bool> IsTargeted(const LoraConfig& config, std::string_view name) {
  using Form = ModuleSelector::Form;
  // 1. exclude_modules (an empty string or list excludes nothing: PEFT tests its truthiness).
  const ModuleSelector& ex = config.exclude_modules;
  if (ex.form == Form::kRegex && !ex.regex.empty()) {
    auto re = CompilePythonRegex(ex.regex);
    if (!re.ok()) return std::nullopt;  // only configs that skipped ParseLoraConfig get here
    if (re->FullMatch(name)) return false;
  } else if (ex.form == Form::kList) {
    for (const auto& e : ex.names)
      if (name == e || EndsWithDotted(name, e)) return false;
  }
  // 2. A module cannot be both LoRA-wrapped and fully saved.
  for (const auto& m : config.modules_to_save) {
    auto re = CompilePythonRegex(SavedModulePattern(m));
    if (!re.ok()) return std::nullopt;
    if (re->Match(name)) return false;
  }
  // 3. / 4. target_modules. Null and "all-linear" are resolved from the model's module types.
  const ModuleSelector& tm = config.target_modules;
  if (tm.form == Form::kNone || tm.is_all_linear()) return std::nullopt;
  if (tm.form == Form::kRegex) {
    auto re = CompilePythonRegex(tm.regex);
    if (!re.ok()) return std::nullopt;
    return re->FullMatch(name);
  }
  for (const auto& t : tm.names)
    if (name == t) return true;  // an exact entry skips the layer filter, as in PEFT
  bool found = false;
  for (const auto& t : tm.names) found = found || EndsWithDotted(name, t);
  // 5. layers_to_transform / layers_pattern, list form only.
  if (!found || config.layers_to_transform.empty()) return found;
  std::vector<std::string> patterns;
  if (config.layers_pattern.empty()) patterns.emplace_back(kDefaultLayersPattern);
  for (const auto& p : config.layers_pattern) patterns.push_back(LayersPattern(p));
  for (const auto& p : patterns) {
    auto t = Translate(p);
    if (!t.ok() || t->groups != 1) return std::nullopt;
    std::regex re = Build(t.value());
    SvMatch m;
    if (!std::regex_search(name.begin(), name.end(), m, re, std::regex_constants::match_continuous)) continue;
    // int(group(1)); an index too large for int64 equals none of the configured layers.
    int64_t index = 0;
    for (char c : m[1].str()) {
      if (index > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
      index = index * 10 + (c - '0');
    }
    for (int64_t l : config.layers_to_transform)
      if (l == index) return true;
    return false;
  }
  return false;  // no layer index in the name
}

ModuleSettings ResolveModuleSettings(const LoraConfig& config, std::string_view name) {
  ModuleSettings s{config.r, config.lora_alpha, 0.0, std::nullopt, std::nullopt};
  if (auto hit = FirstPatternMatch(config.rank_pattern, name)) {
    s.r = hit->second;
    s.rank_pattern_key = hit->first;
  }
  if (auto hit = FirstPatternMatch(config.alpha_pattern, name)) {
    s.alpha = hit->second;
    s.alpha_pattern_key = hit->first;
  }
  double r = static_cast<double>(s.r);
  s.scaling = config.use_rslora ? s.alpha / std::sqrt(r) : s.alpha / r;
  return s;
}

}  // namespace pb::adapter

// Python `re` syntax to a tree, validated the way sre_parse validates it (Python 3.11). One left-to-right
// pass with an explicit stack of open groups: no recursion, so a deeply nested pattern cannot overflow the
// stack; past kMaxNesting open groups it is an error instead.
#include <optional>
#include <string>

#include "text/python_regex.h"
#include "text/python_regex_internal.h"
#include "core/utf8.h"

namespace pb::text::regex_internal {

namespace {

bool IsOctal(char c) { return c >= '0' && c <= '7'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(unsigned char c) {
  return IsDigit(static_cast<char>(c)) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<SetKind> SetOf(char e) {
  switch (e) {
    case 'd': return SetKind::kDigit;
    case 'D': return SetKind::kNotDigit;
    case 'w': return SetKind::kWord;
    case 'W': return SetKind::kNotWord;
    case 's': return SetKind::kSpace;
    case 'S': return SetKind::kNotSpace;
    default: return std::nullopt;
  }
}

// What the previous element was, which decides whether a quantifier may follow it.
enum class Last { kNothing, kAtom, kAssertion, kRepeat };

struct Frame {
  enum class Kind { kTop, kCapture, kNonCapture, kLookahead, kNegLookahead } kind = Kind::kTop;
  uint32_t group = 0;  // capture index for kCapture
  size_t open_at = 0;  // position of the "(" for messages
  std::vector<std::vector<uint32_t>> alts{{}};
};

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  Result<Tree> Run() {
    if (p_.size() > kMaxPatternBytes)  // refused before building anything: bounded memory for any input
      return Fail("patterns longer than " + std::to_string(kMaxPatternBytes) + " bytes are not supported", 0);
    if (p_.substr(0, 4) == "(?i)") {  // the one inline flag supported: it applies to the whole pattern
      tree_.icase = true;
      i_ = 4;
    }
    frames_.push_back({});
    while (i_ < p_.size()) {
      if (auto e = Step()) return *e;
    }
    if (frames_.size() > 1) return Fail("missing ), unterminated subpattern", frames_.back().open_at);
    tree_.root = Finish(frames_.back());
    return std::move(tree_);
  }

 private:
  Error Fail(const std::string& what, size_t at) const {
    return MakeError(ErrorCode::InvalidConfig,
                     what + " at position " + std::to_string(at) + " of \"" + ClipForMessage(p_) + "\"");
  }

  uint32_t Add(Node n) {
    tree_.nodes.push_back(std::move(n));
    return static_cast<uint32_t>(tree_.nodes.size() - 1);
  }
  std::vector<uint32_t>& items() { return frames_.back().alts.back(); }
  void Atom(Node n) {
    items().push_back(Add(std::move(n)));
    last_ = Last::kAtom;
  }
  void Assertion(AssertKind k) {
    Node n;
    n.kind = NodeKind::kAssert;
    n.assert = k;
    items().push_back(Add(std::move(n)));
    last_ = Last::kAssertion;
  }
  void Literal(uint32_t c) {
    Node n;
    n.kind = NodeKind::kLiteral;
    n.value = c;
    Atom(std::move(n));
  }
  void ClassAtom(CharClass cls) {
    cls.icase = tree_.icase;
    tree_.classes.push_back(std::move(cls));
    Node n;
    n.kind = NodeKind::kClass;
    n.value = static_cast<uint32_t>(tree_.classes.size() - 1);
    Atom(std::move(n));
  }

  // The alternatives of a frame as one node: a concatenation per alternative, an alternation over them.
  uint32_t Finish(Frame& f) {
    std::vector<uint32_t> alts;
    for (auto& seq : f.alts) {
      if (seq.size() == 1) {
        alts.push_back(seq[0]);
        continue;
      }
      Node n;
      n.kind = seq.empty() ? NodeKind::kEmpty : NodeKind::kConcat;
      n.children = std::move(seq);
      alts.push_back(Add(std::move(n)));
    }
    if (alts.size() == 1) return alts[0];
    Node n;
    n.kind = NodeKind::kAlt;
    n.children = std::move(alts);
    return Add(std::move(n));
  }

  std::optional<Error> Step() {
    size_t at = i_;
    char c = p_[i_++];
    switch (c) {
      case '\\': return Escape(at);
      case '[': return Class(at);
      case '(': return Open(at);
      case ')': return Close(at);
      case '*': return Quantifier(at, 0, kUnbounded);
      case '+': return Quantifier(at, 1, kUnbounded);
      case '?': return Quantifier(at, 0, 1);
      case '{': return Brace(at);
      case '|':
        frames_.back().alts.emplace_back();
        last_ = Last::kNothing;
        return std::nullopt;
      case '^': Assertion(AssertKind::kBegin); return std::nullopt;
      case '$': Assertion(AssertKind::kEnd); return std::nullopt;
      case '.': {
        Node n;
        n.kind = NodeKind::kAny;
        Atom(std::move(n));
        return std::nullopt;
      }
      default:
        if (static_cast<unsigned char>(c) >= 0x80) return Fail("non-ASCII characters are not supported", at);
        Literal(static_cast<unsigned char>(c));
        return std::nullopt;
    }
  }

  // Escapes that denote one character, shared by classes and the outside (sre_parse _escape/_class_escape).
  // `e` is the character after the backslash, already consumed.
  std::optional<Error> CharEscape(size_t at, char e, bool in_class, uint32_t* value) {
    auto hex = [&](size_t digits) -> std::optional<Error> {
      uint32_t v = 0;
      for (size_t k = 0; k < digits; ++k) {
        if (i_ >= p_.size() || HexValue(p_[i_]) < 0) return Fail(std::string("incomplete escape \\") + e, at);
        v = v * 16 + static_cast<uint32_t>(HexValue(p_[i_++]));
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
        uint32_t v = 0;
        for (int k = 0; k < 2 && i_ < p_.size() && IsOctal(p_[i_]); ++k)
          v = v * 8 + static_cast<uint32_t>(p_[i_++] - '0');
        *value = v;
        return std::nullopt;
      }
      default: break;
    }
    if (in_class && e == 'b') {  // backspace inside a class
      *value = 0x08;
      return std::nullopt;
    }
    if (e == 'N') return Fail("named Unicode escapes \\N{...} are not supported", at);
    if (IsDigit(e))
      return Fail(std::string("backreferences and octal escapes (\\") + e +
                      ") are not supported (a backreference cannot be matched without backtracking)",
                  at);
    if (IsAlnum(static_cast<unsigned char>(e))) return Fail(std::string("bad escape \\") + e, at);
    if (static_cast<unsigned char>(e) >= 0x80) return Fail("non-ASCII characters are not supported", at);
    *value = static_cast<unsigned char>(e);  // an escaped punctuation character stands for itself
    return std::nullopt;
  }

  std::optional<Error> Escape(size_t at) {
    if (i_ >= p_.size()) return Fail("bad escape (end of pattern)", at);
    char e = p_[i_++];
    if (auto set = SetOf(e)) {
      CharClass cls;
      cls.sets.push_back(*set);
      ClassAtom(std::move(cls));
      return std::nullopt;
    }
    switch (e) {
      case 'b': Assertion(AssertKind::kWordBoundary); return std::nullopt;
      case 'B': Assertion(AssertKind::kNotWordBoundary); return std::nullopt;
      case 'A': return Fail("\\A (use ^) is not supported", at);
      case 'Z': return Fail("\\Z (use $) is not supported", at);
      case 'z': return Fail("\\z (use $) is not supported", at);
      default: break;
    }
    uint32_t v = 0;
    if (auto err = CharEscape(at, e, /*in_class=*/false, &v)) return err;
    Literal(v);
    return std::nullopt;
  }

  struct ClassItem {
    std::optional<SetKind> set;  // \d \w \s and negations: cannot be a range end
    uint32_t value = 0;
  };

  std::optional<Error> ReadClassItem(size_t at, ClassItem* a) {
    char c = p_[i_++];
    if (c != '\\') {
      if (static_cast<unsigned char>(c) >= 0x80) return Fail("non-ASCII characters are not supported", at);
      a->value = static_cast<unsigned char>(c);
      return std::nullopt;
    }
    if (i_ >= p_.size()) return Fail("bad escape (end of pattern)", at);
    char e = p_[i_++];
    if ((a->set = SetOf(e))) return std::nullopt;
    if (e == 'A' || e == 'B' || e == 'Z' || e == 'z') return Fail(std::string("bad escape \\") + e, at);
    return CharEscape(at, e, /*in_class=*/true, &a->value);
  }

  std::optional<Error> Class(size_t at) {
    CharClass cls;
    if (i_ < p_.size() && p_[i_] == '^') {
      cls.negated = true;
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
      ClassItem a;
      if (auto err = ReadClassItem(item_at, &a)) return err;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        ClassItem b;
        if (auto err = ReadClassItem(i_, &b)) return err;
        if (a.set || b.set || a.value > b.value) return Fail("bad character range", item_at);
        cls.ranges.emplace_back(a.value, b.value);
      } else if (a.set) {
        cls.sets.push_back(*a.set);
      } else {
        cls.ranges.emplace_back(a.value, a.value);
      }
    }
    ClassAtom(std::move(cls));
    return std::nullopt;
  }

  std::optional<Error> Open(size_t at) {
    Frame f;
    f.open_at = at;
    if (i_ < p_.size() && p_[i_] == '?') {
      ++i_;
      if (i_ >= p_.size()) return Fail("unexpected end of pattern", at);
      char k = p_[i_];
      char k2 = i_ + 1 < p_.size() ? p_[i_ + 1] : '\0';
      if (k == ':') f.kind = Frame::Kind::kNonCapture;
      else if (k == '=') f.kind = Frame::Kind::kLookahead;
      else if (k == '!') f.kind = Frame::Kind::kNegLookahead;
      else if (k == 'P' && k2 == '<') return Fail("named groups (?P<name>...) are not supported", at);
      else if (k == 'P' && k2 == '=')
        return Fail("named backreferences (?P=name) are not supported (a backreference cannot be matched "
                    "without backtracking)",
                    at);
      else if (k == 'P') return Fail("unknown extension ?P", at);
      else if (k == '<' && (k2 == '=' || k2 == '!')) return Fail("lookbehind (?<=...) / (?<!...) is not supported", at);
      else if (k == '<') return Fail("unknown extension ?<", at);
      else if (k == '#') return Fail("comments (?#...) are not supported", at);
      else if (k == '(') return Fail("conditional groups (?(id)yes|no) are not supported", at);
      else if (k == '>') return Fail("atomic groups (?>...) are not supported", at);
      else if (std::string_view("aiLmsux-").find(k) != std::string_view::npos)
        return Fail("inline flags are not supported (only a leading (?i) is)", at);
      else return Fail(std::string("unknown extension ?") + k, at);
      ++i_;
    } else {
      f.kind = Frame::Kind::kCapture;
      f.group = static_cast<uint32_t>(++tree_.groups);
    }
    if (frames_.size() > kMaxNesting)
      return Fail("more than " + std::to_string(kMaxNesting) + " nested groups are not supported", at);
    frames_.push_back(std::move(f));
    last_ = Last::kNothing;
    return std::nullopt;
  }

  std::optional<Error> Close(size_t at) {
    if (frames_.size() == 1) return Fail("unbalanced parenthesis", at);
    Frame f = std::move(frames_.back());
    frames_.pop_back();
    uint32_t body = Finish(f);
    Node n;
    n.children.push_back(body);
    switch (f.kind) {
      case Frame::Kind::kCapture:
        n.kind = NodeKind::kGroup;
        n.value = f.group;
        break;
      case Frame::Kind::kLookahead:
      case Frame::Kind::kNegLookahead:
        n.kind = NodeKind::kAssert;
        n.assert = f.kind == Frame::Kind::kLookahead ? AssertKind::kLookahead : AssertKind::kNegLookahead;
        n.value = static_cast<uint32_t>(tree_.looks.size());
        break;
      default:  // (?:...) is its content
        items().push_back(body);
        last_ = Last::kAtom;
        return std::nullopt;
    }
    uint32_t id = Add(std::move(n));
    if (tree_.nodes[id].kind == NodeKind::kAssert) tree_.looks.push_back(id);
    items().push_back(id);
    last_ = Last::kAtom;  // sre lets a lookahead be repeated (unlike ^ $ \b \B)
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
    if (!is_repeat) {
      Literal('{');
      return std::nullopt;
    }
    i_ = j + 1;
    auto number = [](const std::string& digits, uint32_t none) -> uint64_t {
      if (digits.empty()) return none;
      uint64_t v = 0;
      for (char c : digits) v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(c - '0'), UINT64_MAX / 20);
      return v;
    };
    uint64_t min = number(lo, 0), max = number(hi, kUnbounded);
    if (lo.size() > 9 || (hi.size() > 9)) return Fail("the repetition number is too large", at);
    if (max < min) return Fail("min repeat greater than max repeat", at);
    return Quantifier(at, static_cast<uint32_t>(std::min<uint64_t>(min, UINT32_MAX - 1)),
                      max == kUnbounded ? kUnbounded : static_cast<uint32_t>(std::min<uint64_t>(max, UINT32_MAX - 1)));
  }

  std::optional<Error> Quantifier(size_t at, uint32_t min, uint32_t max) {
    switch (last_) {
      case Last::kNothing:
      case Last::kAssertion: return Fail("nothing to repeat", at);
      case Last::kRepeat: return Fail("multiple repeat", at);
      case Last::kAtom: break;
    }
    if (min > kMaxRepeat || (max != kUnbounded && max > kMaxRepeat))
      return Fail("repeat counts above " + std::to_string(kMaxRepeat) + " are not supported", at);
    Node n;
    n.kind = NodeKind::kRepeat;
    n.min = min;
    n.max = max;
    if (i_ < p_.size() && p_[i_] == '?') {
      n.greedy = false;
      ++i_;
    } else if (i_ < p_.size() && p_[i_] == '+') {
      return Fail("possessive quantifiers (*+, ++, ?+, {m,n}+) are not supported", at);
    }
    n.children.push_back(items().back());
    items().back() = Add(std::move(n));
    last_ = Last::kRepeat;
    return std::nullopt;
  }

  std::string_view p_;
  size_t i_ = 0;
  Tree tree_;
  std::vector<Frame> frames_;
  Last last_ = Last::kNothing;
};

}  // namespace

Result<Tree> ParsePattern(std::string_view pattern) { return Parser(pattern).Run(); }

}  // namespace pb::text::regex_internal

// Matching: a simulation of the NFA over the set of states it can be in (Thompson / Pike VM). Each text
// position visits each instruction at most once, so a match is O(instructions x text) and needs no
// backtracking; epsilon closures use an explicit stack, so nothing recurses per character.
//
// Boolean questions run the backward program from the end of the text: rank_pattern keys and
// target_modules regexes mostly differ in their last characters, so most threads die within a few steps.
#include <algorithm>
#include <string>

#include "text/python_regex.h"
#include "text/python_regex_internal.h"

namespace pb::text {

using regex_internal::AssertKind;
using regex_internal::Code;
using regex_internal::Inst;
using regex_internal::Op;
using regex_internal::Program;

namespace regex_internal {

uint32_t FoldCase(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c == 0x130 || c == 0x131) return 'i';
  if (c == 0x17F) return 's';
  if (c == 0x212A) return 'k';
  return c;
}

namespace {
bool IsSpace(uint32_t c) {  // str.isspace()
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}
}  // namespace

bool IsWordChar(uint32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  // Outside ASCII an approximation of str.isalnum(): Latin-1's symbols, general punctuation, white space
  // and undecodable bytes (U+DC80..U+DCFF) are not word characters; everything else is.
  if (c < 0xC0) return c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 || c == 0xBA || c >= 0xBC;
  if (c == 0xD7 || c == 0xF7) return false;
  if (c >= 0x2000 && c <= 0x206F) return false;
  if (c >= 0xDC80 && c <= 0xDCFF) return false;
  return !IsSpace(c);
}

bool InSet(SetKind kind, uint32_t c) {
  switch (kind) {
    case SetKind::kDigit: return c >= '0' && c <= '9';
    case SetKind::kNotDigit: return !(c >= '0' && c <= '9');
    case SetKind::kWord: return IsWordChar(c);
    case SetKind::kNotWord: return !IsWordChar(c);
    case SetKind::kSpace: return IsSpace(c);
    case SetKind::kNotSpace: return !IsSpace(c);
  }
  return false;
}

bool CharClass::Contains(uint32_t c) const {
  auto in = [&](uint32_t v) {
    for (const auto& [lo, hi] : ranges)
      if (v >= lo && v <= hi) return true;
    return false;
  };
  bool hit = false;
  if (icase) {
    // sre's IN_UNI_IGNORE: the folded character against the folded set (every member and its other case).
    uint32_t f = FoldCase(c);
    hit = in(f) || (f >= 'a' && f <= 'z' && in(f - 32));
  } else {
    hit = in(c);
  }
  for (SetKind s : sets) hit = hit || InSet(s, c);
  return hit != negated;
}

}  // namespace regex_internal

// ---- Text ----------------------------------------------------------------------------------------------

RegexSubject::RegexSubject(std::string_view text) : text_(text) {
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) ascii_ = false;
  if (ascii_) return;
  code_points_.reserve(text.size());
  offsets_.reserve(text.size() + 1);
  size_t i = 0;
  auto cont = [&](size_t k) { return i + k < text.size() && (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80; };
  while (i < text.size()) {
    unsigned char b = static_cast<unsigned char>(text[i]);
    uint32_t cp = 0;
    size_t len = 0;
    if (b < 0x80) {
      cp = b, len = 1;
    } else if (b >= 0xC2 && b < 0xE0 && cont(1)) {
      cp = (b & 0x1Fu) << 6 | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu), len = 2;
    } else if (b >= 0xE0 && b < 0xF0 && cont(1) && cont(2)) {
      cp = (b & 0x0Fu) << 12 | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu) << 6 |
           (static_cast<unsigned char>(text[i + 2]) & 0x3Fu);
      len = (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ? 3 : 0;
    } else if (b >= 0xF0 && b < 0xF5 && cont(1) && cont(2) && cont(3)) {
      cp = (b & 0x07u) << 18 | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu) << 12 |
           (static_cast<unsigned char>(text[i + 2]) & 0x3Fu) << 6 | (static_cast<unsigned char>(text[i + 3]) & 0x3Fu);
      len = (cp >= 0x10000 && cp <= 0x10FFFF) ? 4 : 0;
    }
    if (len == 0) cp = 0xDC00 + b, len = 1;  // Python's surrogateescape reading of a stray byte
    code_points_.push_back(cp);
    offsets_.push_back(i);
    i += len;
  }
  offsets_.push_back(text.size());
}

// ---- Work limit ---------------------------------------------------------------------------------------------

namespace {
#if defined(__EMSCRIPTEN__)
RegexWorkLimit* active_limit = nullptr;  // single-threaded, as ThreadScratch below
#else
thread_local RegexWorkLimit* active_limit = nullptr;
#endif
}  // namespace

RegexWorkLimit::RegexWorkLimit(uint64_t steps) : steps_(steps), left_(steps), outer_(active_limit) {
  active_limit = this;
}
RegexWorkLimit::~RegexWorkLimit() { active_limit = outer_; }

bool RegexWorkLimit::Spend(uint64_t n) {
  if (over_ || n > left_) {
    over_ = true;
    left_ = 0;
    return false;
  }
  left_ -= n;
  return true;
}

// ---- Simulation -------------------------------------------------------------------------------------------

namespace {


// A set of instruction indices with O(1) insert, membership and clear, iterated in insertion order (which
// is the priority order when threads are added depth-first).
class StateSet {
 public:
  void Reset(size_t n) {  // only grows, so alternating between programs costs nothing
    if (sparse_.size() < n) {
      sparse_.resize(n);
      dense_.resize(n);
    }
    size_ = 0;
  }
  bool Contains(uint32_t pc) const { return sparse_[pc] < size_ && dense_[sparse_[pc]] == pc; }
  void Insert(uint32_t pc) {
    sparse_[pc] = size_;
    dense_[size_++] = pc;
  }
  void Clear() { size_ = 0; }
  uint32_t size() const { return size_; }
  uint32_t operator[](uint32_t k) const { return dense_[k]; }

 private:
  std::vector<uint32_t> sparse_, dense_;
  uint32_t size_ = 0;
};

// Reused between calls so matching 50,000 patterns against a name allocates nothing per pattern.
struct Scratch {
  StateSet a, b;
  std::vector<uint32_t> stack;
};
Scratch& ThreadScratch() {
#if defined(__EMSCRIPTEN__)
  static Scratch s;  // the WASM build is single-threaded (and wasm-ld has no thread-local storage without atomics)
#else
  thread_local Scratch s;
#endif
  return s;
}

class Matcher {
 public:
  Matcher(const Program& p, const RegexSubject& text)
      : p_(p), t_(text), n_(text.size()), scratch_(ThreadScratch()), limit_(active_limit) {
    looks_.resize(p.looks.size());
    for (size_t k = 0; k < p.looks.size(); ++k) ComputeLookahead(k);  // inner lookaheads first
  }

  // Does the pattern match text[0, end) exactly? Runs backward from `end`.
  bool MatchesRange(size_t end) {
    const Code& code = p_.backward;
    size_t pos = end;
    for (uint32_t pc = 0; pc < code.straight; ++pc) {  // the branch-free start: one path, no state set
      const Inst& in = code.insts[pc];
      if (in.op == Op::kAssert ? !Holds(in, pos) : (pos == 0 || !Consumes(in, t_.at(pos - 1)))) return false;
      if (in.op != Op::kAssert) --pos;
    }
    Scratch& s = scratch_;
    s.a.Reset(code.insts.size());
    s.b.Reset(code.insts.size());
    StateSet* cur = &s.a;
    StateSet* next = &s.b;
    bool at_match = false;
    Close(code, code.straight, pos, *cur, &at_match);
    for (; pos > 0; --pos) {
      if (cur->size() == 0 || !Spend(cur->size())) return false;
      at_match = false;
      Step(code, *cur, t_.at(pos - 1), pos - 1, *next, &at_match);
      std::swap(cur, next);
    }
    return at_match;
  }

  // Does some prefix of the text match (re.match)? Runs forward, stops at the first match.
  bool MatchesPrefix() {
    const Code& code = p_.forward;
    Scratch& s = scratch_;
    s.a.Reset(code.insts.size());
    s.b.Reset(code.insts.size());
    StateSet* cur = &s.a;
    StateSet* next = &s.b;
    bool at_match = false;
    Close(code, 0, 0, *cur, &at_match);
    for (size_t pos = 0; !at_match && pos < n_; ++pos) {
      if (cur->size() == 0 || !Spend(cur->size())) return false;
      Step(code, *cur, t_.at(pos), pos + 1, *next, &at_match);
      std::swap(cur, next);
    }
    return at_match;
  }

  // re.match with capture slots: the Pike VM proper, threads kept in priority order.
  std::optional<std::vector<size_t>> MatchSlots() {
    const Code& code = p_.forward;
    size_t slots = 2 * (static_cast<size_t>(p_.groups) + 1);
    size_t m = code.insts.size();
    StateSet lists[2];
    std::vector<size_t> caps[2] = {std::vector<size_t>(m * slots, kUnset), std::vector<size_t>(m * slots, kUnset)};
    lists[0].Reset(m);
    lists[1].Reset(m);
    std::vector<size_t> cap(slots, kUnset);
    std::optional<std::vector<size_t>> found;
    AddThread(code, 0, 0, cap, lists[0], caps[0], slots);
    int cur = 0;
    for (size_t pos = 0;; ++pos) {
      StateSet& cl = lists[cur];
      StateSet& nl = lists[1 - cur];
      nl.Clear();
      if (cl.size() == 0) break;
      if (!Spend(cl.size())) return std::nullopt;
      for (uint32_t k = 0; k < cl.size(); ++k) {
        uint32_t pc = cl[k];
        const Inst& in = code.insts[pc];
        const size_t* tc = &caps[cur][pc * slots];
        if (in.op == Op::kMatch) {
          found.emplace(tc, tc + slots);
          (*found)[0] = 0;
          (*found)[1] = pos;
          break;  // threads after this one have lower priority than the match
        }
        if (pos < n_ && Consumes(in, t_.at(pos))) {
          cap.assign(tc, tc + slots);
          AddThread(code, pc + 1, pos + 1, cap, nl, caps[1 - cur], slots);
        }
      }
      if (pos >= n_) break;
      cur = 1 - cur;
    }
    return found;
  }

  static constexpr size_t kUnset = SIZE_MAX;

 private:
  bool Holds(const Inst& in, size_t pos) const {
    switch (in.assert) {
      case AssertKind::kBegin: return pos == 0;
      case AssertKind::kEnd: return pos == n_ || (pos + 1 == n_ && t_.at(pos) == '\n');
      case AssertKind::kWordBoundary:
      case AssertKind::kNotWordBoundary: {
        if (n_ == 0) return false;  // sre: neither \b nor \B matches in an empty string
        bool before = pos > 0 && regex_internal::IsWordChar(t_.at(pos - 1));
        bool after = pos < n_ && regex_internal::IsWordChar(t_.at(pos));
        return (before != after) == (in.assert == AssertKind::kWordBoundary);
      }
      case AssertKind::kLookahead: return looks_[in.x][pos] != 0;
      case AssertKind::kNegLookahead: return looks_[in.x][pos] == 0;
    }
    return false;
  }

  bool Consumes(const Inst& in, uint32_t c) const {
    switch (in.op) {
      case Op::kChar: return in.y ? regex_internal::FoldCase(c) == in.x : c == in.x;
      case Op::kAny: return c != '\n';
      case Op::kClass: return p_.classes[in.x].Contains(c);
      default: return false;
    }
  }

  // Adds `pc` and everything reachable from it without consuming a character, at text position `pos`.
  void Close(const Code& code, uint32_t pc, size_t pos, StateSet& set, bool* at_match) {
    auto& stack = scratch_.stack;
    stack.clear();
    stack.push_back(pc);
    while (!stack.empty()) {
      uint32_t at = stack.back();
      stack.pop_back();
      if (set.Contains(at)) continue;
      set.Insert(at);
      const Inst& in = code.insts[at];
      switch (in.op) {
        case Op::kJmp: stack.push_back(in.loop_back && set.Contains(in.x) ? in.y : in.x); break;
        case Op::kSplit:
          stack.push_back(in.y);
          stack.push_back(in.x);
          break;
        case Op::kSave: stack.push_back(at + 1); break;
        case Op::kAssert:
          if (Holds(in, pos)) stack.push_back(at + 1);
          break;
        case Op::kMatch: *at_match = true; break;
        default: break;
      }
    }
  }

  // Moves every thread of `cur` over character `c`, landing at position `pos`.
  void Step(const Code& code, const StateSet& cur, uint32_t c, size_t pos, StateSet& next, bool* at_match) {
    next.Clear();
    for (uint32_t k = 0; k < cur.size(); ++k) {
      uint32_t pc = cur[k];
      if (Consumes(code.insts[pc], c)) Close(code, pc + 1, pos, next, at_match);
    }
  }

  // For every position, whether lookahead k's body matches some text starting there: its backward
  // program run from the end with a new thread started at every position.
  void ComputeLookahead(size_t k) {
    const Code& code = p_.looks[k];
    std::vector<uint8_t>& table = looks_[k];
    table.assign(n_ + 1, 0);
    StateSet a, b;
    a.Reset(code.insts.size());
    b.Reset(code.insts.size());
    StateSet* cur = &a;
    StateSet* next = &b;
    bool at_match = false;
    for (size_t pos = n_;; --pos) {
      Close(code, 0, pos, *cur, &at_match);
      table[pos] = at_match;
      if (pos == 0 || !Spend(cur->size())) break;  // past the limit the caller discards the answer
      at_match = false;
      Step(code, *cur, t_.at(pos - 1), pos - 1, *next, &at_match);
      std::swap(cur, next);
    }
  }

  // Like Close, carrying capture slots: Save writes the position and is undone after its branch.
  void AddThread(const Code& code, uint32_t pc0, size_t pos, std::vector<size_t>& cap, StateSet& set,
                 std::vector<size_t>& set_caps, size_t slots) {
    auto& stack = cap_stack_;
    stack.assign(1, {pc0, false, 0, 0});
    while (!stack.empty()) {
      Entry e = stack.back();
      stack.pop_back();
      if (e.restore) {
        cap[e.slot] = e.value;
        continue;
      }
      if (set.Contains(e.pc)) continue;
      set.Insert(e.pc);
      const Inst& in = code.insts[e.pc];
      switch (in.op) {
        case Op::kJmp: stack.push_back({in.loop_back && set.Contains(in.x) ? in.y : in.x, false, 0, 0}); break;
        case Op::kSplit:
          stack.push_back({in.y, false, 0, 0});
          stack.push_back({in.x, false, 0, 0});
          break;
        case Op::kSave:
          stack.push_back({0, true, in.x, cap[in.x]});
          cap[in.x] = pos;
          stack.push_back({e.pc + 1, false, 0, 0});
          break;
        case Op::kAssert:
          if (Holds(in, pos)) stack.push_back({e.pc + 1, false, 0, 0});
          break;
        default: std::copy(cap.begin(), cap.end(), set_caps.begin() + static_cast<ptrdiff_t>(e.pc * slots)); break;
      }
    }
  }

  struct Entry {  // AddThread's work list: an instruction to visit, or a capture slot to restore
    uint32_t pc;
    bool restore;
    size_t slot, value;
  };

  // Thread-local lookups cost a call each in some builds: done once per match, not per step.
  bool Spend(uint64_t n) { return !limit_ || limit_->Spend(n); }

  const Program& p_;
  const RegexSubject& t_;
  size_t n_;
  Scratch& scratch_;
  RegexWorkLimit* limit_;
  std::vector<std::vector<uint8_t>> looks_;
  std::vector<Entry> cap_stack_;
};

}  // namespace

bool PythonRegex::TailFits(const RegexSubject& text, size_t end) const {
  if (end < tail_size_) return false;
  for (size_t k = 0; k < tail_size_; ++k) {
    uint32_t c = text.at(end - 1 - k);
    if (tail_[k] ? c != static_cast<unsigned char>(tail_[k]) : c == '\n') return false;
  }
  return true;
}

bool PythonRegex::FullMatch(const RegexSubject& text) const {
  if (!program_ || (active_limit && active_limit->exceeded()) || !TailFits(text, text.size())) return false;
  return Matcher(*program_, text).MatchesRange(text.size());
}

bool PythonRegex::Match(const RegexSubject& text) const {
  if (!program_ || (active_limit && active_limit->exceeded())) return false;
  if (!ends_with_dollar_) return Matcher(*program_, text).MatchesPrefix();
  // Every match ends where `$` holds: at the end, or before a final newline.
  size_t n = text.size();
  bool at_end = TailFits(text, n);
  bool before_newline = n > 0 && text.at(n - 1) == '\n' && TailFits(text, n - 1);
  if (!at_end && !before_newline) return false;
  Matcher m(*program_, text);
  return (at_end && m.MatchesRange(n)) || (before_newline && m.MatchesRange(n - 1));
}

std::optional<std::vector<std::optional<PythonRegex::Span>>> PythonRegex::MatchGroups(std::string_view text) const {
  if (!program_ || (active_limit && active_limit->exceeded())) return std::nullopt;
  RegexSubject subject(text);
  auto slots = Matcher(*program_, subject).MatchSlots();
  if (!slots) return std::nullopt;
  std::vector<std::optional<Span>> groups;
  for (size_t g = 0; 2 * g + 1 < slots->size(); ++g) {
    size_t b = (*slots)[2 * g], e = (*slots)[2 * g + 1];
    if (b == Matcher::kUnset || e == Matcher::kUnset) groups.emplace_back();
    else groups.emplace_back(Span{subject.byte_offset(b), subject.byte_offset(e)});
  }
  return groups;
}

int PythonRegex::group_count() const { return program_ ? program_->groups : 0; }

Result<PythonRegex> CompilePythonRegex(std::string_view pattern) {
  auto tree = regex_internal::ParsePattern(pattern);
  if (!tree.ok()) return MakeError(ErrorCode::InvalidConfig, "regex: " + tree.error().message);
  auto program = regex_internal::CompileTree(tree.value(), pattern);
  if (!program.ok()) return MakeError(ErrorCode::InvalidConfig, "regex: " + program.error().message);
  PythonRegex re;
  re.source_ = std::string(pattern);
  re.program_ = std::make_shared<const Program>(std::move(program.value()));
  re.ends_with_dollar_ = re.program_->ends_with_dollar;
  const auto& insts = re.program_->backward.insts;
  size_t pc = 0;
  while (pc < insts.size() && insts[pc].op == Op::kAssert && insts[pc].assert == AssertKind::kEnd) ++pc;
  for (; pc < insts.size() && re.tail_size_ < PythonRegex::kTail; ++pc) {
    const Inst& in = insts[pc];
    bool plain = in.op == Op::kChar && in.y == 0 && in.x > 0 && in.x < 0x80;
    if (!plain && in.op != Op::kAny) break;
    re.tail_[re.tail_size_++] = plain ? static_cast<char>(in.x) : '\0';
  }
  return re;
}

}  // namespace pb::text

// The pieces behind PythonRegex: the syntax tree the parser builds, the NFA program compiled from it, and
// the character tests both share. Internal to python_regex_*.cc and their tests.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pb::text::regex_internal {

constexpr size_t kMaxPatternBytes = 100000;   // longer patterns would not fit kMaxInstructions anyway
constexpr uint32_t kMaxNesting = 100;         // nested groups (the compiler's recursion is bounded by it)
constexpr uint32_t kMaxRepeat = 1000;         // m and n of {m,n}
constexpr uint32_t kMaxInstructions = 10000;  // program size after {m,n} expansion, forward or backward
constexpr uint32_t kUnbounded = UINT32_MAX;   // n of *, + and {m,}

// \d \w \s and their negations.
enum class SetKind : uint8_t { kDigit, kNotDigit, kWord, kNotWord, kSpace, kNotSpace };
bool InSet(SetKind kind, uint32_t c);
bool IsWordChar(uint32_t c);
// A-Z onto a-z, plus the four code points Python's IGNORECASE equates with an ASCII letter
// (U+0130 and U+0131 with i, U+017F with s, U+212A with k).
uint32_t FoldCase(uint32_t c);

// A bracketed class or a single escape like \d: ranges of code points and named sets, possibly negated.
struct CharClass {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  std::vector<SetKind> sets;
  bool negated = false;
  bool icase = false;
  bool Contains(uint32_t c) const;
};

enum class AssertKind : uint8_t { kBegin, kEnd, kWordBoundary, kNotWordBoundary, kLookahead, kNegLookahead };

// ---- Syntax tree -------------------------------------------------------------------------------------
enum class NodeKind : uint8_t {
  kEmpty,
  kLiteral,  // value: a code point
  kAny,      // `.`: anything but \n
  kClass,    // value: index into Tree::classes
  kAssert,   // assert; for lookahead, value: index into Tree::looks and children[0] is its body
  kConcat,   // children in order
  kAlt,      // children in priority order
  kRepeat,   // children[0] repeated min..max times
  kGroup,    // value: capture index (1-based); children[0]
};

struct Node {
  NodeKind kind = NodeKind::kEmpty;
  AssertKind assert = AssertKind::kBegin;
  bool greedy = true;
  uint32_t value = 0;
  uint32_t min = 0, max = 0;
  std::vector<uint32_t> children;
};

struct Tree {
  std::vector<Node> nodes;
  uint32_t root = 0;
  std::vector<CharClass> classes;
  std::vector<uint32_t> looks;  // node of each lookahead, inner ones before the ones that contain them
  int groups = 0;
  bool icase = false;
};

// Parses like sre_parse over the supported subset.
Result<Tree> ParsePattern(std::string_view pattern);

// ---- Program ------------------------------------------------------------------------------------------
enum class Op : uint8_t { kMatch, kChar, kAny, kClass, kSplit, kJmp, kSave, kAssert };

struct Inst {
  Op op = Op::kMatch;
  AssertKind assert = AssertKind::kBegin;
  uint32_t x = 0;  // kChar code point, kClass index, kSplit/kJmp target (preferred), kSave slot, kAssert look
  uint32_t y = 0;  // kSplit second target; kJmp closing a * loop: the loop's exit
  // A * loop's jump back to its start. Reached when the start was already entered at this text position
  // (an iteration that matched nothing), it goes to the exit instead, as sre ends a repeat whose iteration
  // was empty; this keeps Python's priorities (and group values) for empty iterations.
  bool loop_back = false;
};

struct Code {
  std::vector<Inst> insts;  // starts at 0
  // How many instructions from 0 form a straight line (characters and assertions, no branch): matched by
  // a plain loop before any state set is built. A rank_pattern key is mostly such a line, so most keys
  // are rejected after a few character comparisons.
  uint32_t straight = 0;
};

struct Program {
  Code forward;             // for MatchGroups and re.match
  Code backward;            // the pattern reversed: matched from the end of the text towards its start
  std::vector<Code> looks;  // each lookahead body, reversed (decided by a backward pass)
  std::vector<CharClass> classes;
  int groups = 0;
  bool ends_with_dollar = false;  // every match ends at a top-level trailing `$`
};

// Compiles the tree forwards, backwards and each lookahead; InvalidConfig past kMaxInstructions.
Result<Program> CompileTree(const Tree& tree, std::string_view pattern);

}  // namespace pb::text::regex_internal

// Syntax tree to Thompson NFA programs (forward with capture slots; backward for boolean matching and for
// lookahead). The recursion follows the tree, whose depth the parser bounds (kMaxNesting groups), and
// emission stops as soon as the program passes kMaxInstructions, so {m,n} copies cannot blow up memory.
#include <string>

#include "text/python_regex.h"
#include "text/python_regex_internal.h"
#include "core/utf8.h"

namespace pb::text::regex_internal {

namespace {

class Compiler {
 public:
  Compiler(const Tree& tree, bool backward, bool captures) : t_(tree), backward_(backward), captures_(captures) {}

  bool Compile(uint32_t root, Code* out) {
    code_ = out;
    Emit(root);
    Push({Op::kMatch});
    auto& insts = out->insts;
    while (out->straight < insts.size() &&
           (insts[out->straight].op == Op::kChar || insts[out->straight].op == Op::kAny ||
            insts[out->straight].op == Op::kClass || insts[out->straight].op == Op::kAssert))
      ++out->straight;
    return !too_large_;
  }

 private:
  uint32_t Here() const { return static_cast<uint32_t>(code_->insts.size()); }
  uint32_t Push(Inst i) {
    code_->insts.push_back(i);
    if (code_->insts.size() > kMaxInstructions) too_large_ = true;
    return Here() - 1;
  }

  void Emit(uint32_t id) {
    if (too_large_) return;
    const Node& n = t_.nodes[id];
    switch (n.kind) {
      case NodeKind::kEmpty: return;
      case NodeKind::kLiteral:
        Push({Op::kChar, AssertKind::kBegin, t_.icase ? FoldCase(n.value) : n.value, t_.icase ? 1u : 0u});
        return;
      case NodeKind::kAny: Push({Op::kAny}); return;
      case NodeKind::kClass: Push({Op::kClass, AssertKind::kBegin, n.value}); return;
      case NodeKind::kAssert: Push({Op::kAssert, n.assert, n.value}); return;  // lookahead body compiled apart
      case NodeKind::kConcat:
        if (backward_) {
          for (size_t k = n.children.size(); k-- > 0;) Emit(n.children[k]);
        } else {
          for (uint32_t c : n.children) Emit(c);
        }
        return;
      case NodeKind::kAlt: {
        std::vector<uint32_t> exits;
        for (size_t k = 0; k + 1 < n.children.size(); ++k) {
          uint32_t split = Push({Op::kSplit});
          code_->insts[split].x = Here();
          Emit(n.children[k]);
          exits.push_back(Push({Op::kJmp}));
          if (too_large_) return;
          code_->insts[split].y = Here();
        }
        Emit(n.children.back());
        if (too_large_) return;
        for (uint32_t e : exits) code_->insts[e].x = Here();
        return;
      }
      case NodeKind::kGroup:
        if (captures_) Push({Op::kSave, AssertKind::kBegin, 2 * n.value});
        Emit(n.children[0]);
        if (captures_) Push({Op::kSave, AssertKind::kBegin, 2 * n.value + 1});
        return;
      case NodeKind::kRepeat: EmitRepeat(n); return;
    }
  }

  // Branch to `body` (next instruction) or to an exit patched later, in the quantifier's preference order.
  void SetSplit(uint32_t split, uint32_t body, uint32_t exit, bool greedy) {
    code_->insts[split].x = greedy ? body : exit;
    code_->insts[split].y = greedy ? exit : body;
  }

  void EmitRepeat(const Node& n) {
    uint32_t child = n.children[0];
    if (n.max == kUnbounded) {
      if (n.min == 0) {  // L: split(body, out); body; jmp L; out:
        uint32_t split = Push({Op::kSplit});
        Emit(child);
        uint32_t back = Push({Op::kJmp, AssertKind::kBegin, split});
        if (too_large_) return;
        SetSplit(split, split + 1, Here(), n.greedy);
        code_->insts[back].y = Here();
        code_->insts[back].loop_back = true;
        return;
      }
      for (uint32_t k = 0; k + 1 < n.min && !too_large_; ++k) Emit(child);
      uint32_t loop = Here();  // L: body; split(L, out); out:
      Emit(child);
      uint32_t split = Push({Op::kSplit});
      if (too_large_) return;
      code_->insts[split].x = n.greedy ? loop : Here();
      code_->insts[split].y = n.greedy ? Here() : loop;
      return;
    }
    for (uint32_t k = 0; k < n.min && !too_large_; ++k) Emit(child);
    std::vector<uint32_t> splits;  // x{0,k}: split(body, out) body split(body, out) body ... out:
    for (uint32_t k = n.min; k < n.max && !too_large_; ++k) {
      splits.push_back(Push({Op::kSplit}));
      Emit(child);
    }
    if (too_large_) return;
    for (uint32_t s : splits) SetSplit(s, s + 1, Here(), n.greedy);
  }

  const Tree& t_;
  bool backward_;
  bool captures_;
  Code* code_ = nullptr;
  bool too_large_ = false;
};

bool EndsWithDollar(const Tree& t) {
  const Node* n = &t.nodes[t.root];
  if (n->kind == NodeKind::kConcat) n = &t.nodes[n->children.back()];
  return n->kind == NodeKind::kAssert && n->assert == AssertKind::kEnd;
}

}  // namespace

Result<Program> CompileTree(const Tree& tree, std::string_view pattern) {
  Program p;
  p.classes = tree.classes;
  p.groups = tree.groups;
  p.ends_with_dollar = EndsWithDollar(tree);
  bool ok = Compiler(tree, /*backward=*/false, /*captures=*/true).Compile(tree.root, &p.forward) &&
            Compiler(tree, /*backward=*/true, /*captures=*/false).Compile(tree.root, &p.backward);
  for (size_t k = 0; ok && k < tree.looks.size(); ++k) {
    p.looks.emplace_back();
    ok = Compiler(tree, /*backward=*/true, /*captures=*/false)
             .Compile(tree.nodes[tree.looks[k]].children[0], &p.looks.back());
  }
  if (!ok)
    return MakeError(ErrorCode::InvalidConfig, "pattern too large: more than " + std::to_string(kMaxInstructions) +
                                                   " NFA instructions once its {m,n} repeats are expanded, in \"" +
                                                   ClipForMessage(pattern) + "\"");
  return p;
}

}  // namespace pb::text::regex_internal

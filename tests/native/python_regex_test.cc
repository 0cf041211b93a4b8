// The Python-regex engine (src/text/python_regex*): Python `re` answers, refusals that name the
// construct, and linear time on patterns that make a backtracking engine explode.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "text/python_regex.h"
#include "core/utf8.h"

namespace pb::testing {
namespace {

using text::CompilePythonRegex;
using text::PythonRegex;

bool FullMatch(const std::string& pattern, const std::string& text) {
  auto re = CompilePythonRegex(pattern);
  EXPECT_TRUE(re.ok()) << pattern << ": " << re.error().message;
  return re.ok() && re->FullMatch(text);
}

TEST(PythonRegex, CommonConstructsBehaveAsInPython) {
  EXPECT_TRUE(FullMatch(R"(.*\.(q_proj|v_proj))", "model.layers.0.self_attn.q_proj"));
  EXPECT_FALSE(FullMatch(R"(.*\.(q_proj|v_proj))", "model.layers.0.self_attn.q_proj_x"));
  EXPECT_TRUE(FullMatch("a|ab", "ab"));  // fullmatch backtracks into the second alternative
  EXPECT_TRUE(FullMatch(R"(model\.layers\.\d{1,2}\.mlp\.(?:up|down)_proj)", "model.layers.12.mlp.down_proj"));
  EXPECT_TRUE(FullMatch(R"(.*?\.[^.]*_proj)", "a.b.q_proj"));
  EXPECT_TRUE(FullMatch("(?i).*Q_PROJ", "layers.0.q_proj"));
  EXPECT_FALSE(FullMatch(".*Q_PROJ", "layers.0.q_proj"));
  // Python-only readings of brackets and braces.
  EXPECT_TRUE(FullMatch("[]a]+", "]a]"));       // a leading ] is a literal
  EXPECT_TRUE(FullMatch("[[:alpha:]]", ":]"));  // no POSIX classes in Python: a set, then "]"
  EXPECT_TRUE(FullMatch("x{,2}y", "xxy"));      // {,n} is {0,n}
  EXPECT_TRUE(FullMatch("a{", "a{"));           // not a repeat: a literal brace
  EXPECT_TRUE(FullMatch("a{}", "a{}"));
  EXPECT_TRUE(FullMatch(R"([\w.-]+)", "a.b-c_d"));
  auto m = CompilePythonRegex("q_proj");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->Match("q_proj_extra"));  // re.match: anchored at the start only
  EXPECT_FALSE(m->FullMatch("q_proj_extra"));
  EXPECT_FALSE(m->Match("x.q_proj"));
  EXPECT_EQ(m->source(), "q_proj");
}

TEST(PythonRegex, PythonOnlyAndMalformedPatternsAreRejected) {
  struct Case {
    const char* pattern;
    const char* names;  // part of the message
  };
  for (const Case& c : std::vector<Case>{
           {"(?P<name>q)_proj", "named groups (?P<name>...)"},
           {"(?P<n>q)(?P=n)", "named groups"},
           {"(a)(?P=x)", "named backreferences (?P=name)"},
           {"(?<=attn\\.)q_proj", "lookbehind"},
           {"(?<!mlp\\.)q_proj", "lookbehind"},
           {"(?#comment)q", "comments (?#...)"},
           {"\\Aq_proj", "\\A"},
           {"q_proj\\Z", "\\Z"},
           {"q_proj\\z", "\\z"},
           {"a*+", "possessive"},
           {"a++", "possessive"},
           {"a?+", "possessive"},
           {"a{1,2}+", "possessive"},
           {"(?s).*", "inline flags"},
           {"q(?i)", "inline flags"},
           {"(?i:q)", "inline flags"},
           {"(a)?(?(1)b|c)", "conditional groups"},
           {"(?>a)", "atomic groups"},
           {"(a)\\1", "backreferences"},
           {"(q", "missing ), unterminated subpattern"},
           {"q)", "unbalanced parenthesis"},
           {"[q", "unterminated character set"},
           {"[]", "unterminated character set"},
           {"q\\", "bad escape (end of pattern)"},
           {"\\q", "bad escape \\q"},
           {"*q", "nothing to repeat"},
           {"^*", "nothing to repeat"},
           {"a**", "multiple repeat"},
           {"a{2}{3}", "multiple repeat"},
           {"a{3,2}", "min repeat greater than max repeat"},
           {"[z-a]", "bad character range"},
           {"[\\d-z]", "bad character range"},
           {"\\x4", "incomplete escape"},
           {"caf\xC3\xA9", "non-ASCII"},
           {"a{1001}", "repeat counts above 1000"},
           {"((a{1000}){1000})", "too large"},
       }) {
    auto re = CompilePythonRegex(c.pattern);
    ASSERT_FALSE(re.ok()) << c.pattern;
    EXPECT_EQ(re.error().code, ErrorCode::InvalidConfig);
    EXPECT_NE(re.error().message.find(c.names), std::string::npos) << c.pattern << ": " << re.error().message;
  }
}

PythonRegex Compiled(const std::string& pattern) {
  auto re = CompilePythonRegex(pattern);
  EXPECT_TRUE(re.ok()) << pattern << ": " << re.error().message;
  return re.ok() ? re.value() : PythonRegex{};
}

std::string Groups(const std::string& pattern, const std::string& text) {
  auto m = Compiled(pattern).MatchGroups(text);
  if (!m) return "none";
  std::string out;
  for (const auto& g : *m) out += g ? "[" + text.substr(g->first, g->second - g->first) + "]" : "unset";
  return out;
}

double Seconds(const std::chrono::steady_clock::time_point& since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

TEST(PythonRegex, GroupsFollowBacktrackingPriority) {
  EXPECT_EQ(Groups("(a|ab)(c|bcd)(d*)", "abcd"), "[abcd][a][bcd][]");  // the first alternative that works
  EXPECT_EQ(Groups("(a+?)(a*)", "aaa"), "[aaa][a][aa]");               // lazy takes the least
  EXPECT_EQ(Groups("(a+)(a*)", "aaa"), "[aaa][aaa][]");
  EXPECT_EQ(Groups("(a)|b", "b"), "[b]unset");
  EXPECT_EQ(Groups("(x)?y", "y"), "[y]unset");
  EXPECT_EQ(Groups(R"(.*?\.[^.]*\.(\d+)\.)", "model.layers.1.experts.0.w1"), "[model.layers.1.][1]");
  EXPECT_EQ(Groups(R"(.*\.[^.]*\.(\d+)\.)", "model.layers.1.experts.0.w1"), "[model.layers.1.experts.0.][0]");
  EXPECT_EQ(Groups("q", "x"), "none");
}

TEST(PythonRegex, AnchorsAndBoundariesAsInPython) {
  EXPECT_TRUE(Compiled("a$").Match("a\n"));  // $ also matches before a final newline
  EXPECT_FALSE(Compiled("a$").FullMatch("a\n"));
  EXPECT_TRUE(Compiled("a$\n").FullMatch("a\n"));
  EXPECT_FALSE(Compiled("a$").Match("a\n\n"));
  EXPECT_FALSE(Compiled(R"(\B)").FullMatch(""));  // sre: \B never matches in an empty string
  EXPECT_FALSE(Compiled(R"(\b)").FullMatch(""));
  EXPECT_TRUE(Compiled(R"(\Bb)").Match("ab") == false);
  EXPECT_TRUE(Compiled(R"(a\Bb)").FullMatch("ab"));
  EXPECT_TRUE(Compiled(R"(.*\bproj)").FullMatch("q.proj"));
  EXPECT_FALSE(Compiled(R"(.*\bproj)").FullMatch("q_proj"));
  EXPECT_TRUE(Compiled(R"(\s)").FullMatch("\x1c"));  // str.isspace() includes the ASCII separators
}

TEST(PythonRegex, TextIsMatchedByCodePoint) {
  EXPECT_TRUE(Compiled("a.b").FullMatch("a\xC3\xA9"
                                        "b"));  // é is one character, as in a Python str
  EXPECT_TRUE(Compiled("a[^x]b").FullMatch("a\xE4\xB8\xAD"
                                           "b"));
  EXPECT_TRUE(Compiled(R"(\w+)").FullMatch("caf\xC3\xA9"));
  EXPECT_TRUE(Compiled("(?i)k").FullMatch("\xE2\x84\xAA"));  // KELVIN SIGN folds onto k, as in sre
  EXPECT_TRUE(Compiled("(?i)s").FullMatch("\xC5\xBF"));      // LATIN SMALL LETTER LONG S
  EXPECT_FALSE(Compiled("k").FullMatch("\xE2\x84\xAA"));
  EXPECT_TRUE(Compiled("a.b").FullMatch("a\xFF"
                                        "b"));  // an undecodable byte is one character
  auto groups = Compiled("(.)(b)").MatchGroups("\xC3\xA9"
                                               "b");
  ASSERT_TRUE(groups.has_value());
  EXPECT_EQ((*groups)[1], PythonRegex::Span(0, 2));  // spans are byte offsets
  EXPECT_EQ((*groups)[2], PythonRegex::Span(2, 3));
}

TEST(PythonRegex, LookaheadWithoutBacktracking) {
  PythonRegex no_vision = Compiled(R"((?!.*vision).*\.(q_proj|v_proj))");
  EXPECT_TRUE(no_vision.FullMatch("model.layers.0.self_attn.q_proj"));
  EXPECT_FALSE(no_vision.FullMatch("model.vision_tower.layers.0.q_proj"));
  PythonRegex ahead = Compiled(R"(.*(?=\.\d+\.mlp)\.\d+\.mlp\..*)");
  EXPECT_TRUE(ahead.FullMatch("layers.3.mlp.up"));
  EXPECT_FALSE(ahead.FullMatch("layers.3.attn.up"));
  EXPECT_TRUE(Compiled("(?=a(?!b))a.").FullMatch("ac"));  // nested lookahead
  EXPECT_FALSE(Compiled("(?=a(?!b))a.").FullMatch("ab"));
}

TEST(PythonRegex, BacktrackingConstructsAreRefusedByName) {
  for (const auto& [pattern, named] : std::vector<std::pair<std::string, std::string>>{
           {R"((a)\1)", "backreferences"},
           {"(?P<n>a)(?P=n)", "named groups"},
           {"(a)(?P=x)", "named backreferences"},
           {"(?<=a)b", "lookbehind"},
           {"(?<!a)b", "lookbehind"},
           {"(?>a+)b", "atomic groups"},
           {"(a)?(?(1)b|c)", "conditional groups"},
       }) {
    auto re = CompilePythonRegex(pattern);
    ASSERT_FALSE(re.ok()) << pattern;
    EXPECT_EQ(re.error().code, ErrorCode::InvalidConfig);
    EXPECT_NE(re.error().message.find(named), std::string::npos) << pattern << ": " << re.error().message;
  }
}

TEST(PythonRegex, CatastrophicPatternsTakeLinearTime) {
  auto start = std::chrono::steady_clock::now();
  PythonRegex nested = Compiled("(a+)+$");
  std::string short_name(28, 'a');
  short_name += '!';
  EXPECT_FALSE(nested.FullMatch(short_name));
  EXPECT_FALSE(nested.Match(short_name));
  std::string long_name(10000, 'a');
  EXPECT_TRUE(nested.FullMatch(long_name));
  EXPECT_FALSE(nested.Match(long_name + "!"));
  EXPECT_FALSE(Compiled("(a|a|aa)*b").FullMatch(long_name));
  EXPECT_FALSE(Compiled("(.*)*x(?=.*y)").Match(long_name));
  EXPECT_LT(Seconds(start), 1.0);
}

TEST(PythonRegex, LongTextsNeedNoStack) {
  std::string name;
  for (int i = 0; name.size() < 1000000; ++i) name += "layer" + std::to_string(i) + ".";
  name += "q_proj";
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(Compiled(R"(.*\.q_proj)").FullMatch(name));
  EXPECT_TRUE(Compiled(R"((.*\.)?(q_proj)$)").Match(name));
  EXPECT_TRUE(Compiled(R"((^|.*\.)layer7($|\..*))").Match(name));
  EXPECT_FALSE(Compiled(R"((^|.*\.)nowhere($|\..*))").Match(name));
  EXPECT_TRUE(Compiled(R"(((\w+)\.)+q_proj)").FullMatch(name));
  auto groups = Compiled(R"((.*)\.(\w+))").MatchGroups(name);
  ASSERT_TRUE(groups.has_value());
  EXPECT_EQ((*groups)[2], PythonRegex::Span(name.size() - 6, name.size()));
  EXPECT_LT(Seconds(start), 10.0);
}

TEST(PythonRegex, LimitsAreInvalidConfigWithTheReason) {
  EXPECT_TRUE(CompilePythonRegex(std::string(100001, 'a')).error().message.find("longer than") != std::string::npos);
  std::string deep = std::string(100, '(') + "a" + std::string(100, ')');
  EXPECT_TRUE(Compiled(deep).FullMatch("a"));
  auto deeper = CompilePythonRegex(std::string(101, '(') + "a" + std::string(101, ')'));
  ASSERT_FALSE(deeper.ok());
  EXPECT_NE(deeper.error().message.find("more than 100 nested groups"), std::string::npos) << deeper.error().message;
  auto huge = CompilePythonRegex("(a{1000}){11}");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("more than 10000 NFA instructions"), std::string::npos);
  EXPECT_TRUE(Compiled("a{1000}").FullMatch(std::string(1000, 'a')));
}

TEST(PythonRegex, MessagesEchoAtMost200BytesOfThePattern) {
  std::string big = "(" + std::string(10 * 1000 * 1000, 'a');  // 10 MB, unterminated
  auto re = CompilePythonRegex(big);
  ASSERT_FALSE(re.ok());
  EXPECT_LT(re.error().message.size(), 400u);
  EXPECT_NE(re.error().message.find("longer than 100000 bytes"), std::string::npos);
  auto unterminated = CompilePythonRegex("(" + std::string(50000, 'a'));
  ASSERT_FALSE(unterminated.ok());
  EXPECT_LT(unterminated.error().message.size(), 400u);
  EXPECT_NE(unterminated.error().message.find("missing ), unterminated subpattern"), std::string::npos);
  EXPECT_NE(re.error().message.find("\u2026 (10000001 bytes)"), std::string::npos) << re.error().message;
  EXPECT_EQ(ClipForMessage("short"), "short");
  std::string accents;
  for (int i = 0; i < 150; ++i) accents += "\xC3\xA9";  // 300 bytes of 2-byte characters
  std::string echoed = ClipForMessage(accents);
  EXPECT_EQ(echoed.substr(0, 200), accents.substr(0, 200));  // cut between characters
  EXPECT_EQ(echoed.substr(200), "\u2026 (300 bytes)");
}

}  // namespace
}  // namespace pb::testing

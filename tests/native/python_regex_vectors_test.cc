// Replays what Python 3.11's `re` answered for random patterns and names (tests/python/regex_compare.py):
// accept/reject, re.fullmatch, re.match and the group spans of re.match. The committed file is a small
// sample; PB_REGEX_VECTORS=/path replays another (the 80,000-pattern run) and prints the mismatch count.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "text/python_regex.h"

namespace pb::testing {
namespace {

using text::CompilePythonRegex;
using text::PythonRegex;

std::string Unhex(const std::string& hex) {
  std::string out;
  if (hex == "-") return out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::string Spans(const std::optional<std::vector<std::optional<PythonRegex::Span>>>& groups) {
  if (!groups) return "-";
  std::string out;
  for (const auto& g : *groups) {
    if (!out.empty()) out += ',';
    out += g ? std::to_string(g->first) + ":" + std::to_string(g->second) : "x";
  }
  return out;
}

std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F) out += static_cast<char>(c);
    else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

TEST(PythonRegexVectors, SameAnswersAsPythonRe) {
  const char* env = std::getenv("PB_REGEX_VECTORS");
  std::string path = env ? env : std::string(PB_SOURCE_DIR) + "/tests/native/data/python_regex_vectors.txt";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  size_t patterns = 0, names = 0, refused = 0, too_large = 0, mismatches = 0;
  std::optional<PythonRegex> re;
  std::string pattern;
  bool compare_groups = true;
  auto mismatch = [&](const std::string& what) {
    if (++mismatches <= 30) ADD_FAILURE() << what;
  };
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string kind, hex, a, b, c;
    f >> kind >> hex >> a >> b >> c;
    if (kind == "P") {
      ++patterns;
      pattern = Unhex(hex);
      bool unsupported = b.find('U') != std::string::npos;
      compare_groups = b.find('G') == std::string::npos;
      auto compiled = CompilePythonRegex(pattern);
      re.reset();
      if (compiled.ok()) {
        re = compiled.value();
        if (a == "err") mismatch("accepted but Python rejects: " + Printable(pattern));
      } else if (a == "ok") {
        if (unsupported) ++refused;  // a construct refused on purpose (the unit tests check the messages)
        else if (compiled.error().message.find("too large") != std::string::npos) ++too_large;  // our size limit
        else mismatch("rejected but Python accepts: " + Printable(pattern) + ": " + compiled.error().message);
      }
      continue;
    }
    if (kind != "N" || !re) continue;
    ++names;
    std::string name = Unhex(hex);
    std::string where = " for " + Printable(pattern) + " on \"" + Printable(name) + "\"";
    if (re->FullMatch(name) != (a == "1")) mismatch("fullmatch differs (Python " + a + ")" + where);
    if (re->Match(name) != (b == "1")) mismatch("match differs (Python " + b + ")" + where);
    std::string spans = Spans(re->MatchGroups(name));
    if (compare_groups ? spans != c : (spans == "-") != (c == "-"))
      mismatch("groups " + spans + " but Python " + c + where);
  }
  std::printf("python_regex vectors: %zu patterns, %zu names, %zu refused on purpose, %zu over the size limit, "
              "%zu mismatches\n",
              patterns, names, refused, too_large, mismatches);
  EXPECT_GT(patterns, 0u);
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace pb::testing

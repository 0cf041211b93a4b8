// Our reader against the Rust safetensors crate's verdicts (tests/rust_oracle/README.md): thousands of
// malformed and edge-case files, each judged by the crate when the vectors were generated and recorded in
// tests/native/data/rust_oracle_vectors.txt, so no cargo is needed here. Every vector runs through the
// whole-file parser and the push parser (byte by byte or in chunks, and told the size up front); each must
// give the crate's verdict, or the one the file lists as a deliberate difference (docs/format.md), and for
// accepted files the same tensors and metadata as the crate parsed.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/header.h"
#include "test_util.h"

namespace pb::testing {
namespace {

const char* const kVectorsFile = PB_SOURCE_DIR "/tests/native/data/rust_oracle_vectors.txt";
// The deliberate differences docs/format.md documents; any other reason in the file is an error.
const std::set<std::string> kDocumentedReasons = {"repeated-key", "serde-form", "repeated-key+serde-form"};

struct OracleVector {
  std::string id, crate, digest, ours, reason, check, label;
  Bytes bytes;
};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

uint64_t ParseU64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  EXPECT_TRUE(ec == std::errc() && p == s.data() + s.size()) << "bad number " << s;
  return v;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  ADD_FAILURE() << "bad hex digit " << c;
  return 0;
}

// The encoding of tests/rust_oracle/src/main.rs: `@N` is a u64 LE; other tokens are percent-encoded bytes,
// optionally `*count` repeated.
Bytes Decode(const std::string& encoding) {
  Bytes out;
  for (const std::string& token : Split(encoding, ' ')) {
    if (token.empty()) continue;
    if (token[0] == '@') {
      uint64_t n = ParseU64(std::string_view(token).substr(1));
      for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
      continue;
    }
    std::string_view text = token;
    uint64_t count = 1;
    if (size_t star = text.rfind('*'); star != std::string_view::npos) {
      count = ParseU64(text.substr(star + 1));
      text = text.substr(0, star);
    }
    Bytes piece;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '%') {
        piece.push_back(static_cast<uint8_t>(HexDigit(text[i + 1]) << 4 | HexDigit(text[i + 2])));
        i += 2;
      } else {
        piece.push_back(static_cast<uint8_t>(text[i]));
      }
    }
    if (piece.size() == 1) {  // the 100 MB runs of spaces
      out.insert(out.end(), count, piece[0]);
      continue;
    }
    out.reserve(out.size() + piece.size() * count);
    for (uint64_t k = 0; k < count; ++k) out.insert(out.end(), piece.begin(), piece.end());
  }
  return out;
}

uint32_t Crc32(const Bytes& bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = ~0u;
  for (uint8_t b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return ~c;
}

std::vector<OracleVector> LoadVectors() {
  std::ifstream in(kVectorsFile, std::ios::binary);
  EXPECT_TRUE(in) << "missing " << kVectorsFile;
  std::vector<OracleVector> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> c = Split(line, '\t');
    if (c.size() != 8) {
      ADD_FAILURE() << "vector line with " << c.size() << " columns: " << line.substr(0, 80);
      continue;
    }
    OracleVector v{c[0], c[1], c[2], c[3], c[4], c[5], c[6], Decode(c[7])};
    char check[32];
    std::snprintf(check, sizeof check, "%zu:%08x", v.bytes.size(), Crc32(v.bytes));
    EXPECT_EQ(v.check, check) << v.id << ": the encoding does not decode to the generator's bytes";
    out.push_back(std::move(v));
  }
  return out;
}

const std::vector<OracleVector>& Vectors() {
  static const std::vector<OracleVector> vectors = LoadVectors();
  return vectors;
}

std::string VerdictOf(const std::optional<ErrorCode>& code) { return code ? std::string(ErrorCodeName(*code)) : "ok"; }

// The crate's digest (tests/rust_oracle/src/main.rs `digest`), rebuilt from our header.
std::string Digest(const Header& h) {
  std::vector<TensorInfo> tensors;
  for (size_t i = 0; i < h.tensor_count(); ++i) tensors.push_back(h.tensor(i));
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  std::string text;
  for (const TensorInfo& t : tensors) {
    text += t.name;
    text += '\0';
    text += DtypeName(t.dtype);
    text += '\0';
    for (size_t k = 0; k < t.shape.size(); ++k) text += (k ? "," : "") + std::to_string(t.shape[k]);
    text += '\0';
    text += std::to_string(t.begin) + "," + std::to_string(t.end) + "\n";
  }
  if (h.has_metadata()) {
    text += '\x01';
    Metadata m = h.metadata();
    std::sort(m.begin(), m.end());
    for (const auto& [k, v] : m) text += k + '\0' + v + '\n';
  }
  uint64_t x = 0xcbf29ce484222325ull;
  for (unsigned char b : text) x = (x ^ b) * 0x100000001b3ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(x));
  return out;
}

// The verdicts our reader may give: the crate's (one of them, where its order among tensors with equal
// offsets is random), or the documented deliberate difference.
std::set<std::string> Allowed(const OracleVector& v) {
  if (v.ours != "=") return {v.ours};
  std::vector<std::string> crate = Split(v.crate, '|');
  return {crate.begin(), crate.end()};
}

std::string Describe(const OracleVector& v) { return v.id + " (" + v.label + ")"; }

TEST(RustOracleVectors, TheFileIsCompleteAndItsDifferencesDocumented) {
  const auto& vectors = Vectors();
  EXPECT_GE(vectors.size(), 5000u) << "the generator makes thousands; did the file get cut?";
  std::set<std::string> ids;
  size_t differences = 0;
  for (const OracleVector& v : vectors) {
    EXPECT_TRUE(ids.insert(v.id).second) << "repeated id " << v.id;
    for (const std::string& crate : Split(v.crate, '|'))
      EXPECT_TRUE(crate == "ok" || ErrorCodeFromName(crate).has_value()) << v.id << ": unknown verdict " << crate;
    if (v.ours == "=") {
      EXPECT_EQ(v.reason, "-") << v.id;
    } else {
      ++differences;
      EXPECT_TRUE(kDocumentedReasons.count(v.reason)) << v.id << ": undocumented difference '" << v.reason << "'";
      EXPECT_TRUE(ErrorCodeFromName(v.ours).has_value()) << v.id;
    }
  }
  EXPECT_LT(differences, vectors.size() / 20) << "deliberate differences should be the exception";
}

TEST(RustOracleVectors, WholeFileParseAgreesWithTheCrate) {
  int mismatches = 0;
  int digests = 0;
  for (const OracleVector& v : Vectors()) {
    auto r = ParseWholeFile(v.bytes);
    std::string ours = r.ok() ? "ok" : std::string(ErrorCodeName(r.error().code));
    if (!Allowed(v).count(ours)) {
      if (++mismatches <= 40)
        ADD_FAILURE() << Describe(v) << ": crate " << v.crate << ", expected " << v.ours << ", ours " << ours
                      << (r.ok() ? "" : ": " + r.error().message);
      continue;
    }
    if (r.ok() && v.digest != "-") {
      ++digests;
      EXPECT_EQ(Digest(r.value()), v.digest) << Describe(v) << ": accepted, but not the tensors the crate read";
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(digests, 500) << "accepted headers compared with the crate's parse";
}

TEST(RustOracleVectors, PushParserAgreesWithTheCrateInAnyChunking) {
  std::mt19937_64 rng(11);
  int mismatches = 0;
  for (const OracleVector& v : Vectors()) {
    const std::set<std::string> allowed = Allowed(v);
    const size_t size = v.bytes.size();
    // Byte by byte for small files, random chunks of up to 64 bytes for larger ones, one chunk for the
    // 100 MB headers (whose lines say nothing a smaller chunking would not).
    std::vector<size_t> cuts;
    if (size < 2048) {
      for (size_t i = 1; i < size; ++i) cuts.push_back(i);
    } else if (size < (1u << 20)) {
      for (size_t i = 1 + rng() % 64; i < size; i += 1 + rng() % 64) cuts.push_back(i);
    }
    struct Run {
      const char* how;
      FeedOutcome outcome;
    };
    Run runs[] = {{"chunked", FeedSplit(v.bytes, cuts)},
                  {"with total size", FeedSplit(v.bytes, {}, ReaderOptions{size})}};
    for (const Run& run : runs) {
      std::string ours = VerdictOf(run.outcome.error);
      if (!allowed.count(ours) && ++mismatches <= 40)
        ADD_FAILURE() << Describe(v) << " " << run.how << ": crate " << v.crate << ", expected " << v.ours << ", ours "
                      << ours;
      if (ours == "ok") EXPECT_EQ(run.outcome.log.header_events, 1) << Describe(v);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace pb::testing

// Shared helpers for the C++ test suites: building files, locating fixtures, recording reader events.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/reader.h"
#include "core/writer.h"

// Instead of GTEST_SKIP() where a fixture is missing: skips, or fails under PB_REQUIRE_FIXTURES=1. Takes a
// message with <<, as GTEST_SKIP() does.
#define PB_SKIP_WITHOUT_FIXTURE()                                                                            \
  return GTEST_MESSAGE_(                                                                                     \
      ::pb::testing::FixturesRequired() ? "fixture missing under PB_REQUIRE_FIXTURES=1" : "fixture missing", \
      ::pb::testing::FixturesRequired() ? ::testing::TestPartResult::kFatalFailure : ::testing::TestPartResult::kSkip)

namespace pb::testing {

using Bytes = std::vector<uint8_t>;

// 8-byte little-endian N, then `json` (exactly, no padding added), then `data`.
inline Bytes MakeFile(const std::string& json, const Bytes& data = {}, std::optional<uint64_t> n = std::nullopt) {
  uint64_t len = n.value_or(json.size());
  Bytes out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(len >> (8 * i)));
  out.insert(out.end(), json.begin(), json.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// The third-party fixtures: vendored in tests/fixtures (PROVENANCE.md there), else tests/fixtures beside
// the repository, if present; PB_FIXTURES=dir names another (as for scripts/fuzz.sh).
inline std::optional<std::filesystem::path> FixturesDir() {
  const std::filesystem::path source(PB_SOURCE_DIR);
  std::vector<std::filesystem::path> candidates{source / "tests" / "fixtures",
                                                source.parent_path() / "shared" / "fixtures"};
  if (const char* named = std::getenv("PB_FIXTURES")) candidates = {named};
  for (const auto& p : candidates)
    if (std::filesystem::is_directory(p)) return p;
  return std::nullopt;
}

// PB_REQUIRE_FIXTURES=1 (set by .ci/run): a test that would skip for want of a fixture fails instead.
inline bool FixturesRequired() {
  const char* v = std::getenv("PB_REQUIRE_FIXTURES");
  return v != nullptr && std::string_view(v) == "1";
}

inline Bytes ReadAll(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline std::vector<std::filesystem::path> FixtureFiles(const std::string& extension = ".safetensors") {
  std::vector<std::filesystem::path> files;
  if (auto dir = FixturesDir()) {
    for (auto& e : std::filesystem::recursive_directory_iterator(*dir))
      if (e.is_regular_file() && e.path().extension() == extension) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// A sink that keeps everything written to it.
class VectorSink : public ByteSink {
 public:
  Status Write(std::span<const uint8_t> b) override {
    bytes.insert(bytes.end(), b.begin(), b.end());
    ++writes;
    return Status::Ok();
  }
  Bytes bytes;
  int writes = 0;
};

// Records everything a reader reports; data spans are merged per tensor so that two feeds with
// different chunk splits can be compared (the spans must also arrive in file order, checked here).
class EventLog : public ReaderEvents {
 public:
  Status OnHeader(const Header& h) override {
    ++header_events;
    tensors.clear();
    for (size_t i = 0; i < h.tensor_count(); ++i) {
      TensorInfo t = h.tensor(i);
      std::string line = std::string(t.name) + "|" + std::string(DtypeName(t.dtype)) + "|";
      for (uint64_t d : t.shape) line += std::to_string(d) + ",";
      line += "|" + std::to_string(t.begin) + "-" + std::to_string(t.end);
      tensors.push_back(line);
    }
    data.assign(h.tensor_count(), Bytes());
    return Status::Ok();
  }
  Status OnTensorData(size_t tensor, uint64_t offset, std::span<const uint8_t> bytes) override {
    if (bytes.empty()) in_order = false;                  // empty spans are never reported
    if (tensor < last_tensor) in_order = false;           // file order
    if (offset != data[tensor].size()) in_order = false;  // contiguous within a tensor
    last_tensor = tensor;
    data[tensor].insert(data[tensor].end(), bytes.begin(), bytes.end());
    return Status::Ok();
  }
  int header_events = 0;
  std::vector<std::string> tensors;
  std::vector<Bytes> data;
  size_t last_tensor = 0;
  bool in_order = true;
};

struct FeedOutcome {
  std::optional<ErrorCode> error;
  EventLog log;
};

// Feeds `file` cut at the given positions (sorted, within the file), then finishes.
inline FeedOutcome FeedSplit(const Bytes& file, const std::vector<size_t>& cuts, ReaderOptions options = {}) {
  FeedOutcome out;
  StreamingReader reader(options);
  size_t prev = 0;
  auto feed = [&](size_t end) -> bool {
    Status s = reader.Feed(std::span<const uint8_t>(file.data() + prev, end - prev), out.log);
    prev = end;
    if (!s.ok()) {
      out.error = s.error().code;
      return false;
    }
    return true;
  };
  for (size_t c : cuts)
    if (!feed(c)) return out;
  if (!feed(file.size())) return out;
  Status s = reader.Finish(out.log);
  if (!s.ok()) out.error = s.error().code;
  return out;
}

}  // namespace pb::testing

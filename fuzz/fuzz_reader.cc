// libFuzzer target for the push parser (StreamingReader) that also fuzzes how the input is split.
//
// Input layout: bytes 0..3 = split seed (little-endian), the rest = the file. (Inputs shorter than 4
// bytes are a file with seed 0.) For each of two reader configurations (total_size unknown / known):
//   1. the whole file in one Feed, then Finish;
//   2. the file in pseudo-random chunks drawn from the seed (empty chunks, 1-3 bytes, up to 4 KiB);
//   3. for files up to 4 KiB, one byte at a time;
// and each run must produce the same events: the header (rendered canonically), every tensor's bytes
// (checked against the file itself: spans in order, contiguous, within the tensor, non-empty), and the
// same final status (code, message, tensor, offset). Errors must be sticky: feeding on after a failure
// returns the same error and reports nothing more. Finally ParseWholeFile's verdict must have the same
// error code as both configurations, and the same header when it succeeds. Any mismatch abort()s.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/header.h"
#include "core/reader.h"

namespace {

using pb::Error;
using pb::Header;
using pb::Status;

[[noreturn]] void Mismatch(const char* what, const std::string& a, const std::string& b) {
  std::fprintf(stderr, "fuzz_reader mismatch: %s\n  A: %s\n  B: %s\n", what, a.c_str(), b.c_str());
  std::abort();
}
void Check(bool ok, const char* what) {
  if (!ok) Mismatch(what, "", "");
}

std::string RenderHeader(const Header& h) {
  std::string s = "N=" + std::to_string(h.header_size()) + " data=" + std::to_string(h.data_size()) +
                  " meta=" + (h.has_metadata() ? "1" : "0") + "{";
  for (const auto& [k, v] : h.metadata())
    s += std::to_string(k.size()) + ":" + k + "=" + std::to_string(v.size()) + ":" + v + ";";
  s += "}";
  for (size_t i = 0; i < h.tensor_count(); ++i) {
    pb::TensorInfo t = h.tensor(i);
    s += "\n" + std::to_string(t.name.size()) + ":" + std::string(t.name) + " " + std::string(pb::DtypeName(t.dtype)) +
         " [";
    for (uint64_t d : t.shape) s += std::to_string(d) + ",";
    s += "] " + std::to_string(t.begin) + "-" + std::to_string(t.end);
    // Find must return the tensor's own index (names are unique after validation).
    auto found = h.Find(t.name);
    if (!found || *found != i) Mismatch("Header::Find", std::string(t.name), found ? std::to_string(*found) : "none");
  }
  return s;
}

std::string RenderStatus(const Status& s) {
  if (s.ok()) return "ok";
  const Error& e = s.error();
  return std::string(pb::ErrorCodeName(e.code)) + " | " + e.message + " | tensor=" + (e.tensor ? *e.tensor : "-") +
         " | offset=" + (e.offset ? std::to_string(*e.offset) : "-");
}

bool SameStatus(const Status& a, const Status& b) {
  if (a.ok() || b.ok()) return a.ok() == b.ok();
  const Error &x = a.error(), &y = b.error();
  return x.code == y.code && x.message == y.message && x.tensor == y.tensor && x.offset == y.offset;
}

// Records the events and checks each span against the file.
class Recorder : public pb::ReaderEvents {
 public:
  explicit Recorder(std::span<const uint8_t> file) : file_(file) {}

  Status OnHeader(const Header& h) override {
    Check(!header_, "second header event");
    Check(received_.empty(), "data before the header");
    header_ = &h;
    rendered_ = RenderHeader(h);
    received_.assign(h.tensor_count(), 0);
    return Status::Ok();
  }

  Status OnTensorData(size_t tensor, uint64_t offset, std::span<const uint8_t> bytes) override {
    Check(header_ != nullptr, "data without a header");
    Check(tensor < header_->tensor_count(), "tensor index out of range");
    Check(tensor >= last_tensor_, "tensors out of data order");
    Check(!bytes.empty(), "empty span");
    last_tensor_ = tensor;
    pb::TensorInfo t = header_->tensor(tensor);
    Check(offset == received_[tensor], "span not contiguous with the tensor's previous bytes");
    Check(offset + bytes.size() <= t.byte_length(), "span crosses the end of its tensor");
    // Every earlier tensor must be complete.
    for (size_t k = complete_upto_; k < tensor; ++k)
      Check(received_[k] == header_->tensor(k).byte_length(), "a tensor was skipped");
    complete_upto_ = tensor;
    const uint64_t at = header_->data_start() + t.begin + offset;
    Check(at + bytes.size() <= file_.size(), "span beyond the file");
    Check(std::memcmp(file_.data() + at, bytes.data(), bytes.size()) == 0, "span bytes differ from the file");
    received_[tensor] += bytes.size();
    ++events_;
    return Status::Ok();
  }

  // n data bytes from data offset `at` that the reader was told to Skip: counted as received, with no event.
  void Skipped(uint64_t at, uint64_t n) {
    Check(header_ != nullptr, "skip without a header");
    for (size_t k = 0; k < header_->tensor_count() && n > 0; ++k) {
      pb::TensorInfo t = header_->tensor(k);
      if (at >= t.end || at + n <= t.begin) continue;
      const uint64_t from = std::max(at, t.begin), to = std::min(at + n, t.end);
      Check(from - t.begin == received_[k], "skip not contiguous with the tensor's bytes");
      received_[k] += to - from;
    }
  }

  std::string Summary() const {
    std::string s = header_ ? rendered_ : std::string("<no header>");
    s += "\nreceived:";
    for (uint64_t r : received_) s += " " + std::to_string(r);
    return s;
  }
  uint64_t events() const { return events_; }

 private:
  std::span<const uint8_t> file_;
  const Header* header_ = nullptr;
  std::string rendered_;
  std::vector<uint64_t> received_;
  size_t last_tensor_ = 0;
  size_t complete_upto_ = 0;
  uint64_t events_ = 0;
};

struct Outcome {
  std::string events;  // header rendering + per-tensor byte counts
  std::string status;  // final status, rendered
  std::optional<pb::ErrorCode> code;
  std::string header;  // the header rendering alone ("" if none)
};

// Feeds `file` in the given chunk sizes (the last chunk takes the rest), then Finish.
// skip: once the header is in, every other chunk's data bytes are Skipped instead of fed (as an edge forwarding
// unchanged tensors does); the outcome must be the same as feeding them.
Outcome Run(std::span<const uint8_t> file, const std::vector<size_t>& chunks, bool with_total, bool skip = false) {
  pb::ReaderOptions opts;
  if (with_total) opts.total_size = file.size();
  pb::StreamingReader reader(opts);
  Recorder rec(file);
  std::optional<Status> failure;
  size_t pos = 0;
  auto feed = [&](std::span<const uint8_t> chunk) {
    const uint64_t before = rec.events();
    Status s = reader.Feed(chunk, rec);
    if (failure) {
      // Sticky: same error, no further events.
      if (!SameStatus(s, *failure)) Mismatch("error not sticky", RenderStatus(*failure), RenderStatus(s));
      Check(rec.events() == before, "events after an error");
    } else if (!s.ok()) {
      failure = s;
    }
  };
  size_t turn = 0;
  for (size_t c : chunks) {
    if (pos > file.size()) break;
    size_t n = std::min(c, file.size() - pos);
    const Header* h = reader.header();
    if (skip && !failure && h && ++turn % 2 == 0 && reader.bytes_fed() >= h->data_start()) {
      const uint64_t data_at = reader.bytes_fed() - h->data_start();
      const uint64_t k = std::min<uint64_t>(n, h->data_size() - std::min(h->data_size(), data_at));
      Status s = reader.Skip(k);
      if (!s.ok()) Mismatch("Skip within the data failed", RenderStatus(s), "");
      rec.Skipped(data_at, k);
      pos += k;
      n -= k;
    }
    feed(file.subspan(pos, n));
    pos += n;
  }
  if (pos < file.size()) feed(file.subspan(pos));
  Status fin = reader.Finish(rec);
  if (failure && RenderStatus(fin) != RenderStatus(*failure))
    Mismatch("Finish after an error", RenderStatus(*failure), RenderStatus(fin));
  // Finish twice is harmless and gives the same verdict.
  Status again = reader.Finish(rec);
  if (RenderStatus(again) != RenderStatus(fin)) Mismatch("second Finish", RenderStatus(fin), RenderStatus(again));
  Outcome o;
  o.events = rec.Summary();
  o.status = RenderStatus(fin);
  if (!fin.ok()) o.code = fin.error().code;
  o.header = reader.header() ? RenderHeader(*reader.header()) : std::string();
  return o;
}

std::vector<size_t> RandomChunks(uint32_t seed, size_t total) {
  uint32_t x = seed * 2654435761u + 0x9E3779B9u;
  if (x == 0) x = 1;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
  };
  std::vector<size_t> chunks;
  size_t sum = 0;
  while (sum < total && chunks.size() < 100000) {
    uint32_t r = next();
    size_t c;
    switch (r & 7) {
      case 0: c = 0; break;  // empty Feed
      case 1:
      case 2: c = 1 + (r >> 8) % 3; break;  // 1-3 bytes (splits the prefix, names, elements)
      case 3:
      case 4: c = 1 + (r >> 8) % 64; break;
      case 5: c = 1 + (r >> 8) % 512; break;
      case 6: c = 8 - (sum % 8 == 0 ? 0 : sum % 8); break;  // up to the next multiple of 8 (or 0)
      default: c = 1 + (r >> 8) % 4096; break;
    }
    chunks.push_back(c);
    sum += c;
  }
  return chunks;
}

void Compare(const char* what, const Outcome& a, const Outcome& b) {
  if (a.status != b.status) Mismatch(what, a.status, b.status);
  if (a.events != b.events) Mismatch(what, a.events, b.events);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint32_t seed = 0;
  std::span<const uint8_t> file(data, size);
  if (size >= 4) {
    seed = static_cast<uint32_t>(data[0]) | static_cast<uint32_t>(data[1]) << 8 | static_cast<uint32_t>(data[2]) << 16 |
           static_cast<uint32_t>(data[3]) << 24;
    file = file.subspan(4);
  }
  auto whole_verdict = pb::ParseWholeFile(file);
  const std::vector<size_t> whole{file.size()};
  const std::vector<size_t> random = RandomChunks(seed, file.size());
  const std::vector<size_t> bytewise(file.size() <= 4096 ? file.size() : 0, 1);

  for (bool with_total : {false, true}) {
    Outcome a = Run(file, whole, with_total);
    Outcome b = Run(file, random, with_total);
    Compare(with_total ? "random chunks vs whole (total_size known)" : "random chunks vs whole", a, b);
    Outcome skipped = Run(file, random, with_total, /*skip=*/true);
    Compare(with_total ? "random chunks, some skipped, vs whole (total_size known)"
                       : "random chunks, some skipped, vs whole",
            a, skipped);
    if (!bytewise.empty()) {
      Outcome c = Run(file, bytewise, with_total);
      Compare(with_total ? "bytewise vs whole (total_size known)" : "bytewise vs whole", a, c);
    }
    // The streaming verdict equals random access over the complete file.
    if (whole_verdict.ok() != !a.code.has_value() || (a.code && whole_verdict.error().code != *a.code))
      Mismatch(with_total ? "reader vs ParseWholeFile (total_size known)" : "reader vs ParseWholeFile", a.status,
               RenderStatus(whole_verdict.status()));
    if (whole_verdict.ok() && RenderHeader(whole_verdict.value()) != a.header)
      Mismatch("header vs ParseWholeFile", a.header, RenderHeader(whole_verdict.value()));
  }
  return 0;
}

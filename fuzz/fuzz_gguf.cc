// libFuzzer target for the GGUF reader (gguf/gguf_reader.h) and the .gguf LoRA adapter reader (read_gguf.cc).
//
// Input: byte 0 = options (bit 0: the file's size known; bits 1-7: the first read's size, 1 << (n % 17) bytes);
// byte 1 = the base config.json given (odd: a LLaMA config with 4 heads, 2 kv heads; else none); the rest = the
// .gguf file. Binary, so no compact encoding: hostile sizes and counts are the file's own fields.
//
// Checks (abort() on failure):
//   - pushed from a small first read and then as much as each parse asks for, the parse reaches the same verdict
//     as the whole file at once (the same header, or the same error code and message); every `need` is larger
//     than what was given and at most the file's size; with the size unknown, the verdict on the whole file is the
//     same except for the errors only a known size can give;
//   - every refusal has a message starting "GGUF: ";
//   - an accepted header: the tensor offsets are the running sum of padded sizes, every tensor lies inside the
//     file, data_start is infos_end padded to the alignment; when its keys and tensors are of the kinds our writer
//     writes (string, scalar and UINT32-array keys; F32/F16/BF16/Q8_0 tensors of 1-4 dims), PlanGguf + EncodeHeader
//     lay it out identically: the same data_start, offsets and sizes, and the same header bytes where the file's
//     padding is zeros;
//   - ReadAdapter from the whole bytes and from the header alone (tensors fetched by range, in pieces) agree:
//     both refuse (each with a message) or both accept with the same modules, mappings and factor bytes;
//   - an accepted adapter written again as .gguf (WriteAdapter kGguf, EmitGguf) parses and reads back with the modules
//     written (q/k modules need the head counts of a base config to be written; without one they are dropped).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "adapter/gguf_emitter.h"
#include "adapter/tensor_fetch.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

namespace {

using namespace pb;
using pb::adapter::AdapterSource;

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_gguf: %s\n%s\n", what.c_str(), detail.substr(0, 4000).c_str());
  std::abort();
}

struct Sink : ByteSink {
  std::vector<uint8_t> bytes;
  Status Write(std::span<const uint8_t> b) override {
    bytes.insert(bytes.end(), b.begin(), b.end());
    return Status::Ok();
  }
};

std::string Describe(const Result<gguf::GgufParse>& r) {
  if (!r.ok()) return "error " + std::string(ErrorCodeName(r.error().code)) + ": " + r.error().message;
  if (!r->file) return "need " + std::to_string(r->need);
  const gguf::GgufFile& f = *r->file;
  std::string s = "v" + std::to_string(f.version) + " keys=" + std::to_string(f.keys.size()) +
                  " data_start=" + std::to_string(f.data_start) + " data_size=" + std::to_string(f.data_size);
  for (const auto& k : f.keys) s += "\n" + k.key + "=" + k.Render();
  for (const auto& t : f.tensors) s += "\n" + t.name + " " + std::to_string(t.type) + " @" + std::to_string(t.offset);
  return s;
}

// A parse pushed as an edge drives it: `first` bytes, then what each answer asks for.
Result<gguf::GgufParse> Pushed(std::span<const uint8_t> file, uint64_t first, std::optional<uint64_t> size) {
  uint64_t have = std::min<uint64_t>(first, file.size());
  for (int round = 0;; ++round) {
    auto r = gguf::ParseGgufHeader(file.subspan(0, have), size);
    if (!r.ok() || r->file) return r;
    if (r->need <= have) Fail("a parse asks for no more than it was given", std::to_string(r->need));
    if (size && r->need > *size) Fail("a parse asks for more than the file holds", std::to_string(r->need));
    if (r->need > file.size()) return r;  // size unknown: the file ends before the header
    have = r->need;
    if (round > 64) Fail("a parse keeps asking");
  }
}

std::optional<gguf::KeyValue> AsWritable(const gguf::GgufKey& k) {
  gguf::KeyValue kv;
  kv.key = k.key;
  kv.type = k.type;
  if (k.type == gguf::ValueType::kString) {
    kv.text = k.text;
    return kv;
  }
  if (k.type == gguf::ValueType::kArray) {
    if (k.element_type != gguf::ValueType::kUint32) return std::nullopt;
    kv.uint32s.resize(k.count);
    std::memcpy(kv.uint32s.data(), k.raw.data(), k.raw.size());
    return kv;
  }
  auto n = k.Number();
  if (!n) return std::nullopt;
  if (k.type == gguf::ValueType::kBool && k.raw[0] > 1) return std::nullopt;  // the writer writes 0/1
  if ((k.type == gguf::ValueType::kUint64 || k.type == gguf::ValueType::kInt64) && std::fabs(*n) > 9.0e15)
    return std::nullopt;  // KeyValue holds a double
  kv.number = *n;
  return kv;
}

void CheckLayout(std::span<const uint8_t> file, const gguf::GgufFile& f) {
  uint64_t expected = 0;
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    if (f.tensors[i].offset != expected) Fail("an accepted offset is not the running sum", f.tensors[i].name);
    expected += gguf::Pad(f.tensors[i].size, f.alignment);
    if (f.TensorEnd(i) > file.size() || f.TensorBegin(i) < f.data_start)
      Fail("a tensor lies outside the file", f.tensors[i].name);
  }
  if (expected != f.data_size) Fail("data_size is not the padded sum");
  if (f.data_start != (f.tensors.empty() ? f.infos_end : gguf::Pad(f.infos_end, f.alignment))) Fail("data_start");
  // Without tensors ggml puts no padding before the (empty) data section; gguf-py's writer and ours always pad.
  if (f.tensors.empty()) return;
  std::vector<gguf::KeyValue> keys;
  for (const auto& k : f.keys) {
    auto kv = AsWritable(k);
    if (!kv) return;
    keys.push_back(std::move(*kv));
  }
  std::vector<gguf::TensorSlot> slots;
  for (const auto& t : f.tensors) {
    auto type = gguf::TensorTypeFromId(t.type);
    if (!type || t.ne.empty()) return;
    slots.push_back({t.name, t.Shape(), *type});
  }
  auto layout = gguf::PlanGguf(keys, slots, f.alignment);
  if (!layout.ok()) Fail("the writer refuses an accepted layout: " + layout.error().message);
  if (layout->data_start != f.data_start) Fail("the writer lays the header out otherwise");
  for (size_t i = 0; i < slots.size(); ++i)
    if (layout->offsets[i] != f.tensors[i].offset || layout->sizes[i] != f.tensors[i].size)
      Fail("offsets or sizes differ", slots[i].name);
  std::vector<uint8_t> header = gguf::EncodeHeader(layout.value());
  std::memcpy(header.data() + 4, &f.version, 4);  // the writer writes version 3; v2 has the same layout
  bool zero_padding = true;
  for (uint64_t i = f.infos_end; i < f.data_start; ++i) zero_padding = zero_padding && file[i] == 0;
  if (zero_padding && (header.size() != f.data_start || std::memcmp(header.data(), file.data(), header.size()) != 0))
    Fail("the writer's header bytes differ from the file's");
}

void CheckAdapter(std::span<const uint8_t> file, const gguf::GgufFile& f, const std::optional<std::string>& base) {
  AdapterSource whole{"fuzz.gguf", file, std::nullopt, base};
  AdapterSource lazy{"fuzz.gguf", {}, std::nullopt, base};
  lazy.gguf = &f;
  auto a = adapter::ReadAdapter(whole, {});
  auto b = adapter::ReadAdapter(lazy, {});
  if (a.ok() != b.ok()) Fail("whole and header-only reads disagree", a.ok() ? b.error().message : a.error().message);
  if (!a.ok()) {
    if (a.error().message.empty() || b.error().message.empty()) Fail("a refused read without a message");
    if (a.error().message != b.error().message)
      Fail("the reads refuse differently", a.error().message + "\n" + b.error().message);
    return;
  }
  if (a->mappings.size() != b->mappings.size() || a->adapter.modules.size() != b->adapter.modules.size())
    Fail("whole and header-only reads differ");
  for (size_t i = 0; i < a->mappings.size(); ++i)
    if (a->mappings[i].to != b->mappings[i].to || a->mappings[i].action != b->mappings[i].action)
      Fail("mappings differ", a->mappings[i].from);
  // Fetch every referenced factor by range, in 5-byte pieces, and compare.
  std::vector<const adapter::Tensor*> refs;
  for (const auto& m : b->adapter.modules) {
    refs.push_back(&m.a);
    refs.push_back(&m.b);
  }
  adapter::TensorFetch fetch;
  fetch.Request(refs);
  for (int guard = 0; !fetch.ready(); ++guard) {
    const std::vector<adapter::ByteRange> needs(fetch.needs().begin(), fetch.needs().end());
    for (const auto& r : needs) {
      if (r.end > file.size() || r.begin > r.end) Fail("a range outside the file");
      for (uint64_t p = r.begin; p < r.end; p += 5) {
        Status s = fetch.Supply(file.subspan(p, std::min<uint64_t>(5, r.end - p)));
        if (!s.ok()) Fail("fetching a factor fails: " + s.error().message);
      }
    }
    if (guard > 4) Fail("the fetch does not end");
  }
  for (size_t i = 0; i < a->adapter.modules.size(); ++i) {
    const auto& m = a->adapter.modules[i];
    if (fetch.get(2 * i)->bytes != m.a.bytes || fetch.get(2 * i + 1)->bytes != m.b.bytes)
      Fail("factor bytes differ", m.path);
  }
  adapter::WriteOptions wo;
  wo.base_config = base;
  auto out = adapter::WriteAdapter(a->adapter, adapter::AdapterFormat::kGguf, wo);
  if (!out.ok()) {
    if (out.error().message.empty()) Fail("a refused write without a message");
    return;
  }
  Sink sink;
  Status s = adapter::EmitGguf(*out->gguf, sink);
  if (!s.ok()) Fail("an accepted .gguf plan cannot be emitted: " + s.error().message);
  auto again = adapter::ReadAdapter(AdapterSource{"again.gguf", sink.bytes, std::nullopt, base}, {});
  if (!again.ok()) Fail("our .gguf does not read back: " + again.error().message);
  // The modules written (those whose q/k row order needs head counts no base config gave are dropped, with a reason).
  if (again->adapter.modules.size() != out->gguf->slots.size() / 2)
    Fail("the .gguf round trip changes the module count");
}

const char* kLlamaConfig =
    R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, )"
    R"("num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 64})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t options = data[0];
  const std::optional<std::string> base = (data[1] & 1) ? std::optional<std::string>(kLlamaConfig) : std::nullopt;
  const std::span<const uint8_t> file(data + 2, size - 2);
  const uint64_t first = uint64_t{1} << ((options >> 1) % 17);
  const std::optional<uint64_t> known = (options & 1) ? std::optional<uint64_t>(file.size()) : std::nullopt;

  auto once = gguf::ParseGgufHeader(file, file.size());
  auto pushed = Pushed(file, first, known);
  if (known && Describe(once) != Describe(pushed))
    Fail("pushed and whole parses differ", Describe(once) + "\n--\n" + Describe(pushed));
  for (const auto* r : {&once, &pushed})
    if (!r->ok() && r->error().message.rfind("GGUF: ", 0) != 0)
      Fail("a refusal without a GGUF message", r->error().message);
  // Without a size, an accepted file is accepted the same way (tensor bounds are checked against a known size only).
  auto unsized = gguf::ParseGgufHeader(file, std::nullopt);
  if (once.ok() && once->file && !(unsized.ok() && unsized->file && Describe(unsized) == Describe(once)))
    Fail("a file accepted with its size is not accepted alike without it", Describe(unsized));
  if (!once.ok() || !once->file) return 0;
  CheckLayout(file, *once->file);
  CheckAdapter(file, *once->file, base);
  return 0;
}

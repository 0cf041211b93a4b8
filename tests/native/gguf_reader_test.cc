// Reading GGUF: the container (gguf/gguf_reader.h) with ggml's rules, pushed any number of bytes at a time and
// refusing hostile files with precise errors; and .gguf LoRA adapters read back (read_gguf.cc): our own files
// restore the PEFT adapter exactly, files without our keys read with the naming table and alpha.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "adapter/gguf_emitter.h"
#include "adapter/tensor_ops.h"
#include "adapter_fixtures.h"
#include "gguf/gguf_encode.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "lazy_adapter.h"

namespace pb {
namespace {

using testing::Bytes;

// A GGUF file written by hand, field by field, so that each can be made wrong.
class Builder {
 public:
  template <typename T>
  Builder& Put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes.insert(bytes.end(), b, b + sizeof(T));
    return *this;
  }
  Builder& Str(const std::string& s) {
    Put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  Builder& Head(uint64_t tensors, uint64_t keys, uint32_t version = 3) {
    bytes.insert(bytes.end(), {'G', 'G', 'U', 'F'});
    return Put<uint32_t>(version).Put<uint64_t>(tensors).Put<uint64_t>(keys);
  }
  Builder& KeyString(const std::string& k, const std::string& v) { return Str(k).Put<uint32_t>(8).Str(v); }
  Builder& KeyU32(const std::string& k, uint32_t v) { return Str(k).Put<uint32_t>(4).Put<uint32_t>(v); }
  Builder& Tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    Str(name).Put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) Put<uint64_t>(d);
    return Put<uint32_t>(type).Put<uint64_t>(offset);
  }
  Builder& PadTo(size_t alignment) {
    bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  Builder& Zeros(size_t n) {
    bytes.resize(bytes.size() + n, 0);
    return *this;
  }
  Bytes bytes;
};

Result<gguf::GgufFile> ParseAll(const Bytes& b) {
  PB_ASSIGN_OR_RETURN(auto p, gguf::ParseGgufHeader(b, b.size()));
  if (!p.file) return MakeError(ErrorCode::InvalidArgument, "incomplete");
  return std::move(*p.file);
}

// The error a file gets; fails the test when it is accepted.
Error Refusal(const Bytes& b) {
  auto r = gguf::ParseGgufHeader(b, b.size());
  EXPECT_FALSE(r.ok() && r->file.has_value()) << "accepted";
  if (r.ok()) return MakeError(ErrorCode::InvalidArgument, "accepted or incomplete");
  return r.error();
}

Bytes TwoTensorFile() {
  Builder b;
  b.Head(2, 2).KeyString("general.architecture", "llama").KeyU32("general.alignment", 32);
  b.Tensor("a.lora_a", {64, 2}, 0, 0).Tensor("a.lora_b", {32, 3}, 8, 512).PadTo(32);
  b.Zeros(512 + 3 * 34);
  return b.bytes;
}

TEST(GgufReader, ReadsWhatTheWriterLaysOut) {
  using gguf::KeyValue;
  auto layout =
      gguf::PlanGguf({KeyValue::String("general.architecture", "llama"), KeyValue::Float32("adapter.lora.alpha", 0.1f),
                      KeyValue::Uint32("general.quantization_version", 2),
                      KeyValue::Uint32Array("adapter.alora.invocation_tokens", {5, 6})},
                     {{"blk.0.attn_q.weight.lora_a", {2, 64}, gguf::TensorType::kQ8_0},
                      {"blk.0.attn_q.weight.lora_b", {3, 2}, gguf::TensorType::kF16},
                      {"token_embd.weight.lora_a", {5, 7, 2}, gguf::TensorType::kBF16}});
  ASSERT_TRUE(layout.ok()) << layout.error().message;
  Bytes file = gguf::EncodeHeader(layout.value());
  file.resize(layout->file_size, 0);
  auto r = ParseAll(file);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->version, 3u);
  EXPECT_EQ(r->data_start, layout->data_start);
  ASSERT_EQ(r->keys.size(), 4u);
  EXPECT_EQ(r->String("general.architecture"), "llama");
  EXPECT_EQ(r->Find("adapter.lora.alpha")->Render(), "0.1");  // the float's shortest exact form
  EXPECT_EQ(r->Find("adapter.lora.alpha")->Number(), static_cast<double>(0.1f));
  EXPECT_EQ(r->Find("general.quantization_version")->Render(), "2");
  EXPECT_EQ(r->Find("adapter.alora.invocation_tokens")->count, 2u);
  EXPECT_EQ(r->Find("adapter.alora.invocation_tokens")->Render(), "[2 × UINT32]");
  ASSERT_EQ(r->tensors.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r->tensors[i].name, layout->tensors[i].name);
    EXPECT_EQ(r->tensors[i].Shape(), layout->tensors[i].shape);
    EXPECT_EQ(r->tensors[i].type, static_cast<uint32_t>(layout->tensors[i].type));
    EXPECT_EQ(r->tensors[i].offset, layout->offsets[i]);
    EXPECT_EQ(r->tensors[i].size, layout->sizes[i]);
  }
  EXPECT_EQ(r->tensors[0].size, 2u * 2 * 34);
  EXPECT_EQ(r->data_start + r->data_size, layout->file_size);
}

TEST(GgufReader, AsksForMoreUntilItHasTheHeaderWhateverTheFirstRead) {
  const Bytes file = TwoTensorFile();
  for (size_t first : {size_t{0}, size_t{1}, size_t{4}, size_t{23}, size_t{60}, size_t{130}}) {
    size_t have = first, rounds = 0;
    for (;;) {
      auto p = gguf::ParseGgufHeader(std::span<const uint8_t>(file.data(), have), file.size());
      ASSERT_TRUE(p.ok()) << p.error().message;
      if (p->file) break;
      ASSERT_GT(p->need, have);  // always progress
      ASSERT_LE(p->need, file.size());
      have = p->need;
      ASSERT_LT(++rounds, 40u);
    }
  }
  // Without a known size, the same.
  auto p = gguf::ParseGgufHeader(std::span<const uint8_t>(file.data(), 30), std::nullopt);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->file.has_value());
  EXPECT_GT(p->need, 30u);
}

TEST(GgufReader, AcceptsVersion2AndNoTensors) {
  Builder b;
  b.Head(0, 1, 2).KeyString("general.type", "adapter");
  auto r = ParseAll(b.bytes);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->version, 2u);
  EXPECT_EQ(r->data_start, b.bytes.size());  // no padding without tensors (ggml)
}

struct Hostile {
  const char* what;
  Bytes bytes;
  ErrorCode code;
  const char* message;  // a part of the message
  std::optional<uint64_t> offset;
  std::optional<std::string> tensor = std::nullopt;
};

TEST(GgufReader, RefusesWhatGgmlRefusesNamingKeyTensorAndOffset) {
  std::vector<Hostile> cases;
  auto with = [](auto&& f) {
    Builder b;
    f(b);
    return b.bytes;
  };
  cases.push_back({"magic", with([](Builder& b) { b.bytes = {'G', 'G', 'M', 'L', 3, 0, 0, 0}; }),
                   ErrorCode::InvalidHeader, "not a GGUF file: it starts with `GGML`", 0});
  cases.push_back({"v0", with([](Builder& b) { b.Head(0, 0, 0); }), ErrorCode::InvalidHeader, "bad GGUF version 0", 4});
  cases.push_back({"v1", with([](Builder& b) { b.Head(0, 0, 1); }), ErrorCode::InvalidHeader,
                   "version 1 is no longer supported", 4});
  cases.push_back({"v4", with([](Builder& b) { b.Head(0, 0, 4); }), ErrorCode::InvalidHeader, "version 4 is newer", 4});
  cases.push_back(
      {"big-endian", with([](Builder& b) { b.Head(0, 0, 0x03000000); }), ErrorCode::InvalidHeader, "big-endian", 4});
  cases.push_back({"empty key", with([](Builder& b) { b.Head(0, 1).KeyString("", "x"); }), ErrorCode::InvalidHeader,
                   "key 0 is empty", 24});
  cases.push_back({"duplicate key", with([](Builder& b) { b.Head(0, 2).KeyString("a", "x").KeyString("a", "y"); }),
                   ErrorCode::InvalidHeader, "duplicate key `a` (key 1)", 24 + 8 + 1 + 4 + 8 + 1});
  cases.push_back({"bad type", with([](Builder& b) { b.Head(0, 1).Str("k").Put<uint32_t>(13).Put<uint32_t>(0); }),
                   ErrorCode::InvalidHeader, "key `k` has invalid GGUF type 13", 33});
  cases.push_back({"array of arrays",
                   with([](Builder& b) { b.Head(0, 1).Str("k").Put<uint32_t>(9).Put<uint32_t>(9).Put<uint64_t>(0); }),
                   ErrorCode::InvalidHeader, "arrays of arrays", 33});
  cases.push_back({"alignment type",
                   with([](Builder& b) { b.Head(0, 1).Str("general.alignment").Put<uint32_t>(10).Put<uint64_t>(32); }),
                   ErrorCode::InvalidHeader, "`general.alignment` must be of type UINT32 but is UINT64", 24});
  cases.push_back({"alignment 48", with([](Builder& b) { b.Head(0, 1).KeyU32("general.alignment", 48); }),
                   ErrorCode::InvalidHeader, "alignment 48 is not a power of 2", 24});
  cases.push_back({"alignment 0", with([](Builder& b) { b.Head(0, 1).KeyU32("general.alignment", 0); }),
                   ErrorCode::InvalidHeader, "alignment 0 is not a power of 2", 24});
  const std::string long_name(64, 'x');
  cases.push_back({"long name",
                   with([&](Builder& b) { b.Head(1, 0).Tensor(long_name, {4}, 0, 0).PadTo(32).Zeros(16); }),
                   ErrorCode::TensorInvalidInfo, "its name has 64 bytes; ggml reads at most 63", 24, long_name});
  cases.push_back({"5 dims", with([](Builder& b) {
                     b.Head(1, 0).Tensor("t", {1, 1, 1, 1, 1}, 0, 0);
                   }),
                   ErrorCode::TensorInvalidInfo, "tensor `t` has 5 dimensions; ggml allows at most 4", 33, "t"});
  cases.push_back({"negative", with([](Builder& b) {
                     b.Head(1, 0).Tensor("t", {4, uint64_t(-2)}, 0, 0);
                   }),
                   ErrorCode::TensorInvalidInfo, "dimension 1 has a negative number of elements (-2)", 45, "t"});
  cases.push_back({"overflow", with([](Builder& b) {
                     b.Head(1, 0).Tensor("t", {1ull << 40, 1ull << 40}, 0, 0);
                   }),
                   ErrorCode::ValidationOverflow, "element count overflows", 33, "t"});
  cases.push_back({"removed type", with([](Builder& b) { b.Head(1, 0).Tensor("t", {32}, 4, 0); }),
                   ErrorCode::TensorInvalidInfo, "invalid ggml type 4", 45, "t"});
  cases.push_back({"type 43", with([](Builder& b) { b.Head(1, 0).Tensor("t", {32}, 43, 0); }),
                   ErrorCode::TensorInvalidInfo, "invalid ggml type 43", 45, "t"});
  cases.push_back({"partial block", with([](Builder& b) {
                     b.Head(1, 0).Tensor("t", {16, 2}, 8, 0);
                   }),
                   ErrorCode::MisalignedSlice,
                   "tensor `t` of type Q8_0 has 16 elements per row, not a multiple of its block size (32)", 53, "t"});
  cases.push_back({"duplicate name",
                   with([](Builder& b) { b.Head(2, 0).Tensor("t", {4}, 0, 0).Tensor("t", {4}, 0, 32); }),
                   ErrorCode::TensorInvalidInfo, "duplicate tensor name `t` (tensor 1)", 57, "t"});
  cases.push_back(
      {"gap", with([](Builder& b) { b.Head(2, 0).Tensor("a", {4}, 0, 0).Tensor("b", {4}, 0, 64).PadTo(32).Zeros(96); }),
       ErrorCode::InvalidOffset, "tensor `b` has offset 64, expected 32", 57, "b"});
  cases.push_back({"past the end", with([](Builder& b) { b.Head(1, 0).Tensor("a", {4}, 0, 0).PadTo(32).Zeros(15); }),
                   ErrorCode::MetadataIncompleteBuffer,
                   "tensor `a` ends at byte 80, past the end of the file (79 bytes)", 24, "a"});
  cases.push_back({"truncated key", with([](Builder& b) {
                     b.Head(0, 1).Str("general.architecture").Put<uint32_t>(8).Put<uint64_t>(100);
                   }),
                   ErrorCode::MetadataIncompleteBuffer, "inside key `general.architecture`'s value", 64});
  // Hostile counts and lengths: refused from the counts alone, nothing allocated for them.
  cases.push_back({"tensor count", with([](Builder& b) { b.Head(1ull << 60, 0); }), ErrorCode::HeaderTooLarge,
                   "declares 1152921504606846976 tensors", 8});
  cases.push_back({"key count", with([](Builder& b) { b.Head(0, uint64_t(-1)); }), ErrorCode::HeaderTooLarge,
                   "declares 18446744073709551615 keys", 16});
  cases.push_back({"keys over the cap", with([](Builder& b) { b.Head(0, 65537).Zeros(65537 * 13); }),
                   ErrorCode::HeaderTooLarge, "declares 65537 keys; peft-bridge reads at most 65536", 16});
  cases.push_back({"tensors over the cap", with([](Builder& b) { b.Head(262145, 0).Zeros(262145 * 25); }),
                   ErrorCode::HeaderTooLarge, "declares 262145 tensors; peft-bridge reads at most 262144", 8});
  cases.push_back({"tensors the file cannot hold", with([](Builder& b) { b.Head(1000, 0).Zeros(100); }),
                   ErrorCode::MetadataIncompleteBuffer,
                   "the file ends at byte 124, before the 1000 tensors the header declares", 8});
  cases.push_back({"string length", with([](Builder& b) { b.Head(0, 1).Put<uint64_t>(1ull << 62); }),
                   ErrorCode::HeaderTooLarge, "key 0 at byte 32 claims 4611686018427387904 bytes", 32});
  cases.push_back({"array count", with([](Builder& b) {
                     b.Head(0, 1).Str("k").Put<uint32_t>(9).Put<uint32_t>(6).Put<uint64_t>(1ull << 61);
                   }),
                   ErrorCode::HeaderTooLarge, "key `k`'s elements", 49});
  cases.push_back({"string array", with([](Builder& b) {
                     b.Head(0, 1).Str("k").Put<uint32_t>(9).Put<uint32_t>(8).Put<uint64_t>(1ull << 40);
                   }),
                   ErrorCode::HeaderTooLarge, "key `k`'s elements", 49});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Error e = Refusal(c.bytes);
    EXPECT_EQ(ErrorCodeName(e.code), ErrorCodeName(c.code)) << e.message;
    EXPECT_NE(e.message.find(c.message), std::string::npos) << e.message;
    EXPECT_EQ(e.message.rfind("GGUF: ", 0), 0u) << e.message;
    EXPECT_EQ(e.offset, c.offset) << e.message;
    EXPECT_EQ(e.tensor, c.tensor) << e.message;
  }
}

TEST(GgufReader, TypeTableIsGgmls) {
  EXPECT_EQ(gguf::GgmlType(8)->block_bytes, 34u);
  EXPECT_EQ(gguf::GgmlType(12)->name, "Q4_K");
  EXPECT_EQ(gguf::GgmlType(12)->block_bytes, 144u);
  EXPECT_EQ(gguf::GgmlType(30)->name, "BF16");
  EXPECT_EQ(gguf::GgmlType(39)->name, "MXFP4");
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u}) EXPECT_FALSE(gguf::GgmlType(removed)) << removed;
  for (uint32_t id : {0u, 1u, 8u, 30u})  // the adapter types: the writer's table agrees
    EXPECT_EQ(gguf::GgmlType(id)->block_bytes, gguf::BlockBytes(*gguf::TensorTypeFromId(id)));
}

}  // namespace

namespace adapter {
namespace {

using testing::AddLinear;
using testing::Bytes;
using testing::GeneratedAdapter;
using testing::GenTensor;

constexpr const char* kTargets = R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "k_proj", "v_proj"])";

GeneratedAdapter Llama(const std::string& fields, Dtype dtype = Dtype::F32, bool embedding = false, uint64_t r = 4,
                       uint64_t width = 32) {
  std::vector<GenTensor> t;
  for (int layer = 0; layer < 2; ++layer) {
    std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
    AddLinear(t, p + "q_proj", r, width, width, dtype);
    AddLinear(t, p + "k_proj", r, width, width / 2, dtype);
    AddLinear(t, p + "v_proj", r, width, width / 2, dtype);
  }
  if (embedding) {
    t.push_back({"base_model.model.model.embed_tokens.lora_embedding_A", dtype, {r, 64}});
    t.push_back({"base_model.model.model.embed_tokens.lora_embedding_B", dtype, {width, r}});
  }
  GeneratedAdapter g;
  g.config = testing::PeftConfig(fields);
  g.weights = testing::BuildSafetensors(t, 11);
  g.base_config = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": )" +
                  std::to_string(width) +
                  R"(, "num_attention_heads": 4, "num_key_value_heads": 2, )"
                  R"("num_hidden_layers": 2, "vocab_size": 64, "tie_word_embeddings": false})";
  return g;
}

ReadResult Read(const AdapterSource& s, ReadOptions o = {}) {
  auto r = ReadAdapter(s, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (!r.ok()) std::abort();
  return std::move(r.value());
}

struct GgufFileBytes {
  Bytes bytes;
  AdapterOutput output;
};

GgufFileBytes WriteGgufFile(const Adapter& a, gguf::TensorType outtype, std::optional<std::string> base_config) {
  WriteOptions o;
  o.gguf_outtype = outtype;
  o.base_config = std::move(base_config);
  auto out = WriteAdapter(a, AdapterFormat::kGguf, o);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  if (!out.ok()) std::abort();
  testing::VectorSink sink;
  Status s = EmitGguf(*out->gguf, sink);
  EXPECT_TRUE(s.ok());
  return {sink.bytes, std::move(out.value())};
}

// Reads a .gguf both ways (whole bytes; header only, then every tensor fetched by range in 1-byte and random
// pieces) and checks they agree; returns the whole read.
ReadResult ReadGgufBothWays(const Bytes& file, std::optional<std::string> base_config = std::nullopt,
                            std::optional<std::string> config = std::nullopt) {
  AdapterSource whole{"adapter_model.gguf", file, config, base_config};
  ReadResult r = Read(whole);
  auto parsed = gguf::ParseGgufHeader(file, file.size());
  EXPECT_TRUE(parsed.ok() && parsed->file);
  AdapterSource lazy{"adapter_model.gguf", {}, config, base_config};
  lazy.gguf = &*parsed->file;
  ReadResult l = Read(lazy);
  EXPECT_EQ(l.mappings.size(), r.mappings.size());
  for (size_t i = 0; i < r.mappings.size() && i < l.mappings.size(); ++i) {
    EXPECT_EQ(l.mappings[i].to, r.mappings[i].to);
    EXPECT_EQ(l.mappings[i].action, r.mappings[i].action);
  }
  for (uint64_t mode : {1, 9}) {
    auto made = testing::MaterializeAll(l.adapter, file, {mode});
    EXPECT_TRUE(made.ok());
    if (!made.ok()) continue;
    EXPECT_EQ(made->modules.size(), r.adapter.modules.size());
    for (size_t i = 0; i < made->modules.size() && i < r.adapter.modules.size(); ++i) {
      EXPECT_TRUE(made->modules[i].a.bytes == r.adapter.modules[i].a.bytes) << made->modules[i].path;
      EXPECT_TRUE(made->modules[i].b.bytes == r.adapter.modules[i].b.bytes) << made->modules[i].path;
      EXPECT_EQ(made->modules[i].a.dtype, r.adapter.modules[i].a.dtype);
    }
  }
  return r;
}

// PEFT -> .gguf -> PEFT: adapter_model.safetensors and adapter_config.json byte for byte.
TEST(GgufAdapterRead, OurFilesRoundTripToPeftByteForByte) {
  struct Case {
    std::string fields;
    Dtype dtype;
    gguf::TensorType outtype;
    bool embedding;
  };
  const std::vector<Case> cases = {
      {kTargets, Dtype::F32, gguf::TensorType::kF32, false},
      {kTargets, Dtype::F16, gguf::TensorType::kF16, false},
      {kTargets, Dtype::BF16, gguf::TensorType::kBF16, false},
      {R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "k_proj", "v_proj", "embed_tokens"])", Dtype::F32,
       gguf::TensorType::kF32, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fields + " " + std::string(DtypeName(c.dtype)));
    GeneratedAdapter g = Llama(c.fields, c.dtype, c.embedding);
    ReadResult original = Read(g.source());
    auto peft_once = WriteAdapter(original.adapter, AdapterFormat::kPeft, {});
    ASSERT_TRUE(peft_once.ok());
    GgufFileBytes file = WriteGgufFile(original.adapter, c.outtype, g.base_config);
    ReadResult back = ReadGgufBothWays(file.bytes);  // no base config: the file carries the head counts
    EXPECT_EQ(back.adapter.source_format, "gguf");
    EXPECT_TRUE(back.adapter.rejected.empty());
    auto peft = WriteAdapter(back.adapter, AdapterFormat::kPeft, {});
    ASSERT_TRUE(peft.ok()) << peft.error().message;
    EXPECT_EQ(peft->config_text, peft_once->config_text);
    testing::VectorSink a, b;
    ASSERT_TRUE(EmitSafetensors(peft_once->weights, a).ok());
    ASSERT_TRUE(EmitSafetensors(peft->weights, b).ok());
    EXPECT_TRUE(a.bytes == b.bytes) << "adapter_model.safetensors differs";
  }
}

// Q8_0 (and its F16 fallback for short rows) decode exactly to F32: the values llama.cpp computes with.
TEST(GgufAdapterRead, Q8_0DecodesExactlyToF32) {
  GeneratedAdapter g = Llama(R"("r": 32, "lora_alpha": 16, "target_modules": ["q_proj", "k_proj", "v_proj"])",
                             Dtype::F32, false, 32, 64);
  ReadResult original = Read(g.source());
  GgufFileBytes file = WriteGgufFile(original.adapter, gguf::TensorType::kQ8_0, g.base_config);
  ReadResult back = ReadGgufBothWays(file.bytes);
  ASSERT_EQ(back.adapter.modules.size(), original.adapter.modules.size());
  for (const auto& m : original.adapter.modules) {
    const LoraModule* n = back.adapter.FindModule(m.path);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->a.dtype, Dtype::F32);
    EXPECT_EQ(n->settings.scaling, m.settings.scaling);
    // A's expected values: encoded as the writer does, decoded with q · fp16(d).
    const auto* src = reinterpret_cast<const float*>(m.a.bytes.data());
    std::vector<uint8_t> q;
    gguf::EncodeValues(gguf::TensorType::kQ8_0, std::span<const float>(src, m.a.element_count()), q);
    std::vector<float> expect(m.a.element_count());
    gguf::DecodeValues(gguf::TensorType::kQ8_0, q, expect.data(), expect.size());
    EXPECT_EQ(std::memcmp(n->a.bytes.data(), expect.data(), expect.size() * 4), 0) << m.path;
    float worst = 0;
    for (size_t i = 0; i < expect.size(); ++i)
      worst = std::max(worst, std::fabs(reinterpret_cast<const float*>(n->a.bytes.data())[i] - src[i]));
    EXPECT_LT(worst, 0.02f) << m.path;
  }
}

// A file as convert_lora_to_gguf.py writes it: no peft_bridge keys, no head counts.
Bytes WithoutOurKeys(const GgufFileBytes& ours, bool keep_heads) {
  GgufOutput o = *ours.output.gguf;
  std::vector<gguf::KeyValue> keys;
  for (auto& k : o.keys)
    if (!k.key.starts_with("peft_bridge.") && k.key != "peft_config" &&
        (keep_heads || k.key.find(".attention.head_count") == std::string::npos))
      keys.push_back(k);
  o.keys = std::move(keys);
  testing::VectorSink sink;
  EXPECT_TRUE(EmitGguf(o, sink).ok());
  return sink.bytes;
}

TEST(GgufAdapterRead, ConverterFilesReadWithTheArchTableAndAlpha) {
  GeneratedAdapter g = Llama(kTargets);
  ReadResult original = Read(g.source());
  GgufFileBytes ours = WriteGgufFile(original.adapter, gguf::TensorType::kF32, g.base_config);
  const Bytes converter = WithoutOurKeys(ours, false);
  // The head counts come from --base-config: q/k rows un-permuted, the same factors.
  ReadResult r = ReadGgufBothWays(converter, g.base_config);
  EXPECT_TRUE(r.adapter.rejected.empty());
  ASSERT_EQ(r.adapter.modules.size(), original.adapter.modules.size());
  for (const auto& m : original.adapter.modules) {
    const LoraModule* n = r.adapter.FindModule(m.path);
    ASSERT_NE(n, nullptr) << m.path;
    EXPECT_TRUE(n->a.bytes == m.a.bytes) << m.path;
    EXPECT_TRUE(n->b.bytes == m.b.bytes) << m.path;
    EXPECT_EQ(n->settings.scaling, m.settings.scaling) << m.path;  // alpha 8 / r 4
  }
  EXPECT_EQ(r.adapter.config.document["lora_alpha"], 8);
  EXPECT_EQ(r.adapter.config.document["r"], 4);
  // Without head counts, q and k cannot be un-permuted: rejected with the reason, the rest read.
  AdapterSource no_heads{"x.gguf", converter, std::nullopt, std::nullopt};
  ReadResult partial = Read(no_heads);
  EXPECT_EQ(partial.adapter.rejected.size(), 8u);  // q and k lora_b of both layers, and their lora_a
  EXPECT_NE(partial.adapter.rejected[0].reason.find("head count is unknown"), std::string::npos);
  auto strict = ReadAdapter(no_heads, {std::nullopt, std::nullopt, true, nullptr});
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.error().code, ErrorCode::UnresolvedTensor);
}

TEST(GgufAdapterRead, AlphaZeroMeansScaleOneAsLlamaCpp) {
  // rsLoRA is folded into B with alpha 0: read back, scaling 1 (lora_alpha = r) and B carrying PEFT's scale.
  GeneratedAdapter g = Llama(std::string(kTargets) + R"(, "use_rslora": true)");
  ReadResult original = Read(g.source());
  GgufFileBytes file = WriteGgufFile(original.adapter, gguf::TensorType::kF32, g.base_config);
  ReadResult r = ReadGgufBothWays(file.bytes);
  for (const auto& m : original.adapter.modules) {
    const LoraModule* n = r.adapter.FindModule(m.path);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->settings.scaling, 1.0);
    auto scaled = ScaleTensor(m.b, m.settings.scaling);
    ASSERT_TRUE(scaled.ok());
    EXPECT_TRUE(n->b.bytes == scaled->bytes) << m.path;
  }
  EXPECT_EQ(r.adapter.config.document["lora_alpha"], r.adapter.config.document["r"]);
  EXPECT_EQ(r.adapter.config.document["use_rslora"], false);
}

TEST(GgufAdapterRead, PeftAlphaZeroIsFoldedSoLlamaCppAndTheReadBackApplyNothing) {
  // PEFT's lora_alpha 0 scales by 0; llama.cpp's alpha 0 means scale 1: the writer folds the 0 into B.
  GeneratedAdapter g = Llama(R"("r": 4, "lora_alpha": 0, "target_modules": ["q_proj", "k_proj", "v_proj"])");
  ReadResult original = Read(g.source());
  GgufFileBytes file = WriteGgufFile(original.adapter, gguf::TensorType::kF32, g.base_config);
  auto parsed = gguf::ParseGgufHeader(file.bytes, file.bytes.size());
  ASSERT_TRUE(parsed.ok() && parsed->file);
  EXPECT_EQ(parsed->file->Find("adapter.lora.alpha")->Number(), 0.0);
  ReadResult r = ReadGgufBothWays(file.bytes);
  ASSERT_EQ(r.adapter.modules.size(), original.adapter.modules.size());
  for (const auto& m : r.adapter.modules) {
    EXPECT_EQ(m.settings.scaling, 1.0) << m.path;
    const auto* b = reinterpret_cast<const float*>(m.b.bytes.data());
    EXPECT_TRUE(std::all_of(b, b + m.b.element_count(), [](float v) { return v == 0; })) << m.path;
  }
}

Bytes Replace(const GgufFileBytes& ours, const std::string& key, gguf::KeyValue value) {
  GgufOutput o = *ours.output.gguf;
  for (auto& k : o.keys)
    if (k.key == key) k = value;
  testing::VectorSink sink;
  EXPECT_TRUE(EmitGguf(o, sink).ok());
  return sink.bytes;
}

TEST(GgufAdapterRead, RefusesWhatLlamaCppsLoaderRefuses) {
  GeneratedAdapter g = Llama(kTargets);
  GgufFileBytes ours = WriteGgufFile(Read(g.source()).adapter, gguf::TensorType::kF32, g.base_config);
  struct Case {
    Bytes file;
    const char* message;
  };
  const std::vector<Case> cases = {
      {Replace(ours, "general.type", gguf::KeyValue::String("general.type", "model")),
       "x.gguf: GGUF key `general.type` is `model`, not `adapter`: this .gguf file is not a LoRA adapter"},
      {Replace(ours, "adapter.type", gguf::KeyValue::String("adapter.type", "ia3")),
       "x.gguf: GGUF key `adapter.type` is `ia3`, not `lora`"},
      {Replace(ours, "adapter.lora.alpha", gguf::KeyValue::Uint32("adapter.lora.alpha", 8)),
       "x.gguf: GGUF key `adapter.lora.alpha` is UINT32; llama.cpp reads it as a FLOAT32"},
      {Replace(ours, "general.architecture", gguf::KeyValue::Uint32("general.architecture", 1)),
       "x.gguf: GGUF key `general.architecture` is UINT32; llama.cpp reads it as a STRING"},
  };
  for (const auto& c : cases) {
    auto r = ReadAdapter(AdapterSource{"x.gguf", c.file, std::nullopt, std::nullopt}, {});
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.error().code, ErrorCode::UnsupportedAdapter);
    EXPECT_EQ(r.error().message.rfind(c.message, 0), 0u) << r.error().message;
    EXPECT_TRUE(r.error().offset.has_value());
  }
  // A container error names the file first.
  Bytes cut(ours.bytes.begin(), ours.bytes.begin() + 100);
  auto r = ReadAdapter(AdapterSource{"x.gguf", cut, std::nullopt, std::nullopt}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("x.gguf: GGUF: the file ends at byte 100", 0), 0u) << r.error().message;
}

TEST(GgufAdapterRead, TensorsOfOtherGgmlTypesAreRejectedWithTheReason) {
  GeneratedAdapter g = Llama(kTargets);
  GgufFileBytes ours = WriteGgufFile(Read(g.source()).adapter, gguf::TensorType::kF32, g.base_config);
  Bytes file = ours.bytes;
  auto parsed = gguf::ParseGgufHeader(file, file.size());
  ASSERT_TRUE(parsed.ok() && parsed->file);
  // Retype the first tensor (blk.0.attn_k.weight.lora_a, 32 x 4 F32 = 512 bytes) as Q4_0 is impossible in place
  // (other size); I32 has F32's size: an integer tensor is no LoRA factor peft-bridge reads.
  const auto& t0 = parsed->file->tensors[0];
  const uint64_t type_at = t0.info_offset + 8 + t0.name.size() + 4 + 8 * t0.ne.size();
  const uint32_t i32 = 26;
  std::memcpy(file.data() + type_at, &i32, 4);
  ReadResult r = Read(AdapterSource{"x.gguf", file, std::nullopt, std::nullopt});
  ASSERT_EQ(r.adapter.rejected.size(), 2u);  // the I32 tensor, and its module's other half (pair missing)
  EXPECT_EQ(r.adapter.rejected[0].name, t0.name);
  EXPECT_NE(r.adapter.rejected[0].reason.find("ggml type I32"), std::string::npos) << r.adapter.rejected[0].reason;
}

}  // namespace
}  // namespace adapter

// A .gguf adapter whose factors are 0-D (no dims at all) or empty: once a native SIGSEGV. Each is a rejected
// tensor, named with its shape; with --strict the read fails with the same words.
TEST(GgufAdapterRead, ZeroDimensionalAndEmptyFactorsAreRejectedTensors) {
  auto adapter = [](std::vector<uint64_t> ne_a, std::vector<uint64_t> ne_b) {
    Builder b;
    b.Head(2, 4).KeyString("general.type", "adapter").KeyString("adapter.type", "lora");
    b.KeyString("general.architecture", "llama").Str("adapter.lora.alpha").Put<uint32_t>(6).Put<float>(8.0f);
    auto bytes_of = [](const std::vector<uint64_t>& ne) {
      uint64_t n = 4;
      for (uint64_t d : ne) n *= d;
      return n;
    };
    const uint64_t b_offset = (bytes_of(ne_a) + 31) / 32 * 32;
    b.Tensor("blk.0.attn_v.weight.lora_a", ne_a, 0, 0)
        .Tensor("blk.0.attn_v.weight.lora_b", ne_b, 0, b_offset)
        .PadTo(32);
    b.Zeros(b_offset + bytes_of(ne_b));
    return b.bytes;
  };
  for (const auto& [ne_a, ne_b] :
       std::vector<std::pair<std::vector<uint64_t>, std::vector<uint64_t>>>{{{}, {}}, {{}, {2, 4}}, {{2, 0}, {2, 4}}}) {
    const Bytes file = adapter(ne_a, ne_b);
    adapter::AdapterSource source{"adapter_model.gguf", file, std::nullopt, std::nullopt};
    auto r = adapter::ReadAdapter(source, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->adapter.modules.empty());
    ASSERT_FALSE(r->adapter.rejected.empty());
    EXPECT_NE(r->adapter.rejected[0].reason.find("a llama.cpp LoRA factor is 2-D and non-empty; this one is ["),
              std::string::npos)
        << r->adapter.rejected[0].reason;
    adapter::ReadOptions strict;
    strict.strict = true;
    EXPECT_FALSE(adapter::ReadAdapter(source, strict).ok());
  }
}

}  // namespace pb

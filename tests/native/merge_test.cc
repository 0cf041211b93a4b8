// Merge numerics: the streaming merge engine against a float64 model of PEFT's merge maths
// (merge_reference.h, docs/peft-semantics.md), end to end - a base safetensors file and a
// PEFT adapter built in memory, PlanMerge on the parsed header, ShardMerger fed in odd chunk sizes,
// StreamingMerger fed random chunks (byte-identical output), the output parsed and compared element by
// element: BF16/F16 results equal PEFT's value rounded to nearest even or are one ulp away (and nearly all
// are exact); F32 results lie within a few fp32 ulps of the operands. Then the real adapters of
// tests/fixtures on generated bases of their models' shapes (sampled elements, to stay fast under WASM).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>

#include "adapter_fixtures.h"
#include "adapter/translate.h"
#include "lazy_adapter.h"
#include "merge/merge_engine.h"
#include "merge_reference.h"

namespace pb::merge {
namespace {

namespace ref = testing::merge_ref;
using testing::Bytes;
using testing::VectorSink;

constexpr std::string_view kPrefix = "base_model.model.";

// --- Building files ---------------------------------------------------------------------------------------

uint64_t Count(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

// A tensor to write: explicit values, raw bytes, or uniform pseudo-random values in [-amplitude, amplitude).
struct T {
  std::string name;
  Dtype dtype;
  std::vector<uint64_t> shape;
  float amplitude = 0.05f;
  uint64_t seed = 1;
  std::vector<float> values;  // used when not empty
  Bytes raw;                  // used when not empty

  Bytes Data() const {
    if (!raw.empty()) return raw;
    const uint64_t n = Count(shape);
    std::vector<float> f = values;
    if (f.empty()) {
      testing::Values v(seed);
      f.resize(n);
      for (auto& x : f) x = v.Next() * amplitude;
    }
    Bytes out(n * ref::Width(dtype));
    kernels::ConvertElements(Dtype::F32, dtype, f.data(), out.data(), n);
    return out;
  }
};

// Distinct seeds for the tensors of one file.
std::vector<T> Seeded(std::vector<T> ts, uint64_t seed) {
  for (size_t i = 0; i < ts.size(); ++i) ts[i].seed = seed * 1000 + i + 1;
  return ts;
}

// The file, written through the library's streaming writer one tensor at a time (a large generated base
// never exists twice in memory). kReference orders the data as Python's safetensors does.
Bytes BuildFile(const std::vector<T>& ts, TensorOrder order = TensorOrder::kReference) {
  std::vector<TensorSpec> specs;
  for (const auto& t : ts) specs.push_back({t.name, t.dtype, t.shape});
  auto plan = PlanWrite(specs, Metadata{{"format", "pt"}}, order);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  if (!plan.ok()) return {};
  VectorSink sink;
  sink.bytes.reserve(plan->total_size());
  StreamingWriter writer(plan.value(), sink);
  EXPECT_TRUE(writer.Begin().ok());
  for (const auto& p : writer.plan().tensors) EXPECT_TRUE(writer.Write(ts[p.input_index].Data()).ok());
  EXPECT_TRUE(writer.Finish().ok());
  return std::move(sink.bytes);
}

// LoRA factors of one module in PEFT's keys, F32 unless asked. A [r, in...], B [out, r, 1...].
void AddLora(std::vector<T>& ts, const std::string& module, std::vector<uint64_t> a_shape,
             std::vector<uint64_t> b_shape, float a_amp = 0.3f, float b_amp = 0.1f, Dtype dtype = Dtype::F32) {
  const std::string key = std::string(kPrefix) + module;
  ts.push_back({key + ".lora_A.weight", dtype, std::move(a_shape), a_amp});
  ts.push_back({key + ".lora_B.weight", dtype, std::move(b_shape), b_amp});
}
void AddEmbeddingLora(std::vector<T>& ts, const std::string& module, uint64_t r, uint64_t num, uint64_t dim) {
  const std::string key = std::string(kPrefix) + module;
  ts.push_back({key + ".lora_embedding_A", Dtype::F32, {r, num}, 0.3f});
  ts.push_back({key + ".lora_embedding_B", Dtype::F32, {dim, r}, 0.1f});
}
// A DoRA magnitude vector: uniform in [0.5, 1.5) times `norm`, so m / ||W + dW|| varies from row to row.
// Conv magnitudes are [1, out, 1...] (`shape`); Linear and Embedding ones [out].
void AddMagnitude(std::vector<T>& ts, const std::string& module, uint64_t out, float norm, uint64_t seed,
                  std::vector<uint64_t> shape = {}) {
  testing::Values v(seed);
  std::vector<float> m(out);
  for (auto& x : m) x = (1.0f + 0.5f * v.Next()) * norm;
  if (shape.empty()) shape = {out};
  ts.push_back({std::string(kPrefix) + module + ".lora_magnitude_vector", Dtype::F32, shape, 0, 0, m});
}

// --- Reading files ----------------------------------------------------------------------------------------

// A parsed safetensors file in memory.
class View {
 public:
  explicit View(const Bytes& file) : file_(file), header_(ParseWholeFile(file)) {
    EXPECT_TRUE(header_.ok()) << (header_.ok() ? "" : header_.error().message);
  }
  bool ok() const { return header_.ok(); }
  const Header& header() const { return header_.value(); }
  bool Has(const std::string& name) const { return ok() && header().Find(name).has_value(); }
  TensorInfo Info(const std::string& name) const {
    auto i = header().Find(name);
    EXPECT_TRUE(i.has_value()) << "no tensor `" << name << "`";
    if (!i) std::abort();
    return header().tensor(*i);
  }
  std::vector<uint64_t> Shape(const std::string& name) const {
    TensorInfo t = Info(name);
    return {t.shape.begin(), t.shape.end()};
  }
  Dtype DtypeOf(const std::string& name) const { return Info(name).dtype; }
  std::span<const uint8_t> BytesOf(const std::string& name) const {
    TensorInfo t = Info(name);
    return std::span<const uint8_t>(file_).subspan(header().data_start() + t.begin, t.byte_length());
  }
  std::vector<double> Doubles(const std::string& name) const { return ref::ToDoubles(DtypeOf(name), BytesOf(name)); }
  double At(const std::string& name, uint64_t i) const {
    return ref::LoadAsDouble(DtypeOf(name), BytesOf(name).data(), i);
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> n;
    for (size_t i = 0; i < header().tensor_count(); ++i) n.emplace_back(header().tensor(i).name);
    return n;
  }
  const Bytes& file() const { return file_; }

 private:
  const Bytes& file_;
  Result<Header> header_;
};

// --- Adapters ---------------------------------------------------------------------------------------------

// A PEFT adapter: its files and the canonical form read from them.
struct Lora {
  std::string config;
  Bytes weights;
  std::optional<adapter::Adapter> adapter;
  std::string error;
};

Lora ReadLora(std::string config, Bytes weights, std::optional<adapter::AdapterFormat> format = std::nullopt,
              const std::string& weights_name = "adapter_model.safetensors") {
  Lora l{std::move(config), std::move(weights), std::nullopt, ""};
  adapter::AdapterSource source{weights_name, l.weights, l.config, std::nullopt};
  adapter::ReadOptions options;
  options.format = format;
  auto r = adapter::ReadAdapter(source, options);
  if (r.ok()) {
    l.adapter = std::move(r->adapter);
    if (!r->adapter.rejected.empty()) l.error = "rejected: " + r->adapter.rejected[0].name;
  } else {
    l.error = std::string(ErrorCodeName(r.error().code)) + ": " + r.error().message;
  }
  return l;
}

Lora MakeLora(const std::string& config_fields, const std::vector<T>& tensors) {
  return ReadLora(testing::PeftConfig(config_fields), BuildFile(tensors));
}

// The reference's factors of `module`, read from the adapter file itself (not from the engine's reader).
ref::Factors FactorsOf(const Bytes& adapter_file, const std::string& module, double scaling, bool embedding = false) {
  View v(adapter_file);
  const std::string key = std::string(kPrefix) + module;
  const std::string a = key + (embedding ? ".lora_embedding_A" : ".lora_A.weight");
  const std::string b = key + (embedding ? ".lora_embedding_B" : ".lora_B.weight");
  ref::Factors f;
  f.a = v.Doubles(a);
  f.b = v.Doubles(b);
  f.r = v.Shape(a)[0];
  f.in = f.a.size() / f.r;
  f.out = v.Shape(b)[0];
  f.scale = ref::TensorScale(scaling);
  return f;
}

std::vector<double> MagnitudeOf(const Bytes& adapter_file, const std::string& module) {
  return View(adapter_file).Doubles(std::string(kPrefix) + module + ".lora_magnitude_vector");
}

// --- Running the engine -----------------------------------------------------------------------------------

struct MergeRun {
  std::optional<Error> error;
  std::optional<MergePlan> plan;
  Bytes output;
  bool ok() const { return !error.has_value(); }
  std::string message() const { return error ? std::string(ErrorCodeName(error->code)) + ": " + error->message : ""; }
};

// PlanMerge on the base's header, then ShardMerger pushed the source bytes in plan order, `chunk` bytes at a
// time (0: each tensor's bytes whole, in one push each).
// An adapter whose tensors are references into a blob, and how the test edge supplies their bytes.
struct AdapterFeed {
  const testing::ExternalAdapter* external = nullptr;
  testing::Chunking chunking;
  uint64_t peak = 0;  // the merger's peak_adapter_bytes(), out
};

MergeRun MergeShard(const Bytes& base, const adapter::Adapter& a, const std::optional<std::string>& config,
                    const MergeOptions& options, size_t chunk, AdapterFeed* feed = nullptr, bool forward = false) {
  MergeRun run;
  auto header = ParseWholeFile(base);
  if (!header.ok()) {
    run.error = header.error();
    return run;
  }
  auto plan = PlanMerge({{"model.safetensors", &header.value()}}, a, config, options);
  if (!plan.ok()) {
    run.error = plan.error();
    return run;
  }
  run.plan = std::move(plan.value());
  const ShardPlan& shard = run.plan->shards.at(0);
  VectorSink sink;
  sink.bytes.reserve(shard.write.total_size());
  ShardMerger merger(shard, options, sink);
  auto fail = [&](const Status& s) {
    run.error = s.error();
    return run;
  };
  auto supply = [&]() {
    return feed ? testing::SupplyFrom(merger, feed->external->blob, feed->external->base_offset, feed->chunking)
                : Status::Ok();
  };
  if (Status s = merger.Begin(); !s.ok()) return fail(s);
  if (Status s = supply(); !s.ok()) return fail(s);
  uint64_t expected_source = 0;
  for (const auto& p : shard.tensors)
    if (p.source) expected_source += header->tensor(*p.source).byte_length();
  // forward: the edge SourceRuns describes, writing the unchanged tensors' bytes to the sink itself.
  std::vector<SourceRun> runs;
  if (forward) {
    runs = SourceRuns(shard, header.value(), options);
  } else {
    for (const auto& p : shard.tensors) {
      if (!p.source) continue;
      TensorInfo t = header->tensor(*p.source);
      runs.push_back({header->data_start() + t.begin, header->data_start() + t.end, false});
    }
  }
  for (const SourceRun& r : runs) {
    std::span<const uint8_t> bytes(base.data() + r.begin, r.end - r.begin);
    while (!bytes.empty()) {
      size_t n = chunk == 0 ? bytes.size() : std::min(chunk, bytes.size());
      Status s = Status::Ok();
      if (r.forward) {
        s = sink.Write(bytes.first(n));
        if (s.ok()) s = merger.Forwarded(n);
      } else {
        s = merger.Push(bytes.first(n));
      }
      if (!s.ok()) return fail(s);
      if (Status s = supply(); !s.ok()) return fail(s);
      bytes = bytes.subspan(n);
    }
  }
  if (feed) feed->peak = merger.peak_adapter_bytes();
  EXPECT_EQ(merger.source_bytes(), expected_source);
  EXPECT_EQ(merger.source_consumed(), expected_source);
  if (Status s = merger.Finish(); !s.ok()) return fail(s);
  EXPECT_EQ(sink.bytes.size(), shard.write.total_size());
  run.output = std::move(sink.bytes);
  return run;
}

// StreamingMerger fed the whole base file in pseudo-random chunk sizes (mostly small, some large).
MergeRun MergeStreaming(const Bytes& base, const adapter::Adapter& a, const std::optional<std::string>& config,
                        const MergeOptions& options, uint64_t seed, AdapterFeed* feed = nullptr, bool forward = false) {
  MergeRun run;
  VectorSink sink;
  StreamingMerger merger(a, config, options, sink);
  testing::Values v(seed);
  size_t at = 0;
  while (at < base.size()) {
    const double u = 0.5 * (v.Next() + 1.0);
    size_t n = u < 0.2 ? 1 : u < 0.8 ? 1 + static_cast<size_t>(u * 997) : 1 + static_cast<size_t>(u * 70001);
    n = std::min(n, base.size() - at);
    const std::span<const uint8_t> piece = std::span<const uint8_t>(base).subspan(at, n);
    Status s = Status::Ok();
    if (!forward) {
      s = merger.Feed(piece);
    } else {  // as the JS TransformStream does: the run at a time, unchanged tensors written to the sink directly
      for (size_t done = 0; done < n && s.ok();) {
        const SourceRun r = merger.NextRun();
        EXPECT_EQ(r.begin, at + done);
        const size_t take = r.end > r.begin ? static_cast<size_t>(std::min<uint64_t>(n - done, r.end - r.begin))
                                            : n - done;
        if (r.forward) {
          s = sink.Write(piece.subspan(done, take));
          if (s.ok()) s = merger.Forwarded(take);
        } else {
          s = merger.Feed(piece.subspan(done, take));
        }
        if (s.ok() && feed)
          s = testing::SupplyFrom(merger, feed->external->blob, feed->external->base_offset, feed->chunking);
        done += take;
      }
    }
    if (s.ok() && feed)
      s = testing::SupplyFrom(merger, feed->external->blob, feed->external->base_offset, feed->chunking);
    if (!s.ok()) {
      run.error = s.error();
      return run;
    }
    at += n;
  }
  if (Status s = merger.Finish(); !s.ok()) {
    run.error = s.error();
    return run;
  }
  run.output = std::move(sink.bytes);
  return run;
}

// The merge pushed in chunks of 1, 7 and 4096 bytes, whole tensors, and through StreamingMerger: every way
// must give the same bytes (or the same error). Returns the whole-tensor run.
MergeRun MergeEveryWay(const Bytes& base, const adapter::Adapter& a, const std::optional<std::string>& config,
                       const MergeOptions& options) {
  MergeRun whole = MergeShard(base, a, config, options, 0);
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}}) {
    MergeRun r = MergeShard(base, a, config, options, chunk);
    EXPECT_EQ(r.ok(), whole.ok()) << "chunk " << chunk << ": " << r.message() << whole.message();
    EXPECT_TRUE(r.output == whole.output) << "ShardMerger output differs with " << chunk << "-byte pushes";
    // The unchanged tensors forwarded by the edge (SourceRuns), the rest pushed: the same bytes.
    MergeRun f = MergeShard(base, a, config, options, chunk, nullptr, /*forward=*/true);
    EXPECT_EQ(f.ok(), whole.ok()) << "forwarded, chunk " << chunk << ": " << f.message() << whole.message();
    EXPECT_TRUE(f.output == whole.output)
        << "output differs with unchanged tensors forwarded, " << chunk << "-byte pieces";
  }
  for (uint64_t seed : {1, 2, 3}) {
    MergeRun s = MergeStreaming(base, a, config, options, seed, nullptr, /*forward=*/seed == 3);
    EXPECT_EQ(s.ok(), whole.ok()) << "StreamingMerger: " << s.message() << whole.message();
    if (s.ok() && whole.ok())
      EXPECT_TRUE(s.output == whole.output) << "StreamingMerger output differs from ShardMerger's";
    if (!s.ok() && !whole.ok()) EXPECT_EQ(s.error->message, whole.error->message);
  }
  // The same adapter with every tensor a reference, its bytes supplied on request in 1-byte, whole-range and
  // random pieces: the same bytes, holding at most the largest module's factors at once.
  const testing::ExternalAdapter external = testing::Externalized(a);
  const uint64_t bound = testing::LargestModuleBytes(a);
  for (uint64_t mode : {0, 1, 5}) {
    for (size_t chunk : {size_t{0}, size_t{7}}) {
      AdapterFeed feed{&external, {mode}, 0};
      MergeRun r = MergeShard(base, external.adapter, config, options, chunk, &feed, /*forward=*/mode == 5);
      EXPECT_EQ(r.ok(), whole.ok()) << "referenced adapter, chunking " << mode << ": " << r.message()
                                    << whole.message();
      EXPECT_TRUE(r.output == whole.output) << "referenced adapter: output differs (chunking " << mode << ")";
      if (!r.ok() && !whole.ok()) EXPECT_EQ(r.error->message, whole.error->message);
      if (r.ok()) EXPECT_LE(feed.peak, bound) << "adapter bytes held at once";
    }
    AdapterFeed feed{&external, {mode}, 0};
    MergeRun st = MergeStreaming(base, external.adapter, config, options, mode + 3, &feed, /*forward=*/mode == 1);
    EXPECT_EQ(st.ok(), whole.ok()) << "referenced adapter, streaming: " << st.message() << whole.message();
    EXPECT_TRUE(st.output == whole.output) << "referenced adapter, streaming: output differs";
  }
  // Left factors larger than MergeOptions::factor_block_bytes fetched a block of rows at a time (1 byte: one row
  // per block; 100: a few rows), the merger stopping mid-push for each block: the same bytes (or error).
  for (uint64_t block : {uint64_t{1}, uint64_t{100}}) {
    MergeOptions blocked = options;
    blocked.factor_block_bytes = block;
    for (uint64_t mode : {0, 5}) {
      AdapterFeed feed{&external, {mode}, 0};
      MergeRun r = MergeShard(base, external.adapter, config, blocked, mode == 0 ? 0 : 7, &feed, /*forward=*/mode == 5);
      EXPECT_EQ(r.ok(), whole.ok()) << "blocks of " << block << ": " << r.message() << whole.message();
      EXPECT_TRUE(r.output == whole.output)
          << "factor blocks of " << block << " bytes: output differs (chunking " << mode << ")";
      if (!r.ok() && !whole.ok()) EXPECT_EQ(r.error->message, whole.error->message);
      if (r.ok()) EXPECT_LE(feed.peak, bound) << "adapter bytes held at once";
    }
    AdapterFeed feed{&external, {2}, 0};
    MergeRun st = MergeStreaming(base, external.adapter, config, blocked, block + 7, &feed, /*forward=*/block == 1);
    EXPECT_EQ(st.ok(), whole.ok()) << "blocks of " << block << ", streaming: " << st.message() << whole.message();
    EXPECT_TRUE(st.output == whole.output) << "factor blocks of " << block << " bytes, streaming: output differs";
  }
  return whole;
}

const PlannedTensor* Planned(const MergeRun& run, const std::string& name) {
  if (!run.plan) return nullptr;
  for (const auto& p : run.plan->shards[0].tensors)
    if (p.name == name) return &p;
  return nullptr;
}

// --- Checking the output ----------------------------------------------------------------------------------

enum class Rule {
  kSingleRounding,  // Linear / Conv1D / Conv merge: round(W + dW)
  kDeltaFirst,      // Embedding merge, and PEFT's unmerge: round(W + round_w(dW))
};

// Every element of `name` (or `sample` random ones) in the merged file against PEFT's value, from the base's
// element and the reference delta times `sign` (-1: unmerge).
ref::Tally CheckLowRank(const View& base, const View& merged, const std::string& name, const ref::Factors& f,
                        ref::Layout layout, Rule rule, double sign = 1.0, size_t sample = 0, uint64_t seed = 7) {
  const Dtype wd = base.DtypeOf(name), out = merged.DtypeOf(name);
  const auto shape = base.Shape(name);
  EXPECT_EQ(merged.Shape(name), shape) << name;
  const uint64_t rows = shape[0], cols = Count(shape) / rows;
  ref::Tally tally(out);
  auto check = [&](uint64_t i) {
    const uint64_t row = i / cols, col = i % cols;
    const double w = base.At(name, i);
    const double delta = sign * ref::DeltaAt(f, layout, row, col);
    const double expected = rule == Rule::kSingleRounding ? ref::MergedLinear(w, delta, out)
                                                          : ref::MergedDeltaFirst(w, delta, wd, out);
    const double tol = ref::F32Tolerance(w, ref::DeltaMagnitudeAt(f, layout, row, col), f.r);
    tally.Add(merged.At(name, i), expected, tol, name + "[" + std::to_string(row) + "," + std::to_string(col) + "]");
  };
  if (sample == 0) {
    for (uint64_t i = 0; i < rows * cols; ++i) check(i);
  } else {
    check(0);
    check(rows * cols - 1);
    testing::Values v(seed);
    for (size_t s = 0; s < sample; ++s) {
      const double u = 0.5 * (v.Next() + 1.0);
      check(std::min<uint64_t>(rows * cols - 1, static_cast<uint64_t>(u * static_cast<double>(rows * cols))));
    }
  }
  return tally;
}

// How many elements of `name` PEFT's two rounding rules tell apart on this data (so a check that accepts
// one rule and rejects the other has power).
size_t RulesDisagree(const View& base, const std::string& name, const ref::Factors& f, ref::Layout layout, Dtype out) {
  const auto shape = base.Shape(name);
  const uint64_t rows = shape[0], cols = Count(shape) / rows;
  size_t n = 0;
  for (uint64_t i = 0; i < rows * cols; ++i) {
    const double w = base.At(name, i), d = ref::DeltaAt(f, layout, i / cols, i % cols);
    if (ref::MergedLinear(w, d, out) != ref::MergedDeltaFirst(w, d, base.DtypeOf(name), out)) ++n;
  }
  return n;
}

// DoRA: every element of `name` against (m / ||W + dW||) (W + dW), norms per row or per column.
ref::Tally CheckDora(const View& base, const View& merged, const std::string& name, const ref::Factors& f,
                     ref::Layout layout, const std::vector<double>& magnitude, bool per_column) {
  const auto shape = base.Shape(name);
  const uint64_t rows = shape[0], cols = Count(shape) / rows;
  const std::vector<double> w = base.Doubles(name);
  std::vector<double> factor;
  const std::vector<double> v = ref::DoraValues(w, rows, cols, f, layout, magnitude, per_column, &factor);
  const Dtype out = merged.DtypeOf(name);
  ref::Tally tally(out);
  const double u = std::ldexp(1.0, -24);
  for (uint64_t i = 0; i < rows * cols; ++i) {
    const uint64_t row = i / cols, col = i % cols;
    const double fac = factor[per_column ? col : row];
    const double tol = std::fabs(fac) * ref::F32Tolerance(w[i], ref::DeltaMagnitudeAt(f, layout, row, col), f.r) +
                       8 * u * std::fabs(v[i]);
    tally.Add(merged.At(name, i), ref::RoundTo(v[i], out), tol,
              name + "[" + std::to_string(row) + "," + std::to_string(col) + "]");
  }
  return tally;
}

// Nothing wrong, and (narrow outputs) PEFT's exact bits for nearly every element.
void ExpectPeft(const ref::Tally& t, Dtype out, double min_exact = 0.99) {
  EXPECT_GT(t.total(), 0u);
  EXPECT_EQ(t.bad(), 0u) << t.Summary();
  if (out != Dtype::F32) EXPECT_GE(t.exact_fraction(), min_exact) << t.Summary();
}

// A tensor the merge must pass through untouched (or converted exactly to `out`).
void ExpectPassedThrough(const View& base, const View& merged, const std::string& name) {
  const Dtype in = base.DtypeOf(name), out = merged.DtypeOf(name);
  EXPECT_EQ(merged.Shape(name), base.Shape(name)) << name;
  auto b = base.BytesOf(name);
  if (in == out) {
    EXPECT_TRUE(std::equal(b.begin(), b.end(), merged.BytesOf(name).begin(), merged.BytesOf(name).end())) << name;
    return;
  }
  const uint64_t n = b.size() / ref::Width(in);
  Bytes expected(n * ref::Width(out));
  ASSERT_TRUE(kernels::ConvertElements(in, out, b.data(), expected.data(), n));
  auto m = merged.BytesOf(name);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), m.begin(), m.end())) << name << " not converted exactly";
}

std::string DtypeTrace(Dtype d) { return "base dtype " + std::string(DtypeName(d)); }

// --- Generated models -------------------------------------------------------------------------------------

// One LLaMA-shaped layer: hidden 36 (rows end in a partial SIMD vector), 12-wide k/v, vocab 50.
constexpr uint64_t kHidden = 36, kKv = 12, kVocab = 50, kMlp = 60;
const std::string kQ = "model.layers.0.self_attn.q_proj", kK = "model.layers.0.self_attn.k_proj",
                  kV = "model.layers.0.self_attn.v_proj", kEmbed = "model.embed_tokens";

std::vector<T> LlamaBase(Dtype d, uint64_t seed, bool with_bias = false) {
  std::vector<T> ts = {
      {kEmbed + ".weight", d, {kVocab, kHidden}},
      {"model.layers.0.input_layernorm.weight", d, {kHidden}},
      {kQ + ".weight", d, {kHidden, kHidden}},
      {kK + ".weight", d, {kKv, kHidden}},
      {kV + ".weight", d, {kKv, kHidden}},
      {"model.layers.0.self_attn.o_proj.weight", d, {kHidden, kHidden}},
      {"model.layers.0.mlp.down_proj.weight", d, {kHidden, kMlp}},
      {"model.norm.weight", d, {kHidden}},
      {"lm_head.weight", d, {kVocab, kHidden}},
  };
  if (with_bias) ts.push_back({kQ + ".bias", d, {kHidden}});
  return Seeded(ts, seed);
}

const Dtype kBaseDtypes[] = {Dtype::BF16, Dtype::F16, Dtype::F32};

// --- Linear ----------------------------------------------------------------------------------------------

TEST(MergeNumerics, LinearQAndVProjectionsMatchPeftInEveryDtypeAndChunking) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  AddLora(lt, kV, {4, kHidden}, {kKv, 4});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    const Bytes base = BuildFile(LlamaBase(d, 1));
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(run.plan->modules_matched, 2u);
    EXPECT_EQ(run.plan->tensors_merged, 2u);
    EXPECT_EQ(Planned(run, kQ + ".weight")->op, TensorOp::kLowRank);
    EXPECT_EQ(Planned(run, kQ + ".weight")->orientation, Orientation::kOutIn);
    View b(base), m(run.output);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m.Names(), b.Names());  // same tensors, same data order
    EXPECT_EQ(m.header().metadata(), b.header().metadata());
    for (const auto& module : {kQ, kV}) {
      auto f = FactorsOf(lora.weights, module, 2.0);
      const std::string name = module + ".weight";
      EXPECT_EQ(m.DtypeOf(name), d);
      ExpectPeft(CheckLowRank(b, m, name, f, ref::Layout::kOutIn, Rule::kSingleRounding), d);
      // The data tells PEFT's single rounding from rounding the delta first: the 99% bar has teeth.
      if (d != Dtype::F32) EXPECT_GT(RulesDisagree(b, name, f, ref::Layout::kOutIn, d), Count(b.Shape(name)) / 50);
    }
    for (const auto& name : b.Names())
      if (name != kQ + ".weight" && name != kV + ".weight") ExpectPassedThrough(b, m, name);
  }
}

// SourceRuns: the shard's source bytes in push order, the unchanged tensors marked for the edge to forward; the
// merger refuses forwarded bytes of a tensor it changes (nothing written past them), and a dtype change or
// --quantize means nothing is forwarded.
TEST(MergeForwarding, RunsMarkOnlyUnchangedTensorsAndTheMergerRefusesTheOthers) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  const Bytes base = BuildFile(LlamaBase(Dtype::BF16, 1));
  auto header = ParseWholeFile(base);
  ASSERT_TRUE(header.ok());
  auto plan = PlanMerge({{"model.safetensors", &header.value()}}, *lora.adapter, std::nullopt, {});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const ShardPlan& shard = plan->shards.at(0);
  const std::vector<SourceRun> runs = SourceRuns(shard, header.value(), {});
  uint64_t covered = 0, pushed = 0, at = header->data_start();
  for (const auto& r : runs) {
    EXPECT_EQ(r.begin, at) << "the runs cover the data section in order";
    at = r.end;
    covered += r.end - r.begin;
    if (!r.forward) pushed += r.end - r.begin;
  }
  EXPECT_EQ(covered, header->data_size());
  size_t q = 0;
  for (size_t i = 0; i < header->tensor_count(); ++i)
    if (header->tensor(i).name == kQ + ".weight") q = i;
  EXPECT_EQ(pushed, header->tensor(q).byte_length()) << "only q_proj's weight goes through the merger";
  for (size_t i = 1; i < runs.size(); ++i) EXPECT_NE(runs[i].forward, runs[i - 1].forward) << "adjacent runs coalesce";

  // The merger refuses the changed tensor's bytes as forwarded ones.
  VectorSink sink;
  ShardMerger merger(shard, {}, sink);
  ASSERT_TRUE(merger.Begin().ok());
  for (const auto& r : runs) {
    if (!r.forward) {
      Status s = merger.Forwarded(r.end - r.begin);
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.error().code, ErrorCode::InvalidArgument);
      EXPECT_NE(s.error().message.find(kQ + ".weight"), std::string::npos) << s.error().message;
      break;
    }
    ASSERT_TRUE(merger.Forwarded(r.end - r.begin).ok());
  }

  // The streamed merger: nothing may be forwarded before the header, nor past a forward run's end, nor bytes of
  // the changed tensor; its reader refuses to skip past the data.
  {
    VectorSink streamed;
    StreamingMerger stream(*lora.adapter, std::nullopt, {}, streamed);
    Status early = stream.Forwarded(1);
    ASSERT_FALSE(early.ok());
    EXPECT_EQ(early.error().message, "forwarded bytes before the header");
    ASSERT_TRUE(stream.Feed(std::span<const uint8_t>(base).first(header->data_start())).ok());
    const SourceRun first = stream.NextRun();
    EXPECT_EQ(first.begin, header->data_start());
    EXPECT_EQ(first.forward, runs.front().forward);
    EXPECT_EQ(first.end, runs.front().end);
    if (first.forward) {
      Status past = stream.Forwarded(first.end - first.begin + 1);
      ASSERT_FALSE(past.ok());
      EXPECT_EQ(past.error().message, "forwarded bytes outside a run of unchanged tensors");
    }
  }
  {
    StreamingReader reader;
    Status early = reader.Skip(1);
    ASSERT_FALSE(early.ok());
    EXPECT_EQ(early.error().message, "Skip before the header");
    struct NoEvents : ReaderEvents {
      Status OnHeader(const Header&) override { return Status::Ok(); }
      Status OnTensorData(size_t, uint64_t, std::span<const uint8_t>) override { return Status::Ok(); }
    } events;
    StreamingReader fresh;
    ASSERT_TRUE(fresh.Feed(std::span<const uint8_t>(base).first(header->data_start()), events).ok());
    Status past = fresh.Skip(header->data_size() + 1);
    ASSERT_FALSE(past.ok());
    EXPECT_EQ(past.error().message, "Skip past the last tensor");
    EXPECT_EQ(past.error().offset, header->data_start());
  }

  // Every tensor converted (--dtype) or quantized: nothing is forwarded.
  MergeOptions f32;
  f32.dtype = Dtype::F32;
  auto converted = PlanMerge({{"model.safetensors", &header.value()}}, *lora.adapter, std::nullopt, f32);
  ASSERT_TRUE(converted.ok());
  for (const auto& r : SourceRuns(converted->shards.at(0), header.value(), f32)) EXPECT_FALSE(r.forward);
}

// --- transformers Conv1D (GPT-2) -------------------------------------------------------------------------

std::vector<T> Gpt2Base(Dtype d, uint64_t seed) {
  return Seeded({{"wte.weight", d, {40, 32}},
                 {"wpe.weight", d, {16, 32}},
                 {"h.0.ln_1.weight", d, {32}},
                 {"h.0.attn.c_attn.weight", d, {32, 96}},
                 {"h.0.attn.c_attn.bias", d, {96}},
                 {"h.0.attn.c_proj.weight", d, {32, 32}},
                 {"h.0.attn.c_proj.bias", d, {32}},
                 {"ln_f.weight", d, {32}}},
                seed);
}

TEST(MergeNumerics, Gpt2Conv1DGetsTheTransposedDeltaAndTheAdapterPrefixIsDropped) {
  // GPT2ForSequenceClassification names the body "transformer."; the gpt2 checkpoint does not.
  std::vector<T> lt;
  AddLora(lt, "transformer.h.0.attn.c_attn", {4, 32}, {96, 4});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 16, "fan_in_fan_out": true, "target_modules": ["c_attn"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    const Bytes base = BuildFile(Gpt2Base(d, 2));
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    const PlannedTensor* p = Planned(run, "h.0.attn.c_attn.weight");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->orientation, Orientation::kInOut);
    EXPECT_EQ(p->rows, 32u);
    EXPECT_EQ(p->cols, 96u);
    View b(base), m(run.output);
    auto f = FactorsOf(lora.weights, "transformer.h.0.attn.c_attn", 4.0);
    ExpectPeft(CheckLowRank(b, m, "h.0.attn.c_attn.weight", f, ref::Layout::kInOut, Rule::kSingleRounding), d);
    for (const auto& name : b.Names())
      if (name != "h.0.attn.c_attn.weight") ExpectPassedThrough(b, m, name);
  }
}

TEST(MergeNumerics, SquareConv1DIsTransposedBecauseTheArchitectureTableSaysSo) {
  // c_proj is [32, 32]: the shape cannot tell; the adapter's flag says false (PEFT's shared-config quirk can
  // save either); the base config names GPT-2, whose table says Conv1D.
  std::vector<T> lt;
  AddLora(lt, "transformer.h.0.attn.c_proj", {4, 32}, {32, 4});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "fan_in_fan_out": false, "target_modules": ["c_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  const std::string config = R"({"architectures":["GPT2LMHeadModel"],"model_type":"gpt2"})";
  const Bytes base = BuildFile(Gpt2Base(Dtype::BF16, 3));
  MergeRun run = MergeEveryWay(base, *lora.adapter, config, {});
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run.plan->arch, "gpt2");
  EXPECT_EQ(run.plan->config_json, config);  // nothing to edit: passed through byte for byte
  ASSERT_NE(Planned(run, "h.0.attn.c_proj.weight"), nullptr);
  EXPECT_EQ(Planned(run, "h.0.attn.c_proj.weight")->orientation, Orientation::kInOut);
  View b(base), m(run.output);
  auto f = FactorsOf(lora.weights, "transformer.h.0.attn.c_proj", 2.0);
  ExpectPeft(CheckLowRank(b, m, "h.0.attn.c_proj.weight", f, ref::Layout::kInOut, Rule::kSingleRounding), Dtype::BF16);
  // The untransposed delta would be wrong almost everywhere.
  ref::Tally wrong = CheckLowRank(b, m, "h.0.attn.c_proj.weight", f, ref::Layout::kOutIn, Rule::kSingleRounding);
  EXPECT_GT(wrong.bad(), wrong.total() / 2);
}

TEST(MergeNumerics, SquareWeightWithoutTableFollowsFanInFanOut) {
  // No architecture table knows "blocks.0.proj": with a square weight only the adapter's flag is left.
  const Bytes base =
      BuildFile(Seeded({{"blocks.0.proj.weight", Dtype::F32, {24, 24}}, {"blocks.0.norm", Dtype::F32, {24}}}, 4));
  View b(base);
  for (bool fifo : {false, true}) {
    SCOPED_TRACE(fifo ? "fan_in_fan_out" : "no fan_in_fan_out");
    std::vector<T> lt;
    AddLora(lt, "blocks.0.proj", {4, 24}, {24, 4});
    Lora lora = MakeLora(std::string(R"("r": 4, "lora_alpha": 4, "target_modules": ["proj"], "fan_in_fan_out": )") +
                             (fifo ? "true" : "false"),
                         lt);
    ASSERT_TRUE(lora.adapter) << lora.error;
    MergeRun run = MergeShard(base, *lora.adapter, std::nullopt, {}, 5);
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_FALSE(run.plan->arch.has_value()) << *run.plan->arch;
    const auto layout = fifo ? ref::Layout::kInOut : ref::Layout::kOutIn;
    EXPECT_EQ(Planned(run, "blocks.0.proj.weight")->orientation, fifo ? Orientation::kInOut : Orientation::kOutIn);
    View m(run.output);
    ExpectPeft(CheckLowRank(b, m, "blocks.0.proj.weight", FactorsOf(lora.weights, "blocks.0.proj", 1.0), layout,
                            Rule::kSingleRounding),
               Dtype::F32);
  }
}

// --- Embedding --------------------------------------------------------------------------------------------

TEST(MergeNumerics, EmbeddingRoundsTheDeltaToTheWeightDtypeFirst) {
  std::vector<T> lt;
  AddEmbeddingLora(lt, kEmbed, 4, kVocab, kHidden);
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": ["embed_tokens"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  ASSERT_EQ(lora.adapter->modules.size(), 1u);
  EXPECT_EQ(lora.adapter->modules[0].shape, adapter::LoraShape::kEmbedding);
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    const Bytes base = BuildFile(LlamaBase(d, 5));
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    const PlannedTensor* p = Planned(run, kEmbed + ".weight");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->op, TensorOp::kLowRankEmbedding);
    EXPECT_EQ(p->orientation, Orientation::kInOut);
    View b(base), m(run.output);
    auto f = FactorsOf(lora.weights, kEmbed, 2.0, /*embedding=*/true);
    const std::string name = kEmbed + ".weight";
    ExpectPeft(CheckLowRank(b, m, name, f, ref::Layout::kInOut, Rule::kDeltaFirst), d);
    if (d != Dtype::F32) EXPECT_GT(RulesDisagree(b, name, f, ref::Layout::kInOut, d), Count(b.Shape(name)) / 50);
    for (const auto& n : b.Names())
      if (n != name) ExpectPassedThrough(b, m, n);
  }
}

// --- Conv2d ----------------------------------------------------------------------------------------------

TEST(MergeNumerics, Conv2d3x3And1x1AndConv1d) {
  std::vector<T> lt;
  AddLora(lt, "conv_in", {4, 5, 3, 3}, {8, 4, 1, 1});
  AddLora(lt, "proj", {4, 8, 1, 1}, {6, 4, 1, 1});
  AddLora(lt, "temporal", {4, 4, 3}, {6, 4, 1});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 6, "target_modules": ["conv_in", "proj", "temporal"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    const Bytes base = BuildFile(Seeded({{"conv_in.weight", d, {8, 5, 3, 3}},
                                         {"conv_in.bias", d, {8}},
                                         {"proj.weight", d, {6, 8, 1, 1}},
                                         {"temporal.weight", d, {6, 4, 3}},
                                         {"norm.weight", d, {6}}},
                                        6));
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(Planned(run, "conv_in.weight")->cols, 45u);
    View b(base), m(run.output);
    // [out, in, kh, kw] viewed as [out, in*kh*kw]: dW[o, c] = s * sum_k B[o, k] A[k, c].
    ExpectPeft(CheckLowRank(b, m, "conv_in.weight", FactorsOf(lora.weights, "conv_in", 1.5), ref::Layout::kOutIn,
                            Rule::kSingleRounding),
               d);
    ExpectPeft(CheckLowRank(b, m, "proj.weight", FactorsOf(lora.weights, "proj", 1.5), ref::Layout::kOutIn,
                            Rule::kSingleRounding),
               d);
    ExpectPeft(CheckLowRank(b, m, "temporal.weight", FactorsOf(lora.weights, "temporal", 1.5), ref::Layout::kOutIn,
                            Rule::kSingleRounding),
               d);
    ExpectPassedThrough(b, m, "conv_in.bias");
    ExpectPassedThrough(b, m, "norm.weight");
  }
}

TEST(MergeNumerics, DoraOnConv2dNormalisesEachOutputChannel) {
  // Conv magnitudes are [1, out, 1, 1]; the norm of (W + dW)[o] runs over in x kh x kw.
  std::vector<T> lt;
  AddLora(lt, "conv_in", {4, 5, 3, 3}, {8, 4, 1, 1});
  AddMagnitude(lt, "conv_in", 8, 0.4f, 28, {1, 8, 1, 1});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "use_dora": true, "target_modules": ["conv_in"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    const Bytes base = BuildFile(Seeded({{"conv_in.weight", d, {8, 5, 3, 3}}, {"conv_in.bias", d, {8}}}, 29));
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(Planned(run, "conv_in.weight")->op, TensorOp::kDoraRows);
    View b(base), m(run.output);
    ExpectPeft(CheckDora(b, m, "conv_in.weight", FactorsOf(lora.weights, "conv_in", 2.0), ref::Layout::kOutIn,
                         MagnitudeOf(lora.weights, "conv_in"), /*per_column=*/false),
               d);
  }
}

// --- DoRA ------------------------------------------------------------------------------------------------

TEST(MergeNumerics, DoraOnLinearNormalisesEachOutputRow) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  AddMagnitude(lt, kQ, kHidden, 0.3f, 11);
  AddLora(lt, kV, {4, kHidden}, {kKv, 4});
  AddMagnitude(lt, kV, kKv, 0.3f, 12);
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "use_dora": true, "target_modules": ["q_proj", "v_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    const Bytes base = BuildFile(LlamaBase(d, 7));
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(Planned(run, kQ + ".weight")->op, TensorOp::kDoraRows);
    View b(base), m(run.output);
    for (const auto& module : {kQ, kV}) {
      ref::Tally t = CheckDora(b, m, module + ".weight", FactorsOf(lora.weights, module, 2.0), ref::Layout::kOutIn,
                               MagnitudeOf(lora.weights, module), /*per_column=*/false);
      ExpectPeft(t, d);
      // Evaluated in float64 (kernels::DoraRowsF64): the float64 reference rounded once, in F32 too, for nearly
      // every element (PEFT's float32 evaluation is a few ulps off it; ours was too).
      EXPECT_GE(t.exact_fraction(), 0.99) << t.Summary();
      // Column norms would be a different model.
      ref::Tally wrong = CheckDora(b, m, module + ".weight", FactorsOf(lora.weights, module, 2.0), ref::Layout::kOutIn,
                                   std::vector<double>(kHidden, 0.3), /*per_column=*/true);
      EXPECT_GT(wrong.bad(), wrong.total() / 2);
    }
  }
}

TEST(MergeNumerics, DoraOnConv1DAndEmbeddingNormalisesColumns) {
  // Conv1D [in, out]: one norm per output feature, i.e. per column of the stored weight. Embedding
  // [num, dim]: one norm per embedding dimension, again a column.
  std::vector<T> gt;
  AddLora(gt, "transformer.h.0.attn.c_attn", {4, 32}, {96, 4});
  AddMagnitude(gt, "transformer.h.0.attn.c_attn", 96, 0.15f, 13);
  Lora gpt = MakeLora(
      R"("r": 4, "lora_alpha": 8, "use_dora": true, "fan_in_fan_out": true, "target_modules": ["c_attn"])", gt);
  ASSERT_TRUE(gpt.adapter) << gpt.error;
  std::vector<T> et;
  AddEmbeddingLora(et, kEmbed, 4, kVocab, kHidden);
  AddMagnitude(et, kEmbed, kHidden, 0.2f, 14);
  Lora emb = MakeLora(R"("r": 4, "lora_alpha": 8, "use_dora": true, "target_modules": ["embed_tokens"])", et);
  ASSERT_TRUE(emb.adapter) << emb.error;
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    {
      const Bytes base = BuildFile(Gpt2Base(d, 8));
      MergeRun run = MergeEveryWay(base, *gpt.adapter, std::nullopt, {});
      ASSERT_TRUE(run.ok()) << run.message();
      EXPECT_EQ(Planned(run, "h.0.attn.c_attn.weight")->op, TensorOp::kDoraColumns);
      View b(base), m(run.output);
      ExpectPeft(CheckDora(b, m, "h.0.attn.c_attn.weight", FactorsOf(gpt.weights, "transformer.h.0.attn.c_attn", 2.0),
                           ref::Layout::kInOut, MagnitudeOf(gpt.weights, "transformer.h.0.attn.c_attn"), true),
                 d);
    }
    {
      const Bytes base = BuildFile(LlamaBase(d, 9));
      MergeRun run = MergeEveryWay(base, *emb.adapter, std::nullopt, {});
      ASSERT_TRUE(run.ok()) << run.message();
      EXPECT_EQ(Planned(run, kEmbed + ".weight")->op, TensorOp::kDoraColumns);
      View b(base), m(run.output);
      // DoRA keeps everything in fp32 until the final cast: the embedding's delta is not rounded first.
      ExpectPeft(CheckDora(b, m, kEmbed + ".weight", FactorsOf(emb.weights, kEmbed, 2.0, true), ref::Layout::kInOut,
                           MagnitudeOf(emb.weights, kEmbed), true),
                 d);
    }
  }
}

// --- Scaling: rsLoRA, rank_pattern, alpha_pattern --------------------------------------------------------

TEST(MergeNumerics, PerModuleScalingFromRsloraAndPatterns) {
  // r 4, alpha 8, rsLoRA: s = alpha / sqrt(r). v_proj has rank 2 (rank_pattern), q_proj alpha 3.
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  AddLora(lt, kK, {4, kHidden}, {kKv, 4});
  AddLora(lt, kV, {2, kHidden}, {kKv, 2});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "use_rslora": true, "rank_pattern": {"v_proj": 2},
                          "alpha_pattern": {"q_proj": 3}, "target_modules": ["q_proj", "k_proj", "v_proj"])",
                       lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  const std::map<std::string, double> scaling = {{kQ, 3.0 / 2.0}, {kK, 8.0 / 2.0}, {kV, 8.0 / std::sqrt(2.0)}};
  for (const auto& m : lora.adapter->modules) EXPECT_EQ(m.settings.scaling, scaling.at(m.path)) << m.path;
  for (Dtype d : {Dtype::BF16, Dtype::F32}) {
    SCOPED_TRACE(DtypeTrace(d));
    const Bytes base = BuildFile(LlamaBase(d, 10));
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    View b(base), m(run.output);
    for (const auto& [module, s] : scaling)
      ExpectPeft(CheckLowRank(b, m, module + ".weight", FactorsOf(lora.weights, module, s), ref::Layout::kOutIn,
                              Rule::kSingleRounding),
                 d);
  }
}

// --- lora_B.bias -----------------------------------------------------------------------------------------

TEST(MergeNumerics, LoraBBiasIsScaledAndAddedToTheBaseBias) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  lt.push_back({std::string(kPrefix) + kQ + ".lora_B.bias", Dtype::F32, {kHidden}, 0.05f});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "lora_bias": true, "target_modules": ["q_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  ASSERT_TRUE(lora.adapter->modules[0].b_bias.has_value());
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    const Bytes base = BuildFile(LlamaBase(d, 11, /*with_bias=*/true));
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(Planned(run, kQ + ".bias")->op, TensorOp::kAddBias);
    View b(base), m(run.output), a(lora.weights);
    ExpectPeft(CheckLowRank(b, m, kQ + ".weight", FactorsOf(lora.weights, kQ, 2.0), ref::Layout::kOutIn,
                            Rule::kSingleRounding),
               d);
    // b' = b + lora_B.bias * s, rounded once (PEFT adds in place).
    const auto lb = a.Doubles(std::string(kPrefix) + kQ + ".lora_B.bias");
    ref::Tally t(d);
    for (uint64_t i = 0; i < kHidden; ++i) {
      const double bias = b.At(kQ + ".bias", i), add = 2.0 * lb[i];
      t.Add(m.At(kQ + ".bias", i), ref::RoundTo(bias + add, d),
            4 * std::ldexp(1.0, -24) * (std::fabs(bias) + std::fabs(add)), "bias[" + std::to_string(i) + "]");
    }
    ExpectPeft(t, d, 0.95);
  }
}

// --- A tied lm_head -------------------------------------------------------------------------------------

TEST(MergeNumerics, TiedLmHeadDeltaLandsOnTheStoredEmbedding) {
  // A tied checkpoint stores only the embedding; PEFT's in-place Linear merge into lm_head changes that
  // shared [vocab, dim] tensor: Linear's rule (one rounding), lm_head's [out, in] orientation.
  std::vector<T> lt;
  AddLora(lt, "lm_head", {4, kHidden}, {kVocab, 4});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": ["lm_head"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  const std::string config =
      R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "tie_word_embeddings": true})";
  for (Dtype d : {Dtype::BF16, Dtype::F32}) {
    SCOPED_TRACE(DtypeTrace(d));
    std::vector<T> ts = LlamaBase(d, 33);
    std::erase_if(ts, [](const T& t) { return t.name == "lm_head.weight"; });
    const Bytes base = BuildFile(ts);
    MergeRun run = MergeEveryWay(base, *lora.adapter, config, {});
    ASSERT_TRUE(run.ok()) << run.message();
    const PlannedTensor* p = Planned(run, kEmbed + ".weight");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->op, TensorOp::kLowRank);
    EXPECT_EQ(run.plan->config_json, config);
    View b(base), m(run.output);
    ExpectPeft(CheckLowRank(b, m, kEmbed + ".weight", FactorsOf(lora.weights, "lm_head", 2.0), ref::Layout::kOutIn,
                            Rule::kSingleRounding),
               d);
  }
}

// --- modules_to_save -------------------------------------------------------------------------------------

TEST(MergeNumerics, ModulesToSaveReplacesTheBaseTensorOrIsAdded) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  lt.push_back({std::string(kPrefix) + "score.weight", Dtype::F32, {3, kHidden}, 0.5f});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "task_type": "SEQ_CLS", "modules_to_save": ["score"],
                          "target_modules": ["q_proj"])",
                       lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  ASSERT_EQ(lora.adapter->extras.size(), 1u);
  View a(lora.weights);
  const auto score = a.BytesOf(std::string(kPrefix) + "score.weight");
  {
    // The base has a score head: the adapter's copy replaces it, in the base's dtype and place.
    std::vector<T> ts = LlamaBase(Dtype::BF16, 12);
    ts.push_back({"score.weight", Dtype::BF16, {3, kHidden}, 0.05f, 99});
    const Bytes base = BuildFile(ts);
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(Planned(run, "score.weight")->op, TensorOp::kReplace);
    View b(base), m(run.output);
    EXPECT_EQ(m.Names(), b.Names());
    EXPECT_EQ(m.DtypeOf("score.weight"), Dtype::BF16);
    Bytes expected(score.size() / 2);
    kernels::ConvertElements(Dtype::F32, Dtype::BF16, score.data(), expected.data(), score.size() / 4);
    auto got = m.BytesOf("score.weight");
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), got.begin(), got.end()));
    ExpectPeft(CheckLowRank(b, m, kQ + ".weight", FactorsOf(lora.weights, kQ, 2.0), ref::Layout::kOutIn,
                            Rule::kSingleRounding),
               Dtype::BF16);
  }
  {
    // No score head in the base (a causal-LM checkpoint): it is added, as the adapter stores it, at the end.
    const Bytes base = BuildFile(LlamaBase(Dtype::BF16, 13));
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(Planned(run, "score.weight")->op, TensorOp::kAdd);
    View b(base), m(run.output);
    auto names = m.Names();
    ASSERT_EQ(names.size(), b.Names().size() + 1);
    EXPECT_EQ(names.back(), "score.weight");
    EXPECT_EQ(m.DtypeOf("score.weight"), Dtype::F32);
    EXPECT_EQ(m.Shape("score.weight"), (std::vector<uint64_t>{3, kHidden}));
    auto got = m.BytesOf("score.weight");
    EXPECT_TRUE(std::equal(score.begin(), score.end(), got.begin(), got.end()));
    // With --dtype the addition is converted like everything else.
    MergeOptions o;
    o.dtype = Dtype::BF16;
    MergeRun converted = MergeShard(base, *lora.adapter, std::nullopt, o, 0);
    ASSERT_TRUE(converted.ok()) << converted.message();
    View c(converted.output);
    EXPECT_EQ(c.DtypeOf("score.weight"), Dtype::BF16);
    EXPECT_EQ(c.At("score.weight", 5), ref::RoundTo(a.At(std::string(kPrefix) + "score.weight", 5), Dtype::BF16));
  }
}

// --- trainable tokens ------------------------------------------------------------------------------------

// PEFT's TrainableTokensLayer.merge: W.index_copy(0, indices, rows.to(W.dtype)). The adapter's F32 rows land on
// the listed rows of the embedding, rounded to its dtype once; every other row is the base's, bit for bit.
TEST(MergeNumerics, TrainableTokensReplaceTheListedRowsRoundedToTheWeightDtype) {
  const std::vector<uint64_t> tokens = {3, 41, 7};  // not sorted: row i of the tensor is token tokens[i]
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  lt.push_back({std::string(kPrefix) + kEmbed + ".token_adapter.trainable_tokens_delta",
                Dtype::F32,
                {tokens.size(), kHidden},
                0.7f,
                5});
  Lora lora =
      MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj"], "trainable_token_indices": [3, 41, 7])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  ASSERT_EQ(lora.adapter->extras.size(), 1u);
  EXPECT_EQ(lora.adapter->extras[0].token_indices, tokens);
  View a(lora.weights);
  const std::string rows_key = std::string(kPrefix) + kEmbed + ".token_adapter.trainable_tokens_delta";
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    const Bytes base = BuildFile(LlamaBase(d, 61));
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(Planned(run, kEmbed + ".weight")->op, TensorOp::kReplaceRows);
    View b(base), m(run.output);
    for (uint64_t row = 0; row < kVocab; ++row) {
      auto at = std::find(tokens.begin(), tokens.end(), row);
      for (uint64_t j = 0; j < kHidden; ++j) {
        const double want = at == tokens.end() ? b.At(kEmbed + ".weight", row * kHidden + j)
                                               : ref::RoundTo(a.At(rows_key, (at - tokens.begin()) * kHidden + j), d);
        ASSERT_EQ(m.At(kEmbed + ".weight", row * kHidden + j), want) << "row " << row << " column " << j;
      }
    }
    ExpectPassedThrough(b, m, "lm_head.weight");
    // --dtype: the rows are rounded to the weight's dtype first (PEFT merges in it), then converted.
    MergeOptions o;
    o.dtype = Dtype::F32;
    MergeRun wide = MergeShard(base, *lora.adapter, std::nullopt, o, 0);
    ASSERT_TRUE(wide.ok()) << wide.message();
    View w(wide.output);
    EXPECT_EQ(w.At(kEmbed + ".weight", 41 * kHidden + 2), ref::RoundTo(a.At(rows_key, kHidden + 2), d));
  }
}

// tie_word_embeddings: PEFT ties a wrapper on lm_head to the embedding's token adapter. A base that stores
// the embedding only gets the rows there (one tensor); one that stores both gets them in both, so the pair
// stays equal and tied.
TEST(MergeNumerics, TrainableTokensOfATiedEmbeddingReachTheStoredLmHead) {
  std::vector<T> lt = {
      {std::string(kPrefix) + kEmbed + ".token_adapter.trainable_tokens_delta", Dtype::F32, {2, kHidden}, 0.7f, 8}};
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj"],
                          "trainable_token_indices": {"embed_tokens": [0, 9]})",
                       lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  const std::string config =
      R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "tie_word_embeddings": true})";
  const Bytes both = BuildFile(LlamaBase(Dtype::BF16, 62));
  MergeRun run = MergeEveryWay(both, *lora.adapter, config, {});
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(Planned(run, kEmbed + ".weight")->op, TensorOp::kReplaceRows);
  EXPECT_EQ(Planned(run, "lm_head.weight")->op, TensorOp::kReplaceRows);
  EXPECT_EQ(run.plan->config_json, config);  // both changed alike: still tied
  View m(run.output);
  for (uint64_t j = 0; j < kHidden; ++j)
    EXPECT_EQ(m.At("lm_head.weight", 9 * kHidden + j), m.At(kEmbed + ".weight", 9 * kHidden + j));
  std::vector<T> ts = LlamaBase(Dtype::BF16, 63);
  std::erase_if(ts, [](const T& t) { return t.name == "lm_head.weight"; });
  MergeRun one = MergeEveryWay(BuildFile(ts), *lora.adapter, config, {});
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_EQ(Planned(one, kEmbed + ".weight")->op, TensorOp::kReplaceRows);
}

TEST(MergePlanErrors, TrainableTokensThatCannotBePlacedAreRefused) {
  const std::string key = std::string(kPrefix) + kEmbed + ".token_adapter.trainable_tokens_delta";
  auto lora_with = [&](const std::string& indices, uint64_t rows, bool lora_on_embedding = false) {
    std::vector<T> lt = {{key, Dtype::F32, {rows, kHidden}, 0.7f, 9}};
    if (lora_on_embedding) AddEmbeddingLora(lt, kEmbed, 4, kVocab, kHidden);
    return MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": [")" +
                        std::string(lora_on_embedding ? "embed_tokens" : "q_proj") +
                        R"("], "trainable_token_indices": )" + indices,
                    lt);
  };
  // The config and the tensor disagree: refused when the adapter is read, as PEFT's load would.
  EXPECT_NE(lora_with("[1, 2, 3]", 2).error.find("ShapeMismatch"), std::string::npos);
  EXPECT_NE(lora_with(R"({"lm_head": [1]})", 1).error.find("no entry of trainable_token_indices"), std::string::npos);
  EXPECT_NE(lora_with("[1, -2]", 2).error.find("InvalidConfig"), std::string::npos);
  const Bytes base = BuildFile(LlamaBase(Dtype::BF16, 64));
  auto plan_error = [&](const Lora& l, const MergeOptions& o = {}) {
    EXPECT_TRUE(l.adapter) << l.error;
    if (!l.adapter) return std::string();
    MergeRun run = MergeShard(base, *l.adapter, std::nullopt, o, 0);
    EXPECT_FALSE(run.ok());
    return run.message();
  };
  EXPECT_NE(plan_error(lora_with("[3, 50]", 2)).find("token 50 is outside"), std::string::npos);
  EXPECT_NE(plan_error(lora_with("[3, 3]", 2)).find("listed twice"), std::string::npos);
  EXPECT_NE(plan_error(lora_with("[3]", 1, true)).find("also merged with module"), std::string::npos);
  MergeOptions unmerge;
  unmerge.unmerge = true;
  const std::string refused = plan_error(lora_with("[3]", 1), unmerge);
  EXPECT_NE(refused.find("UnsupportedAdapter"), std::string::npos) << refused;
  EXPECT_NE(refused.find("cannot be unmerged"), std::string::npos) << refused;
}

TEST(MergeNumerics, SavedEmbeddingLayersAreLoadedBeforeTheirLoraIsMerged) {
  // Targeting embed_tokens in list form turns on save_embedding_layers="auto": the adapter then carries the
  // full embedding as `model.embed_tokens.base_layer.weight` next to its LoRA factors. PEFT's load copies it
  // into the base layer (rounded to the model's dtype), and merge_and_unload adds the delta on top
  // (docs/peft-semantics.md: "Tensors beside the LoRA factors", "The delta per layer type").
  std::vector<T> lt;
  AddEmbeddingLora(lt, kEmbed, 4, kVocab, kHidden);
  lt.push_back({std::string(kPrefix) + kEmbed + ".base_layer.weight", Dtype::F32, {kVocab, kHidden}, 0.05f});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": ["embed_tokens"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  ASSERT_EQ(lora.adapter->extras.size(), 1u);
  EXPECT_EQ(lora.adapter->extras[0].kind, adapter::ExtraKind::kSavedEmbedding);
  const Bytes base = BuildFile(LlamaBase(Dtype::BF16, 37));
  MergeRun run = MergeShard(base, *lora.adapter, std::nullopt, {}, 0);
  ASSERT_TRUE(run.ok()) << run.message();
  View a(lora.weights), m(run.output);
  const auto f = FactorsOf(lora.weights, kEmbed, 2.0, true);
  const std::string saved = std::string(kPrefix) + kEmbed + ".base_layer.weight";
  ref::Tally t(Dtype::BF16);
  for (uint64_t i = 0; i < kVocab * kHidden; ++i) {
    const double w = ref::RoundTo(a.At(saved, i), Dtype::BF16);  // load_state_dict into the bf16 parameter
    t.Add(m.At(kEmbed + ".weight", i),
          ref::MergedDeltaFirst(w, ref::DeltaAt(f, ref::Layout::kInOut, i / kHidden, i % kHidden), Dtype::BF16,
                                Dtype::BF16),
          0, "embed");
  }
  ExpectPeft(t, Dtype::BF16);
}

// --- --dtype ---------------------------------------------------------------------------------------------

TEST(MergeNumerics, DtypeConvertsUntouchedTensorsExactlyAndRoundsMergedOnesOnce) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  AddEmbeddingLora(lt, kEmbed, 4, kVocab, kHidden);
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "embed_tokens"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  const auto fq = FactorsOf(lora.weights, kQ, 2.0);
  const auto fe = FactorsOf(lora.weights, kEmbed, 2.0, true);
  for (auto [from, to] : {std::pair{Dtype::BF16, Dtype::F32}, std::pair{Dtype::F32, Dtype::BF16},
                          std::pair{Dtype::F16, Dtype::BF16}, std::pair{Dtype::BF16, Dtype::F16}}) {
    SCOPED_TRACE(std::string(DtypeName(from)) + " -> " + std::string(DtypeName(to)));
    std::vector<T> ts = LlamaBase(from, 14);
    // An integer buffer is no floating-point tensor: copied as is whatever --dtype says.
    Bytes ids;
    for (uint64_t i = 0; i < 8; ++i)
      for (int k = 0; k < 8; ++k) ids.push_back(k == 0 ? static_cast<uint8_t>(i) : 0);
    ts.push_back({"model.position_ids", Dtype::I64, {1, 8}, 0, 0, {}, ids});
    const Bytes base = BuildFile(ts);
    MergeOptions o;
    o.dtype = to;
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, o);
    ASSERT_TRUE(run.ok()) << run.message();
    View b(base), m(run.output);
    for (const auto& name : b.Names()) {
      EXPECT_EQ(m.DtypeOf(name), name == "model.position_ids" ? Dtype::I64 : to) << name;
      if (name != kQ + ".weight" && name != kEmbed + ".weight") ExpectPassedThrough(b, m, name);
    }
    // Merged: PEFT's arithmetic, rounded once to the output dtype (lowrank.h); the embedding's delta is
    // still rounded to the weight's own dtype first.
    ExpectPeft(CheckLowRank(b, m, kQ + ".weight", fq, ref::Layout::kOutIn, Rule::kSingleRounding), to);
    ExpectPeft(CheckLowRank(b, m, kEmbed + ".weight", fe, ref::Layout::kInOut, Rule::kDeltaFirst), to);
  }
}

// --- Unmerge ---------------------------------------------------------------------------------------------

TEST(MergeNumerics, UnmergeOfAnF32MergeReturnsTheOriginal) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  AddEmbeddingLora(lt, kEmbed, 4, kVocab, kHidden);
  lt.push_back({std::string(kPrefix) + kQ + ".lora_B.bias", Dtype::F32, {kHidden}, 0.05f});
  Lora lora =
      MakeLora(R"("r": 4, "lora_alpha": 8, "lora_bias": true, "target_modules": ["q_proj", "embed_tokens"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  const Bytes base = BuildFile(LlamaBase(Dtype::F32, 15, true));
  MergeRun merged = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
  ASSERT_TRUE(merged.ok()) << merged.message();
  MergeOptions o;
  o.unmerge = true;
  MergeRun unmerged = MergeEveryWay(merged.output, *lora.adapter, std::nullopt, o);
  ASSERT_TRUE(unmerged.ok()) << unmerged.message();
  View b(base), m(merged.output), u(unmerged.output);
  const auto fq = FactorsOf(lora.weights, kQ, 2.0), fe = FactorsOf(lora.weights, kEmbed, 2.0, true);
  // Unmerging subtracts the same delta from the merged weights.
  ExpectPeft(CheckLowRank(m, u, kQ + ".weight", fq, ref::Layout::kOutIn, Rule::kDeltaFirst, -1.0), Dtype::F32);
  ExpectPeft(CheckLowRank(m, u, kEmbed + ".weight", fe, ref::Layout::kInOut, Rule::kDeltaFirst, -1.0), Dtype::F32);
  // And lands within a few fp32 ulps of the original weights.
  for (const auto& [name, f, layout] : {std::tuple{kQ + ".weight", &fq, ref::Layout::kOutIn},
                                        std::tuple{kEmbed + ".weight", &fe, ref::Layout::kInOut}}) {
    const auto shape = b.Shape(name);
    ref::Tally t(Dtype::F32);
    for (uint64_t i = 0; i < Count(shape); ++i) {
      const uint64_t row = i / shape[1], col = i % shape[1];
      const double w = b.At(name, i);
      t.Add(u.At(name, i), w, 2 * ref::F32Tolerance(w, ref::DeltaMagnitudeAt(*f, layout, row, col), f->r), name);
    }
    EXPECT_EQ(t.bad(), 0u) << t.Summary();
  }
  for (uint64_t i = 0; i < kHidden; ++i) EXPECT_NEAR(u.At(kQ + ".bias", i), b.At(kQ + ".bias", i), 1e-6) << i;
  for (const auto& name : b.Names())
    if (name != kQ + ".weight" && name != kQ + ".bias" && name != kEmbed + ".weight") ExpectPassedThrough(b, u, name);
}

TEST(MergeNumerics, UnmergeFollowsPeftRoundingTheDeltaToTheWeightDtype) {
  // PEFT's unmerge for every layer type is `weight.data -= delta_weight.to(orig_dtype)`: the delta is rounded
  // to the weight's dtype, then subtracted and rounded again (docs/peft-semantics.md, "Rounding when the delta
  // meets the weight").
  // Its lora_B.bias unmerge, `bias.data -= lora_B.bias * scaling`, rounds once.
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  AddEmbeddingLora(lt, kEmbed, 4, kVocab, kHidden);
  lt.push_back({std::string(kPrefix) + kQ + ".lora_B.bias", Dtype::F32, {kHidden}, 0.05f});
  Lora lora =
      MakeLora(R"("r": 4, "lora_alpha": 8, "lora_bias": true, "target_modules": ["q_proj", "embed_tokens"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  for (Dtype d : {Dtype::BF16, Dtype::F16}) {
    SCOPED_TRACE(DtypeTrace(d));
    const Bytes base = BuildFile(LlamaBase(d, 16, /*with_bias=*/true));
    MergeOptions o;
    o.unmerge = true;
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, o);
    ASSERT_TRUE(run.ok()) << run.message();
    View b(base), m(run.output);
    const auto fq = FactorsOf(lora.weights, kQ, 2.0);
    EXPECT_GT(RulesDisagree(b, kQ + ".weight", fq, ref::Layout::kOutIn, d), Count(b.Shape(kQ + ".weight")) / 50);
    ExpectPeft(CheckLowRank(b, m, kQ + ".weight", fq, ref::Layout::kOutIn, Rule::kDeltaFirst, -1.0), d);
    ExpectPeft(CheckLowRank(b, m, kEmbed + ".weight", FactorsOf(lora.weights, kEmbed, 2.0, true), ref::Layout::kInOut,
                            Rule::kDeltaFirst, -1.0),
               d);
    const auto lb = View(lora.weights).Doubles(std::string(kPrefix) + kQ + ".lora_B.bias");
    ref::Tally t(d);
    for (uint64_t i = 0; i < kHidden; ++i)
      t.Add(m.At(kQ + ".bias", i), ref::RoundTo(b.At(kQ + ".bias", i) - 2.0 * lb[i], d), 0, "bias");
    ExpectPeft(t, d, 0.95);
  }
}

// --- Half-precision factors and a larger matrix ------------------------------------------------------------

TEST(MergeNumerics, HalfPrecisionFactorsAreWidenedAsPeftsDefaultLoadDoes) {
  // A BF16/F16 adapter file: PeftModel.from_pretrained's default autocast_adapter_dtype=True upcasts the
  // LoRA parameters to fp32 before the file's values are copied in (exactly), so the delta is the fp32
  // product of the widened factors, added and rounded once (docs/peft-semantics.md: "The dtype of stored factors",
  // "Rounding when the delta meets the weight"). (Only with
  // autocast_adapter_dtype=False would get_delta_weight round the delta back to the factors' dtype.)
  for (Dtype fd : {Dtype::BF16, Dtype::F16}) {
    std::vector<T> lt;
    AddLora(lt, kQ, {3, kHidden}, {kHidden, 3}, 0.3f, 0.1f, fd);
    Lora lora = MakeLora(R"("r": 3, "lora_alpha": 5, "target_modules": ["q_proj"])", lt);
    ASSERT_TRUE(lora.adapter) << lora.error;
    const auto f = FactorsOf(lora.weights, kQ, 5.0 / 3.0);
    for (Dtype d : kBaseDtypes) {
      SCOPED_TRACE(DtypeTrace(d) + ", factors " + std::string(DtypeName(fd)));
      const Bytes base = BuildFile(LlamaBase(d, 17));
      MergeRun run = MergeShard(base, *lora.adapter, std::nullopt, {}, 0);
      ASSERT_TRUE(run.ok()) << run.message();
      View b(base), m(run.output);
      ExpectPeft(CheckLowRank(b, m, kQ + ".weight", f, ref::Layout::kOutIn, Rule::kSingleRounding), d);
    }
  }
}

TEST(MergeNumerics, LargerMatricesEveryElement) {
  // Rank 16 on [150, 1030] (Linear) and [1030, 150] (Conv1D): several row blocks, column tiles and a
  // partial vector at the end of each row, checked element by element.
  std::vector<T> lt;
  AddLora(lt, "transformer.h.0.attn.c_attn", {16, 1030}, {150, 16}, 0.2f, 0.05f);
  AddLora(lt, "transformer.h.0.mlp.c_fc", {16, 150}, {1030, 16}, 0.2f, 0.05f);
  Lora lora =
      MakeLora(R"("r": 16, "lora_alpha": 24, "fan_in_fan_out": true, "target_modules": ["c_attn", "c_fc"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    // c_attn stored [in, out] = [1030, 150]; c_fc [150, 1030].
    const Bytes base =
        BuildFile(Seeded({{"h.0.attn.c_attn.weight", d, {1030, 150}}, {"h.0.mlp.c_fc.weight", d, {150, 1030}}}, 23));
    MergeRun run = MergeShard(base, *lora.adapter, std::nullopt, {}, 4093);
    ASSERT_TRUE(run.ok()) << run.message();
    MergeRun whole = MergeShard(base, *lora.adapter, std::nullopt, {}, 0);
    EXPECT_TRUE(whole.output == run.output);
    View b(base), m(run.output);
    ExpectPeft(CheckLowRank(b, m, "h.0.attn.c_attn.weight", FactorsOf(lora.weights, "transformer.h.0.attn.c_attn", 1.5),
                            ref::Layout::kInOut, Rule::kSingleRounding),
               d);
    ExpectPeft(CheckLowRank(b, m, "h.0.mlp.c_fc.weight", FactorsOf(lora.weights, "transformer.h.0.mlp.c_fc", 1.5),
                            ref::Layout::kInOut, Rule::kSingleRounding),
               d);
  }
}

// A large factor in blocks: a module whose B is larger than MergeOptions::factor_block_bytes is fetched as A, then one
// block of B's rows at a time as the weight's rows arrive. Held at once: A and one block, not A and B; the output is
// the whole-factor merge's, byte for byte, however the base and the adapter bytes are cut. F32 factors are used as
// fetched; BF16 ones are widened (a block at a time).
TEST(MergeMemory, ALargeLeftFactorIsFetchedABlockOfRowsAtATime) {
  constexpr uint64_t kOut = 512, kIn = 96, kRank = 64, kBlock = 8 << 10;
  for (Dtype factors : {Dtype::F32, Dtype::BF16}) {
    SCOPED_TRACE(DtypeTrace(factors));
    std::vector<T> lt;
    AddLora(lt, kQ, {kRank, kIn}, {kOut, kRank}, 0.3f, 0.1f, factors);
    Lora lora = MakeLora(R"("r": 64, "lora_alpha": 128, "target_modules": ["q_proj"])", lt);
    ASSERT_TRUE(lora.adapter) << lora.error;
    const Bytes base = BuildFile(Seeded({{kQ + ".weight", Dtype::BF16, {kOut, kIn}},
                                         {"model.layers.0.self_attn.o_proj.weight", Dtype::BF16, {kIn, kIn}}},
                                        31));
    const testing::ExternalAdapter external = testing::Externalized(*lora.adapter);
    const uint64_t a_bytes = lora.adapter->modules[0].a.byte_length(),
                   b_bytes = lora.adapter->modules[0].b.byte_length();
    ASSERT_GE(b_bytes, 8 * kBlock);
    MergeOptions whole_options;
    whole_options.factor_block_bytes = 0;
    AdapterFeed whole_feed{&external, {0}, 0};
    MergeRun whole = MergeShard(base, external.adapter, std::nullopt, whole_options, 0, &whole_feed);
    ASSERT_TRUE(whole.ok()) << whole.message();
    EXPECT_EQ(whole_feed.peak, a_bytes + b_bytes);  // the whole-factor path holds both
    // The held adapter (no fetching) agrees, and so does PEFT.
    EXPECT_TRUE(MergeShard(base, *lora.adapter, std::nullopt, {}, 0).output == whole.output);
    View b(base), m(whole.output);
    ExpectPeft(CheckLowRank(b, m, kQ + ".weight", FactorsOf(lora.weights, kQ, 2.0), ref::Layout::kOutIn,
                            Rule::kSingleRounding),
               Dtype::BF16);
    MergeOptions blocked;
    blocked.factor_block_bytes = kBlock;
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{7}, size_t{4093}, size_t{100000}}) {
      for (uint64_t mode : {0, 1, 9}) {
        AdapterFeed feed{&external, {mode}, 0};
        MergeRun r = MergeShard(base, external.adapter, std::nullopt, blocked, chunk, &feed);
        ASSERT_TRUE(r.ok()) << r.message();
        EXPECT_TRUE(r.output == whole.output) << "pushes of " << chunk << " bytes, adapter chunking " << mode;
        EXPECT_LE(feed.peak, a_bytes + kBlock) << "pushes of " << chunk << " bytes, adapter chunking " << mode;
      }
    }
    AdapterFeed feed{&external, {3}, 0};
    MergeRun st = MergeStreaming(base, external.adapter, std::nullopt, blocked, 11, &feed);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(st.output == whole.output);
    // The reads asked for: A, then B's rows block by block, in order, each at most kBlock bytes.
    auto header = ParseWholeFile(base);
    ASSERT_TRUE(header.ok());
    auto plan = PlanMerge({{"model.safetensors", &header.value()}}, external.adapter, std::nullopt, blocked);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    VectorSink sink;
    ShardMerger merger(plan->shards[0], blocked, sink);
    ASSERT_EQ(merger.source_bytes(), base.size() - header->data_start());  // the data, in file order
    ASSERT_TRUE(merger.Begin().ok());
    std::vector<adapter::ByteRange> asked;
    auto serve = [&]() -> Status {
      for (;;) {
        const std::vector<adapter::ByteRange> needs(merger.adapter_needs().begin(), merger.adapter_needs().end());
        if (needs.empty()) return Status::Ok();
        for (const auto& r : needs) {
          asked.push_back(r);
          PB_RETURN_IF_ERROR(merger.SupplyAdapter(
              std::span<const uint8_t>(external.blob).subspan(r.begin - external.base_offset, r.size())));
        }
      }
    };
    ASSERT_TRUE(serve().ok());
    for (uint64_t pos = header->data_start(); pos < base.size(); pos += 4096) {
      ASSERT_TRUE(
          merger.Push(std::span<const uint8_t>(base).subspan(pos, std::min<uint64_t>(4096, base.size() - pos))).ok());
      ASSERT_TRUE(serve().ok());
    }
    ASSERT_TRUE(merger.Finish().ok());
    EXPECT_TRUE(sink.bytes == whole.output);
    const adapter::ByteRange a_range = external.adapter.modules[0].a.ref->range;
    const adapter::ByteRange b_range = external.adapter.modules[0].b.ref->range;
    const uint64_t block_rows = kBlock / (kRank * ref::Width(factors));
    ASSERT_EQ(asked.size(), 1 + (kOut + block_rows - 1) / block_rows);
    EXPECT_EQ(asked[0].begin, a_range.begin);
    EXPECT_EQ(asked[0].end, a_range.end);
    uint64_t at = b_range.begin;
    for (size_t i = 1; i < asked.size(); ++i) {
      EXPECT_EQ(asked[i].begin, at);
      EXPECT_LE(asked[i].size(), kBlock);
      at = asked[i].end;
    }
    EXPECT_EQ(at, b_range.end);
    EXPECT_LE(merger.peak_adapter_bytes(), a_bytes + kBlock);
  }
}

// --- --safe ----------------------------------------------------------------------------------------------

TEST(MergeNumerics, SafeRefusesANonFiniteMergedWeightNamingTheModule) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    std::vector<T> ts = LlamaBase(d, 18);
    for (auto& t : ts) {
      if (t.name != kQ + ".weight" && t.name != kK + ".weight") continue;
      testing::Values v(t.seed);
      t.values.resize(Count(t.shape));
      for (auto& x : t.values) x = 0.05f * v.Next();
      t.values[kHidden + 5] = std::numeric_limits<float>::quiet_NaN();  // row 1, column 5
    }
    const Bytes base = BuildFile(ts);
    MergeOptions safe;
    safe.safe = true;
    MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, safe);
    ASSERT_FALSE(run.ok());
    EXPECT_EQ(run.error->code, ErrorCode::InvalidArgument);
    EXPECT_NE(run.error->message.find(kQ), std::string::npos) << run.error->message;
    EXPECT_NE(run.error->message.find("NaN"), std::string::npos) << run.error->message;
    // Without --safe the NaN is merged like any value (k_proj's NaN, untouched, never matters).
    MergeRun lax = MergeShard(base, *lora.adapter, std::nullopt, {}, 0);
    ASSERT_TRUE(lax.ok()) << lax.message();
    View b(base), m(lax.output);
    EXPECT_TRUE(std::isnan(m.At(kQ + ".weight", kHidden + 5)));
    ref::Tally t = CheckLowRank(b, m, kQ + ".weight", FactorsOf(lora.weights, kQ, 2.0), ref::Layout::kOutIn,
                                Rule::kSingleRounding);
    ExpectPeft(t, d);
    ExpectPassedThrough(b, m, kK + ".weight");
  }
}

TEST(MergeNumerics, SafeRefusesAnOverflowToInfinity) {
  // F16 tops out at 65504: a huge alpha pushes merged weights past it. PEFT's safe_merge checks the merged
  // weight after the cast to the weight's dtype, so the overflow is an error; without --safe it is inf.
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 16000000, "target_modules": ["q_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  const Bytes base = BuildFile(LlamaBase(Dtype::F16, 24));
  MergeOptions safe;
  safe.safe = true;
  MergeRun run = MergeShard(base, *lora.adapter, std::nullopt, safe, 0);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error->message.find(kQ), std::string::npos) << run.error->message;
  MergeRun lax = MergeShard(base, *lora.adapter, std::nullopt, {}, 0);
  ASSERT_TRUE(lax.ok()) << lax.message();
  View b(base), m(lax.output);
  ref::Tally t =
      CheckLowRank(b, m, kQ + ".weight", FactorsOf(lora.weights, kQ, 4e6), ref::Layout::kOutIn, Rule::kSingleRounding);
  ExpectPeft(t, Dtype::F16);
  size_t inf = 0;
  for (uint64_t i = 0; i < kHidden * kHidden; ++i) inf += std::isinf(m.At(kQ + ".weight", i));
  EXPECT_GT(inf, 0u);
}

TEST(MergeNumerics, SafeRefusesADoraRowWithZeroNorm) {
  // A row of W + dW that is all zeros has norm 0: m / 0 = inf, and inf * 0 = NaN in PEFT's merged weight,
  // which safe_merge checks after the DoRA scaling (variants.py merge_safe, then isfinite).
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  AddMagnitude(lt, kQ, kHidden, 0.3f, 25);
  {
    testing::Values v(26);
    std::vector<float> bvals(kHidden * 4);
    for (auto& x : bvals) x = 0.1f * v.Next();
    for (int k = 0; k < 4; ++k) bvals[3 * 4 + k] = 0.0f;  // B row 3: no delta on output 3
    lt[1].values = bvals;
  }
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "use_dora": true, "target_modules": ["q_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  std::vector<T> ts = LlamaBase(Dtype::BF16, 27);
  for (auto& t : ts) {
    if (t.name != kQ + ".weight") continue;
    testing::Values v(t.seed);
    t.values.resize(Count(t.shape));
    for (auto& x : t.values) x = 0.05f * v.Next();
    for (uint64_t j = 0; j < kHidden; ++j) t.values[3 * kHidden + j] = 0.0f;  // W row 3 all zeros
  }
  const Bytes base = BuildFile(ts);
  MergeRun lax = MergeShard(base, *lora.adapter, std::nullopt, {}, 0);
  ASSERT_TRUE(lax.ok()) << lax.message();
  View m(lax.output);
  EXPECT_TRUE(std::isnan(m.At(kQ + ".weight", 3 * kHidden)));  // as PEFT: (m / 0) * 0
  EXPECT_FALSE(std::isnan(m.At(kQ + ".weight", 2 * kHidden)));
  MergeOptions safe;
  safe.safe = true;
  MergeRun run = MergeShard(base, *lora.adapter, std::nullopt, safe, 0);
  ASSERT_FALSE(run.ok()) << "--safe let a NaN produced by the DoRA scaling through (rows)";
  EXPECT_NE(run.error->message.find(kQ), std::string::npos) << run.error->message;
}

TEST(MergeNumerics, SafeRefusesADoraColumnWithZeroNorm) {
  // The same for a Conv1D weight [in, out], whose DoRA norms run down the columns: output 5 gets no delta
  // (B row 5 is zero) and its base column is zero.
  const std::string module = "transformer.h.0.attn.c_attn";
  std::vector<T> lt;
  AddLora(lt, module, {4, 32}, {96, 4});
  AddMagnitude(lt, module, 96, 0.15f, 34);
  {
    testing::Values v(35);
    std::vector<float> bvals(96 * 4);
    for (auto& x : bvals) x = 0.1f * v.Next();
    for (int k = 0; k < 4; ++k) bvals[5 * 4 + k] = 0.0f;
    lt[1].values = bvals;
  }
  Lora lora = MakeLora(
      R"("r": 4, "lora_alpha": 8, "use_dora": true, "fan_in_fan_out": true, "target_modules": ["c_attn"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  std::vector<T> ts = Gpt2Base(Dtype::F32, 36);
  for (auto& t : ts) {
    if (t.name != "h.0.attn.c_attn.weight") continue;
    testing::Values v(t.seed);
    t.values.resize(Count(t.shape));
    for (auto& x : t.values) x = 0.05f * v.Next();
    for (uint64_t i = 0; i < 32; ++i) t.values[i * 96 + 5] = 0.0f;  // column 5 all zeros
  }
  const Bytes base = BuildFile(ts);
  MergeRun lax = MergeShard(base, *lora.adapter, std::nullopt, {}, 0);
  ASSERT_TRUE(lax.ok()) << lax.message();
  View m(lax.output);
  EXPECT_TRUE(std::isnan(m.At("h.0.attn.c_attn.weight", 5)));
  EXPECT_FALSE(std::isnan(m.At("h.0.attn.c_attn.weight", 6)));
  MergeOptions safe;
  safe.safe = true;
  MergeRun run = MergeShard(base, *lora.adapter, std::nullopt, safe, 0);
  ASSERT_FALSE(run.ok()) << "--safe let a NaN produced by the DoRA scaling through (columns)";
  EXPECT_NE(run.error->message.find(module), std::string::npos) << run.error->message;
}

// --- Plan-time errors ------------------------------------------------------------------------------------

TEST(MergePlanErrors, MissingModuleAndShapeMismatchAreReportedTogether) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, 24}, {kHidden, 4});                                      // q_proj is [36, 36]: in 24 does not fit
  AddLora(lt, "model.layers.0.self_attn.x_proj", {4, kHidden}, {kHidden, 4});  // no such tensor
  AddLora(lt, kV, {4, kHidden}, {kKv, 4});                                     // fine
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "x_proj", "v_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  const Bytes base = BuildFile(LlamaBase(Dtype::BF16, 19));
  MergeRun run = MergeShard(base, *lora.adapter, std::nullopt, {}, 0);
  ASSERT_FALSE(run.ok());
  // The missing module gives the code and the headline (2 of 3 found); the mismatch is listed with it.
  EXPECT_EQ(run.error->code, ErrorCode::ModulesNotFound);
  EXPECT_EQ(run.error->message.substr(0, run.error->message.find('\n')),
            "adapter trained on tiny-llama (LlamaForCausalLM): 2 of 3 modules found in the base:");
  ASSERT_EQ(run.error->problems.size(), 2u);
  EXPECT_EQ(run.error->problems[1].code, ErrorCode::ShapeMismatch);
  EXPECT_NE(run.error->message.find(kQ), std::string::npos) << run.error->message;
  EXPECT_NE(run.error->message.find("model.layers.0.self_attn.x_proj"), std::string::npos) << run.error->message;
  EXPECT_EQ(run.error->message.find(kV + "`"), std::string::npos) << run.error->message;
  EXPECT_TRUE(run.output.empty());
  // StreamingMerger fails at the header, before writing anything.
  MergeRun s = MergeStreaming(base, *lora.adapter, std::nullopt, {}, 3);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error->message, run.error->message);
}

TEST(MergePlanErrors, LoraBiasWithoutABaseBiasIsRefused) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  lt.push_back({std::string(kPrefix) + kQ + ".lora_B.bias", Dtype::F32, {kHidden}, 0.05f});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "lora_bias": true, "target_modules": ["q_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  MergeRun run = MergeShard(BuildFile(LlamaBase(Dtype::BF16, 20)), *lora.adapter, std::nullopt, {}, 0);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error->message.find(kQ + ".bias"), std::string::npos) << run.error->message;
}

TEST(MergePlanErrors, DoraUnmergeIsRefused) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  AddMagnitude(lt, kQ, kHidden, 0.3f, 21);
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "use_dora": true, "target_modules": ["q_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  MergeOptions o;
  o.unmerge = true;
  MergeRun run = MergeShard(BuildFile(LlamaBase(Dtype::BF16, 22)), *lora.adapter, std::nullopt, o, 0);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error->message.find("DoRA"), std::string::npos) << run.error->message;
  EXPECT_NE(run.error->message.find(kQ), std::string::npos) << run.error->message;
}

TEST(MergePlanErrors, QuantizedBaseWeightsAreRefusedNamingModuleTensorAndScheme) {
  const std::string kO = "model.layers.0.self_attn.o_proj", kDown = "model.layers.0.mlp.down_proj";
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  AddLora(lt, kK, {4, kHidden}, {kKv, 4});
  AddLora(lt, kV, {4, kHidden}, {kKv, 4});
  AddLora(lt, kO, {4, kHidden}, {kHidden, 4});
  AddLora(lt, kDown, {4, kMlp}, {kHidden, 4});
  Lora lora = MakeLora(
      R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "down_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  auto zeros = [](Dtype d, std::vector<uint64_t> shape) { return Bytes(Count(shape) * DtypeBits(d) / 8, 0); };
  std::vector<T> ts;
  for (T t : LlamaBase(Dtype::BF16, 30)) {
    if (t.name == kQ + ".weight")
      t.dtype = Dtype::F8_E4M3, t.raw = zeros(Dtype::F8_E4M3, t.shape);                    // compressed-tensors FP8
    if (t.name == kK + ".weight") t.dtype = Dtype::I8, t.raw = zeros(Dtype::I8, t.shape);  // bitsandbytes LLM.int8
    if (t.name == kO + ".weight") continue;  // pack-quantized: no `.weight`
    ts.push_back(t);
  }
  ts.push_back({kQ + ".weight_scale", Dtype::BF16, {kHidden, 1}});
  ts.push_back({kK + ".SCB", Dtype::F32, {kKv}});
  ts.push_back({kV + ".weight_scale_inv", Dtype::F32, {1, 1}});  // fine-grained FP8's scales: its weight is quantized
  ts.push_back(
      {kO + ".weight_packed", Dtype::I32, {kHidden, kHidden / 8}, 0, 0, {}, zeros(Dtype::I32, {kHidden, kHidden / 8})});
  ts.push_back({kO + ".weight_scale", Dtype::BF16, {kHidden, 1}});
  const Bytes base = BuildFile(ts);
  // Before: the delta was added to FP8 / integer codes (or the module not found) and the merge "succeeded".
  MergeRun run = MergeShard(base, *lora.adapter, std::nullopt, {}, 0);
  ASSERT_FALSE(run.ok()) << "a merge into quantized weights went through";
  EXPECT_EQ(run.error->code, ErrorCode::UnsupportedBase) << run.message();
  ASSERT_EQ(run.error->problems.size(), 4u) << run.message();
  std::map<std::string, std::string> by_module;
  for (const auto& p : run.error->problems) {
    EXPECT_EQ(p.code, ErrorCode::UnsupportedBase) << p.message;
    by_module[p.module.value_or("")] = p.message;
  }
  const std::string tail = "; merging into a quantized weight would lose the delta: merge into the unquantized model, "
                           "then quantize the merge (--quantize)";
  EXPECT_EQ(by_module[kQ], "adapter module `" + kQ + "`: base tensor `" + kQ +
                               ".weight` is quantized "
                               "(compressed-tensors: stored as F8_E4M3, `" +
                               kQ + ".weight_scale` beside it)" + tail);
  EXPECT_EQ(by_module[kK], "adapter module `" + kK + "`: base tensor `" + kK +
                               ".weight` is quantized "
                               "(bitsandbytes LLM.int8: stored as I8, `" +
                               kK + ".SCB` beside it)" + tail);
  EXPECT_EQ(by_module[kV], "adapter module `" + kV + "`: base tensor `" + kV +
                               ".weight` is quantized "
                               "(fine-grained FP8: `" +
                               kV + ".weight_scale_inv` beside it)" + tail);
  EXPECT_EQ(by_module[kO], "adapter module `" + kO + "`: base tensor `" + kO +
                               ".weight_packed` is "
                               "quantized (compressed-tensors: stored as I32, `" +
                               kO + ".weight_scale` beside it)" + tail);
  EXPECT_EQ(run.error->message.find(kDown), std::string::npos) << "down_proj is BF16: merged, not refused";
  // config.json's quantization_config names the scheme.
  MergeRun named = MergeShard(
      base, *lora.adapter,
      std::string(
          R"({"model_type": "llama", "quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized"}})"),
      {}, 0);
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.error->message.find("`" + kQ +
                                      ".weight` is quantized (compressed-tensors float-quantized: stored as F8_E4M3"),
            std::string::npos)
      << named.error->message;
}

TEST(MergePlanErrors, AdapterTensorsTheMergeCannotApplyAreRefusedUnlessAllowPartial) {
  std::vector<T> lt;
  AddLora(lt, kQ, {4, kHidden}, {kHidden, 4});
  lt.push_back({std::string(kPrefix) + "model.layers.0.self_attn.rotary_emb.inv_freq", Dtype::F32, {8}});
  Lora lora = MakeLora(R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj"])", lt);
  ASSERT_TRUE(lora.adapter) << lora.error;
  ASSERT_EQ(lora.adapter->rejected.size(), 1u);
  const Bytes base = BuildFile(LlamaBase(Dtype::BF16, 31));
  // Before: PlanMerge merged the rest and only the CLIs refused; the JS API wrote the model.
  MergeRun run = MergeShard(base, *lora.adapter, std::nullopt, {}, 0);
  ASSERT_FALSE(run.ok()) << "a tensor the merge cannot apply was dropped silently";
  EXPECT_EQ(run.error->code, ErrorCode::UnresolvedTensor);
  EXPECT_NE(run.error->message.find("merge would drop 1 tensor(s); pass --allow-partial"), std::string::npos)
      << run.message();
  EXPECT_NE(run.error->message.find("model.layers.0.self_attn.rotary_emb.inv_freq"), std::string::npos)
      << run.message();
  MergeOptions partial;
  partial.allow_partial = true;
  MergeRun merged = MergeShard(base, *lora.adapter, std::nullopt, partial, 0);
  ASSERT_TRUE(merged.ok()) << merged.message();
  EXPECT_EQ(merged.plan->modules_matched, 1u);
}

// --- The real adapters of tests/fixtures ------------------------------------------------------------

std::optional<std::filesystem::path> Fixture(const std::string& dir) {
  auto root = testing::FixturesDir();
  if (!root || !std::filesystem::is_directory(*root / dir)) return std::nullopt;
  return *root / dir;
}

std::string Text(const std::filesystem::path& p) {
  Bytes b = testing::ReadAll(p);
  return std::string(b.begin(), b.end());
}

// How many of `sample` random elements of `name` the merge changed (a delta too small to move any weight
// would make the comparison vacuous).
size_t Changed(const View& base, const View& merged, const std::string& name, size_t sample) {
  const uint64_t n = Count(base.Shape(name));
  testing::Values v(5);
  size_t changed = 0;
  for (size_t s = 0; s < sample; ++s) {
    const uint64_t i =
        std::min<uint64_t>(n - 1, static_cast<uint64_t>(0.5 * (v.Next() + 1.0) * static_cast<double>(n)));
    if (base.At(name, i) != merged.At(name, i)) ++changed;
  }
  return changed;
}

TEST(MergeFixtures, PeftGpt2SeqClsIntoAGpt2ShapedBase) {
  auto dir = Fixture("peft-gpt2-seqcls-cattn-cproj");
  if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  Lora lora = ReadLora(Text(*dir / "adapter_config.json"), testing::ReadAll(*dir / "adapter_model.safetensors"));
  ASSERT_TRUE(lora.adapter) << lora.error;
  ASSERT_EQ(lora.adapter->modules.size(), 36u);
  // The gpt2 checkpoint's names (no "transformer."), F16 to keep the 12 layers at ~110 MB; the vocabulary is
  // cut to 1000 rows since no module touches it.
  std::vector<T> ts = {{"wte.weight", Dtype::F16, {1000, 768}}, {"wpe.weight", Dtype::F16, {64, 768}}};
  for (int l = 0; l < 12; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    ts.push_back({h + "ln_1.weight", Dtype::F16, {768}});
    ts.push_back({h + "attn.c_attn.weight", Dtype::F16, {768, 2304}});
    ts.push_back({h + "attn.c_attn.bias", Dtype::F16, {2304}});
    ts.push_back({h + "attn.c_proj.weight", Dtype::F16, {768, 768}});
    ts.push_back({h + "mlp.c_proj.weight", Dtype::F16, {3072, 768}});
  }
  ts.push_back({"ln_f.weight", Dtype::F16, {768}});
  for (auto& t : ts) t.amplitude = 0.02f;  // GPT-2's weight scale, small enough for the deltas to show
  const Bytes base = BuildFile(Seeded(ts, 30), TensorOrder::kInput);
  const std::string config = R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768})";
  MergeRun run = MergeShard(base, *lora.adapter, config, {}, 0);
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run.plan->arch, "gpt2");
  EXPECT_EQ(run.plan->modules_matched, 36u);
  EXPECT_EQ(run.plan->tensors_merged, 36u);
  View b(base), m(run.output);
  ASSERT_TRUE(m.ok());
  for (int l = 0; l < 12; ++l) {
    for (const char* mod : {"attn.c_attn", "attn.c_proj", "mlp.c_proj"}) {
      const std::string name = "h." + std::to_string(l) + "." + mod + ".weight";
      SCOPED_TRACE(name);
      ASSERT_EQ(Planned(run, name)->orientation, Orientation::kInOut);
      auto f = FactorsOf(lora.weights, "transformer.h." + std::to_string(l) + "." + mod, 32.0 / 8.0);
      ref::Tally t = CheckLowRank(b, m, name, f, ref::Layout::kInOut, Rule::kSingleRounding, 1.0, 300, l + 1);
      ExpectPeft(t, Dtype::F16);
      EXPECT_GT(Changed(b, m, name, 300), 30u);
    }
  }
  // score.weight (modules_to_save) is not in the gpt2 checkpoint: added as the adapter has it.
  auto names = m.Names();
  EXPECT_EQ(names.back(), "score.weight");
  View a(lora.weights);
  auto want = a.BytesOf("base_model.model.score.weight"), got = m.BytesOf("score.weight");
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin(), got.end()));
  for (const char* n : {"wte.weight", "h.3.attn.c_attn.bias", "h.11.ln_1.weight", "ln_f.weight"})
    ExpectPassedThrough(b, m, n);
}

TEST(MergeFixtures, PeftRobertaSeqClsIntoARobertaShapedBase) {
  auto dir = Fixture("peft-roberta-seqcls-query-value");
  if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  Lora lora = ReadLora(Text(*dir / "adapter_config.json"), testing::ReadAll(*dir / "adapter_model.safetensors"));
  ASSERT_TRUE(lora.adapter) << lora.error;
  ASSERT_EQ(lora.adapter->modules.size(), 24u);
  // The adapter's paths are RobertaForSequenceClassification's ("roberta.encoder.layer.N.attention.self.query");
  // roberta-base's checkpoint (RobertaForMaskedLM) has the same "roberta." names and an lm_head, no classifier.
  std::vector<T> ts = {{"roberta.embeddings.word_embeddings.weight", Dtype::F32, {500, 768}},
                       {"roberta.embeddings.LayerNorm.weight", Dtype::F32, {768}}};
  for (int l = 0; l < 12; ++l) {
    const std::string p = "roberta.encoder.layer." + std::to_string(l) + ".attention.";
    ts.push_back({p + "self.query.weight", Dtype::F32, {768, 768}});
    ts.push_back({p + "self.query.bias", Dtype::F32, {768}});
    ts.push_back({p + "self.value.weight", Dtype::F32, {768, 768}});
    ts.push_back({p + "output.LayerNorm.weight", Dtype::F32, {768}});
  }
  ts.push_back({"lm_head.dense.weight", Dtype::F32, {768, 768}});
  const Bytes base = BuildFile(Seeded(ts, 31));
  MergeRun run = MergeShard(base, *lora.adapter, std::nullopt, {}, 0);
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run.plan->arch, "roberta");
  View b(base), m(run.output);
  ASSERT_TRUE(m.ok());
  for (int l = 0; l < 12; ++l) {
    for (const char* mod : {"query", "value"}) {
      const std::string module = "roberta.encoder.layer." + std::to_string(l) + ".attention.self." + mod;
      SCOPED_TRACE(module);
      EXPECT_EQ(Planned(run, module + ".weight")->orientation, Orientation::kOutIn);
      auto f = FactorsOf(lora.weights, module, 16.0 / 8.0);
      ExpectPeft(CheckLowRank(b, m, module + ".weight", f, ref::Layout::kOutIn, Rule::kSingleRounding, 1.0, 300, l + 7),
                 Dtype::F32);
      EXPECT_GT(Changed(b, m, module + ".weight", 300), 250u);
    }
  }
  // The classification head (modules_to_save) is added: four tensors, as stored.
  View a(lora.weights);
  for (const char* n :
       {"classifier.dense.weight", "classifier.dense.bias", "classifier.out_proj.weight", "classifier.out_proj.bias"}) {
    ASSERT_TRUE(m.Has(n)) << n;
    auto want = a.BytesOf(std::string(kPrefix) + n), got = m.BytesOf(n);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin(), got.end())) << n;
  }
  EXPECT_EQ(m.Names().size(), b.Names().size() + 4);
  ExpectPassedThrough(b, m, "lm_head.dense.weight");
  ExpectPassedThrough(b, m, "roberta.encoder.layer.5.attention.self.query.bias");
}

TEST(MergeFixtures, MlxQwenAdapterIntoQwen2Layers20To23) {
  auto dir = Fixture("mlx-lm-qwen2.5-0.5b");
  if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  const std::string config_text = Text(*dir / "adapter_config.json");
  Lora lora = ReadLora(config_text, testing::ReadAll(*dir / "adapters.safetensors"), adapter::AdapterFormat::kMlx,
                       "adapters.safetensors");
  ASSERT_TRUE(lora.adapter) << lora.error;
  ASSERT_EQ(lora.adapter->modules.size(), 8u);
  // mlx-lm: y = x W^T + scale * (x @ lora_a) @ lora_b, lora_a [in, r], lora_b [r, out]; scale is the final
  // multiplier (lora_parameters.scale). The reference reads the mlx tensors directly.
  const double scale = nlohmann::json::parse(config_text)["lora_parameters"]["scale"].get<double>();
  EXPECT_EQ(scale, 10.0);
  View a(lora.weights);
  std::vector<T> ts;
  for (int l = 20; l < 24; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    ts.push_back({p + "input_layernorm.weight", Dtype::BF16, {896}});
    ts.push_back({p + "self_attn.q_proj.weight", Dtype::BF16, {896, 896}});
    ts.push_back({p + "self_attn.q_proj.bias", Dtype::BF16, {896}});
    ts.push_back({p + "self_attn.k_proj.weight", Dtype::BF16, {128, 896}});
    ts.push_back({p + "self_attn.v_proj.weight", Dtype::BF16, {128, 896}});
  }
  for (auto& t : ts) t.amplitude = 0.03f;
  const Bytes base = BuildFile(Seeded(ts, 32));
  const std::string qwen =
      R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "tie_word_embeddings": true})";
  MergeRun run = MergeShard(base, *lora.adapter, qwen, {}, 4096);
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run.plan->arch, "qwen2");
  EXPECT_EQ(run.plan->tensors_merged, 8u);
  View b(base), m(run.output);
  ASSERT_TRUE(m.ok());
  for (int l = 20; l < 24; ++l) {
    for (const char* mod : {"q_proj", "v_proj"}) {
      const std::string module = "model.layers." + std::to_string(l) + ".self_attn." + mod;
      SCOPED_TRACE(module);
      const auto la = a.Doubles(module + ".lora_a"), lb = a.Doubles(module + ".lora_b");
      const auto sa = a.Shape(module + ".lora_a"), sb = a.Shape(module + ".lora_b");
      ref::Factors f;  // PEFT orientation: A = lora_a^T [r, in], B = lora_b^T [out, r]
      f.r = sa[1];
      f.in = sa[0];
      f.out = sb[1];
      f.scale = ref::TensorScale(scale);
      f.a.resize(f.r * f.in);
      f.b.resize(f.out * f.r);
      for (size_t i = 0; i < f.in; ++i)
        for (size_t k = 0; k < f.r; ++k) f.a[k * f.in + i] = la[i * f.r + k];
      for (size_t k = 0; k < f.r; ++k)
        for (size_t o = 0; o < f.out; ++o) f.b[o * f.r + k] = lb[k * f.out + o];
      const std::string name = module + ".weight";
      ExpectPeft(CheckLowRank(b, m, name, f, ref::Layout::kOutIn, Rule::kSingleRounding, 1.0, 400, l), Dtype::BF16);
      EXPECT_GT(Changed(b, m, name, 300), 30u);
    }
  }
  ExpectPassedThrough(b, m, "model.layers.21.self_attn.k_proj.weight");
  ExpectPassedThrough(b, m, "model.layers.22.self_attn.q_proj.bias");
}

// --- LoRA on fused MoE experts (PEFT's target_parameters) ---------------------------------------------------

// Three experts, r = 2: gate_up_proj [E, 2·I, H] = [3, 6, 4], down_proj [E, H, I] = [3, 4, 3]. PEFT's keys nest
// (gate_up_proj, registered first, is the inner wrapper: `.base_layer.`); A [r·E, in], B [out, r·E].
constexpr uint64_t kExperts = 3, kExpertR = 2, kExpertH = 4, kExpertI = 3;
const std::string kExpertsHolder = "model.layers.0.mlp.experts";

Lora ExpertsLora(Dtype factors = Dtype::F32) {
  std::vector<T> lt;
  AddLora(lt, kExpertsHolder + ".base_layer", {kExpertR * kExperts, kExpertH}, {2 * kExpertI, kExpertR * kExperts},
          0.3f, 0.1f, factors);
  AddLora(lt, kExpertsHolder, {kExpertR * kExperts, kExpertI}, {kExpertH, kExpertR * kExperts}, 0.3f, 0.1f, factors);
  return MakeLora(R"("r": 2, "lora_alpha": 4, "target_modules": ["q_proj"], "alpha_pattern": {"down_proj": 8},
                     "target_parameters": ["mlp.experts.down_proj", "mlp.experts.gate_up_proj"])",
                  Seeded(lt, 71));
}

// PEFT's ParamWrapper merge of expert e, emulated in the kernels' fp32 order: delta = (Σ_k ascending of
// B[p, k·E + e] · A[e·r + k, q]) · s, rounded to the weight's dtype, added, rounded (`param += delta.to(dtype)`).
// `transposed`: the parameter is [E, in, out] and gets the transposed delta.
std::vector<float> ExpertsReference(const View& adapter_file, const std::string& key_module, const View& base,
                                    const std::string& name, float scale, bool transposed, Dtype d) {
  const std::string key = std::string(kPrefix) + key_module;
  const std::vector<double> a = adapter_file.Doubles(key + ".lora_A.weight"),
                            b = adapter_file.Doubles(key + ".lora_B.weight");
  const auto shape = base.Shape(name);
  const uint64_t p_rows = shape[1], q_cols = shape[2];
  const uint64_t in = transposed ? p_rows : q_cols, bc = kExpertR * kExperts;
  std::vector<float> out;
  for (uint64_t e = 0; e < kExperts; ++e)
    for (uint64_t p = 0; p < p_rows; ++p)
      for (uint64_t q = 0; q < q_cols; ++q) {
        const uint64_t o = transposed ? q : p, i = transposed ? p : q;
        float sum = 0;
        for (uint64_t k = 0; k < kExpertR; ++k)
          sum = sum +
                static_cast<float>(b[o * bc + k * kExperts + e]) * static_cast<float>(a[(e * kExpertR + k) * in + i]);
        float delta = sum * scale;
        float rounded;  // to the weight's dtype
        Bytes one(ref::Width(d));
        kernels::ConvertElements(Dtype::F32, d, &delta, one.data(), 1);
        kernels::ConvertElements(d, Dtype::F32, one.data(), &rounded, 1);
        float w = static_cast<float>(base.At(name, (e * p_rows + p) * q_cols + q));
        float sumw = w + rounded;
        kernels::ConvertElements(Dtype::F32, d, &sumw, one.data(), 1);
        kernels::ConvertElements(d, Dtype::F32, one.data(), &sumw, 1);
        out.push_back(sumw);
      }
  return out;
}

TEST(MergeExperts, NestedKeysAreReadAsTheFusedParametersTheyWrap) {
  Lora lora = ExpertsLora();
  ASSERT_TRUE(lora.adapter) << lora.error;
  ASSERT_EQ(lora.adapter->modules.size(), 2u);
  for (const auto& m : lora.adapter->modules) {
    ASSERT_TRUE(m.experts) << m.path;
    EXPECT_EQ(m.shape, adapter::LoraShape::kExperts);
    EXPECT_EQ(m.experts->num_experts, kExperts);
    EXPECT_EQ(m.rank(), kExpertR);
    EXPECT_EQ(m.experts->wrapped, (std::vector<std::string>{"gate_up_proj", "down_proj"}));
    const bool inner = m.path.ends_with(".base_layer");
    EXPECT_EQ(m.experts->depth, inner ? 1u : 0u);
    EXPECT_EQ(m.experts->parameter_path, kExpertsHolder + (inner ? ".gate_up_proj" : ".down_proj"));
    // r and alpha as PEFT resolves them for the parameter's path (alpha_pattern "down_proj").
    EXPECT_EQ(m.settings.scaling, inner ? 2.0 : 4.0);
  }
  // Bare entries, as PEFT's own conversion of MLP targets writes them ("down_proj"): a module target_modules wraps
  // as a module (q_proj, whose LoRA keys look like an outer wrapper's) keeps its Linear LoRA.
  {
    std::vector<T> lt;
    AddLora(lt, "model.layers.0.self_attn.q_proj", {2, 4}, {4, 2});
    AddLora(lt, kExpertsHolder, {kExpertR * kExperts, kExpertI}, {kExpertH, kExpertR * kExperts});
    Lora bare =
        MakeLora(R"("r": 2, "lora_alpha": 4, "target_modules": ["q_proj"], "target_parameters": ["down_proj"])", lt);
    ASSERT_TRUE(bare.adapter) << bare.error;
    ASSERT_EQ(bare.adapter->modules.size(), 2u);
    for (const auto& m : bare.adapter->modules) EXPECT_EQ(m.experts.has_value(), m.path == kExpertsHolder) << m.path;
  }
  // A parameter registration order peft-bridge does not know is refused tensor by tensor, with the reason.
  std::vector<T> lt;
  AddLora(lt, kExpertsHolder + ".base_layer", {6, 4}, {6, 6});
  AddLora(lt, kExpertsHolder, {6, 3}, {4, 6});
  Lora unknown = MakeLora(R"("r": 2, "lora_alpha": 4, "target_parameters": ["experts.w_in", "experts.w_out"])", lt);
  ASSERT_TRUE(unknown.adapter) << unknown.error;
  EXPECT_TRUE(unknown.adapter->modules.empty());
  ASSERT_EQ(unknown.adapter->rejected.size(), 4u);
  EXPECT_NE(unknown.adapter->rejected[0].reason.find("registers them"), std::string::npos)
      << unknown.adapter->rejected[0].reason;
}

TEST(MergeExperts, TranslateKeepsThemForPeftAndRefusesThemPerTensorElsewhere) {
  Lora lora = ExpertsLora();
  ASSERT_TRUE(lora.adapter) << lora.error;
  adapter::AdapterSource source{"adapter_model.safetensors", lora.weights, lora.config, std::nullopt};
  auto peft = adapter::Translate(source, adapter::AdapterFormat::kPeft, {}, {});
  ASSERT_TRUE(peft.ok()) << peft.error().message;
  for (const auto& m : peft->plan) EXPECT_EQ(m.from, m.to) << m.reason;
  for (auto format : {adapter::AdapterFormat::kMlx, adapter::AdapterFormat::kKohya}) {
    // Every tensor would be dropped: refused, unless allow_partial (--allow-partial), which lists them.
    auto refused = adapter::Translate(source, format, {}, {});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::UnresolvedTensor);
    EXPECT_NE(refused.error().message.find("translate would drop 4 tensor(s)"), std::string::npos)
        << refused.error().message;
    adapter::WriteOptions partial;
    partial.allow_partial = true;
    auto t = adapter::Translate(source, format, {}, partial);
    ASSERT_TRUE(t.ok()) << t.error().message;
    ASSERT_EQ(t->plan.size(), 4u);
    for (const auto& m : t->plan) {
      EXPECT_TRUE(m.to.empty()) << m.from;
      EXPECT_NE(m.reason.find("fused experts parameter (`" + kExpertsHolder), std::string::npos) << m.reason;
    }
  }
}

TEST(MergeExperts, FusedAndPerExpertBasesGetPeftsParamWrapperMerge) {
  Lora lora = ExpertsLora();
  ASSERT_TRUE(lora.adapter) << lora.error;
  View a(lora.weights);
  for (Dtype d : kBaseDtypes) {
    SCOPED_TRACE(DtypeTrace(d));
    const std::string gate_up = kExpertsHolder + ".gate_up_proj", down = kExpertsHolder + ".down_proj";
    const Bytes fused = BuildFile(Seeded({{"model.norm.weight", d, {kExpertH}},
                                          {gate_up, d, {kExperts, 2 * kExpertI, kExpertH}},
                                          {down, d, {kExperts, kExpertH, kExpertI}}},
                                         72));
    MergeRun run = MergeEveryWay(fused, *lora.adapter, std::nullopt, {});
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(run.plan->tensors_merged, 2u);
    EXPECT_EQ(Planned(run, gate_up)->op, TensorOp::kLowRankExperts);
    View b(fused), m(run.output);
    for (const auto& [name, key, scale] :
         {std::tuple{gate_up, kExpertsHolder + ".base_layer", 2.0f}, std::tuple{down, kExpertsHolder, 4.0f}}) {
      const auto want = ExpertsReference(a, key, b, name, scale, /*transposed=*/false, d);
      const auto got = m.Doubles(name);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << name << " element " << i;
    }
    ExpectPassedThrough(b, m, "model.norm.weight");

    // The same parameters stored one expert at a time (transformers saves them so): Qwen2-MoE's gate_proj,
    // up_proj, down_proj and Mixtral's w1, w3, w2 under block_sparse_moe get the rows of the fused merge.
    for (auto [holder, gate, up, dn] :
         {std::tuple{kExpertsHolder, "gate_proj", "up_proj", "down_proj"},
          std::tuple{std::string("model.layers.0.block_sparse_moe.experts"), "w1", "w3", "w2"}}) {
      std::vector<T> ts;
      for (uint64_t e = 0; e < kExperts; ++e) {
        const std::string p = holder + "." + std::to_string(e) + ".";
        ts.push_back({p + dn + ".weight", d, {kExpertH, kExpertI}});
        ts.push_back({p + gate + ".weight", d, {kExpertI, kExpertH}});
        ts.push_back({p + up + ".weight", d, {kExpertI, kExpertH}});
      }
      // Their values are the fused base's rows.
      for (uint64_t e = 0; e < kExperts; ++e) {
        auto slice = [&](const std::string& name, uint64_t first, uint64_t n) {
          std::vector<float> v;
          for (uint64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(b.At(name, first + i)));
          return v;
        };
        const uint64_t g = 2 * kExpertI * kExpertH, dsz = kExpertH * kExpertI, half = kExpertI * kExpertH;
        ts[e * 3].values = slice(down, e * dsz, dsz);
        ts[e * 3 + 1].values = slice(gate_up, e * g, half);
        ts[e * 3 + 2].values = slice(gate_up, e * g + half, half);
      }
      const Bytes split = BuildFile(ts);
      MergeRun sr = MergeEveryWay(split, *lora.adapter, std::nullopt, {});
      ASSERT_TRUE(sr.ok()) << sr.message();
      EXPECT_EQ(sr.plan->tensors_merged, 3 * kExperts);
      View ms(sr.output);
      for (uint64_t e = 0; e < kExperts; ++e) {
        const std::string p = holder + "." + std::to_string(e) + ".";
        const auto fd = m.Doubles(down), fg = m.Doubles(gate_up);
        const uint64_t g = 2 * kExpertI * kExpertH, dsz = kExpertH * kExpertI, half = kExpertI * kExpertH;
        EXPECT_EQ(ms.Doubles(p + dn + ".weight"),
                  std::vector<double>(fd.begin() + e * dsz, fd.begin() + (e + 1) * dsz));
        EXPECT_EQ(ms.Doubles(p + gate + ".weight"), std::vector<double>(fg.begin() + e * g, fg.begin() + e * g + half));
        EXPECT_EQ(ms.Doubles(p + up + ".weight"),
                  std::vector<double>(fg.begin() + e * g + half, fg.begin() + (e + 1) * g));
      }
    }

    // Unmerge subtracts the same rounded delta (PEFT's `param -= delta.to(dtype)`); F32 comes back within an ulp.
    MergeOptions un;
    un.unmerge = true;
    MergeRun back = MergeEveryWay(run.output, *lora.adapter, std::nullopt, un);
    ASSERT_TRUE(back.ok()) << back.message();
    View ub(back.output);
    const auto orig = b.Doubles(gate_up), undone = ub.Doubles(gate_up);
    for (size_t i = 0; i < orig.size(); ++i)
      EXPECT_NEAR(undone[i], orig[i], std::fabs(orig[i]) * (d == Dtype::F32 ? 1e-6 : 1e-2) + 1e-3);
  }
}

TEST(MergeExperts, TransposedExpertsAndTheirAmbiguities) {
  Lora lora = ExpertsLora();
  ASSERT_TRUE(lora.adapter) << lora.error;
  View a(lora.weights);
  // gpt-oss style [E, in, out]: told apart from [E, out, in] by the shapes.
  const std::string gate_up = kExpertsHolder + ".gate_up_proj", down = kExpertsHolder + ".down_proj";
  const Bytes base = BuildFile(Seeded(
      {{gate_up, Dtype::BF16, {kExperts, kExpertH, 2 * kExpertI}}, {down, Dtype::BF16, {kExperts, kExpertI, kExpertH}}},
      73));
  MergeRun run = MergeEveryWay(base, *lora.adapter, std::nullopt, {});
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(Planned(run, gate_up)->orientation, Orientation::kInOut);
  View b(base), m(run.output);
  const auto want =
      ExpertsReference(a, kExpertsHolder + ".base_layer", b, gate_up, 2.0f, /*transposed=*/true, Dtype::BF16);
  const auto got = m.Doubles(gate_up);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;

  // Square per expert: only the model type tells; without config.json it is refused, with one it is decided.
  std::vector<T> lt;
  AddLora(lt, kExpertsHolder, {kExpertR * kExperts, kExpertH}, {kExpertH, kExpertR * kExperts});
  Lora square = MakeLora(R"("r": 2, "lora_alpha": 4, "target_parameters": ["experts.down_proj"])", Seeded(lt, 74));
  ASSERT_TRUE(square.adapter) << square.error;
  const Bytes sq = BuildFile(Seeded({{down, Dtype::BF16, {kExperts, kExpertH, kExpertH}}}, 75));
  MergeRun refused = MergeShard(sq, *square.adapter, std::nullopt, {}, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error->code, ErrorCode::UnsupportedAdapter);
  EXPECT_NE(refused.error->message.find("square per expert"), std::string::npos) << refused.message();
  for (auto [type, transposed] : {std::pair{"qwen3_moe", false}, std::pair{"gpt_oss", true}}) {
    MergeRun r = MergeShard(sq, *square.adapter, std::string(R"({"model_type": ")") + type + "\"}", {}, 0);
    ASSERT_TRUE(r.ok()) << r.message();
    View bs(sq), ms(r.output);
    const auto w = ExpertsReference(View(square.weights), kExpertsHolder, bs, down, 2.0f, transposed, Dtype::BF16);
    EXPECT_EQ(ms.Doubles(down), std::vector<double>(w.begin(), w.end())) << type;
  }

  // A base lacking one of the named parameters: the nesting cannot be trusted.
  const Bytes half = BuildFile(Seeded({{down, Dtype::BF16, {kExperts, kExpertH, kExpertI}}}, 76));
  MergeRun lacking = MergeShard(half, *lora.adapter, std::nullopt, {}, 0);
  ASSERT_FALSE(lacking.ok());
  EXPECT_NE(lacking.error->message.find("gate_up_proj"), std::string::npos) << lacking.message();
}

}  // namespace
}  // namespace pb::merge

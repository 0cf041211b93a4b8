// libFuzzer target for the merge engine (merge/merge_engine.h: ShardMerger, StreamingMerger, SourceRuns; the
// regions of merge/merge_regions.h; the --quantize writer; the low-rank kernels): a tiny base shard and a PEFT
// adapter with real values, synthesised from the input, merged every way an edge can drive the engine.
//
// Input: part 0 = choices for FuzzedDataProvider (architecture, modules, shapes incl. Conv1D [in, out], Conv2d and
// embedding orientation, dtypes, ranks (huge against tiny modules, zero), DoRA / lora_bias / rslora / rank_pattern,
// the values of every tensor (finite, raw bit patterns, NaN / Inf / huge / subnormal), merge options (dtype,
// unmerge, --safe, --quantize, factor_block_bytes down to 1 byte so B is fetched a block of rows at a time), and
// how the bytes are cut); part 1 (optional) = a JSON object whose members override the adapter_config.json;
// part 2 (optional) = the base config.json text. Compact encoding expanded first.
//
// Routes, all from the same plan: (A) ShardMerger, each tensor's bytes in one push, the adapter's tensors held;
// (B) ShardMerger, pushes of fuzzed sizes, unchanged runs forwarded (SourceRuns) or pushed, the adapter read from
// its header only and its bytes supplied (adapter_needs()) in fuzzed pieces; (C) StreamingMerger over the whole
// file in fuzzed chunks, forwarding what NextRun() allows; (D) the shard split into regions (SplitIntoRegions),
// each merged by its own ShardMerger into its RegionOutputOf() place.
//
// Checks (abort() on failure): no crash or sanitizer report; the adapter read whole and read from its header plan
// the same output header; every route accepts or refuses alike, a refusal carries a message (A's and B's the same
// message); an accepted merge's output is byte-identical on every route, starts with the plan's header, is
// write.total_size() bytes and parses; unchanged tensors are copied byte for byte; the adapter bytes held at once
// stay within the largest module's factors; with --safe, every merged tensor is finite; a merged Linear / Conv1D /
// Conv weight (no --quantize, no unmerge, F32/F16/BF16, finite values) is within the stated float32 bound of a
// float64 reference W + s·B·A (docs/merge.md, "How close to PEFT's merge"; the bound is derived at CheckLowRank).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "adapter/naming_tables.h"
#include "adapter/tensor_fetch.h"
#include "core/header.h"
#include "core/json.h"
#include "fuzz_input.h"
#include "json_mutator.h"
#include "kernels/convert.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "merge/merge_regions.h"
#include "merge/quantize_plan.h"
#include "merge_inputs.h"

namespace {

using json = pb::Json;
using pb::Dtype;
using pb::Status;
using pb::fuzz::ByteLength;
using pb::fuzz::Elements;
using pb::fuzz::VectorSink;
using namespace pb::adapter;
using namespace pb::merge;
using Bytes = std::vector<uint8_t>;

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_merge_engine: %s\n%s\n", what.c_str(), detail.substr(0, 4000).c_str());
  std::abort();
}

// Dtypes the engine copies, converts or merges (F64, F8 are merged through staging buffers; I64 only copied).
constexpr Dtype kBaseDtypes[] = {Dtype::F32, Dtype::F16, Dtype::BF16,    Dtype::F32,     Dtype::BF16,
                                 Dtype::F16, Dtype::F64, Dtype::F8_E4M3, Dtype::F8_E5M2, Dtype::I64};
constexpr Dtype kAdapterDtypes[] = {Dtype::F32, Dtype::F16, Dtype::BF16};
constexpr uint64_t kRanks[] = {1, 2,  3,  4, 1,
                               2, 16, 64, 0};  // 16, 64 against modules of 1-6 features; 0: empty factors
constexpr uint64_t kBlockBytes[] = {4u << 20, 0, 1, 2, 7, 16, 64};

// Values: each element from one input byte, so inputs stay small.
enum class Values { kSmall, kSpecials, kRaw };

float ValueOf(uint8_t b, Values mode) {
  if (mode == Values::kSpecials && b >= 0xF0) {
    static const float kSpecial[] = {std::numeric_limits<float>::quiet_NaN(),
                                     std::numeric_limits<float>::infinity(),
                                     -std::numeric_limits<float>::infinity(),
                                     3.0e38f,
                                     -3.0e38f,
                                     1.0e-40f,
                                     -0.0f,
                                     65504.0f,
                                     65536.0f,
                                     1.0e30f,
                                     -1.0e30f,
                                     1.0e-30f,
                                     7.0e4f,
                                     1.0e-8f,
                                     448.0f,
                                     0.0f};
    return kSpecial[b & 15];
  }
  return static_cast<float>(static_cast<int8_t>(b)) / 16.0f;
}

Bytes MakeValues(FuzzedDataProvider& fdp, Dtype dtype, uint64_t count, Values mode) {
  const uint64_t bytes = ByteLength(dtype, {count});
  if (mode == Values::kRaw || !pb::IsConvertibleFloat(dtype)) {
    Bytes out = fdp.ConsumeBytes<uint8_t>(bytes);
    out.resize(bytes, 0);
    return out;
  }
  std::vector<float> f(count);
  for (auto& v : f) v = ValueOf(fdp.ConsumeIntegral<uint8_t>(), mode);
  Bytes out(bytes);
  pb::kernels::ConvertElements(Dtype::F32, dtype, f.data(), out.data(), count);
  return out;
}

std::vector<double> Doubles(Dtype dtype, const uint8_t* bytes, uint64_t count) {
  std::vector<float> f(count);
  if (!pb::kernels::ConvertElements(dtype, Dtype::F32, bytes, f.data(), count))
    Fail("cannot widen", std::string(pb::DtypeName(dtype)));
  return std::vector<double>(f.begin(), f.end());
}

struct NamedTensor {
  std::string name;
  Dtype dtype;
  std::vector<uint64_t> shape;
  Bytes data;
};

Bytes EmitFile(const std::vector<NamedTensor>& tensors) {
  SafetensorsOutput file;
  for (const auto& t : tensors) {
    file.tensors.push_back({t.name, t.dtype, t.shape});
    file.data.push_back(t.data);
  }
  VectorSink sink;
  if (Status s = EmitSafetensors(file, sink); !s.ok()) Fail("a synthesised file was not written: " + s.error().message);
  return std::move(sink.bytes);
}

// Cuts: a small generator seeded from the input decides every piece's size, so chunking costs 4 input bytes.
struct Cutter {
  std::minstd_rand rng;
  int style;  // 0: 1 byte; 1: 1-7; 2: 1-300; 3: whole; 4: mixed
  uint64_t Next(uint64_t left) {
    uint64_t n = left;
    int s = style == 4 ? static_cast<int>(rng() % 4) : style;
    if (s == 0) n = 1;
    else if (s == 1) n = 1 + rng() % 7;
    else if (s == 2) n = 1 + rng() % 300;
    return std::max<uint64_t>(1, std::min(n, left));
  }
};

// An edge supplying what a consumer asks for from the adapter file (offset 0), in the cutter's pieces.
Status Supply(AdapterBytesConsumer& consumer, const Bytes& file, Cutter& cut) {
  for (int rounds = 0;; ++rounds) {
    if (rounds > 100000) Fail("adapter_needs() never ends");
    const std::vector<ByteRange> needs(consumer.adapter_needs().begin(), consumer.adapter_needs().end());
    if (needs.empty()) return Status::Ok();
    for (const ByteRange& r : needs) {
      if (r.begin > r.end || r.end > file.size())
        Fail("adapter_needs() outside the adapter file", std::to_string(r.begin) + ".." + std::to_string(r.end));
      for (uint64_t at = r.begin; at < r.end;) {
        const uint64_t n = cut.Next(r.end - at);
        if (Status s = consumer.SupplyAdapter(std::span<const uint8_t>(file.data() + at, n)); !s.ok()) return s;
        at += n;
      }
    }
  }
}

// The same for a held adapter: it must ask for nothing.
Status NothingNeeded(const AdapterBytesConsumer& consumer) {
  if (!consumer.adapter_needs().empty()) Fail("a held adapter's merge asks for adapter bytes");
  return Status::Ok();
}

struct Outcome {
  bool ok = true;
  std::string message;
  Bytes output;
  uint64_t peak = 0;
};

Outcome Refused(const Status& s) {
  if (s.error().message.empty()) Fail("a refused merge without a message");
  return {false, s.error().message, {}, 0};
}

// One ShardMerger over [range): the source runs pushed (or forwarded, when `forward`) in the cutter's pieces,
// the adapter supplied from `adapter_file` (null: the adapter is held). Output: the region's data bytes (the whole
// file, header included, for the whole shard).
Outcome RunShardMerger(const ShardPlan& plan, const pb::Header& header, const Bytes& base, const MergeOptions& options,
                       const Bytes* adapter_file, Cutter& cut, bool forward, TensorRange range, bool region) {
  VectorSink sink;
  auto merger = region ? std::make_unique<ShardMerger>(plan, options, sink, range)
                       : std::make_unique<ShardMerger>(plan, options, sink);
  Cutter supply_cut{std::minstd_rand(cut.rng()), static_cast<int>(cut.rng() % 5)};
  auto supply = [&]() { return adapter_file ? Supply(*merger, *adapter_file, supply_cut) : NothingNeeded(*merger); };
  if (Status s = merger->Begin(); !s.ok()) return Refused(s);
  if (Status s = supply(); !s.ok()) return Refused(s);
  for (const SourceRun& r : SourceRuns(plan, header, options, range)) {
    if (r.begin > r.end || r.end > base.size()) Fail("SourceRuns outside the base file");
    for (uint64_t at = r.begin; at < r.end;) {
      const uint64_t n = cut.style == 3 ? r.end - at : cut.Next(r.end - at);
      std::span<const uint8_t> piece(base.data() + at, n);
      Status s = Status::Ok();
      if (r.forward && forward) {
        s = sink.Write(piece);
        if (s.ok()) s = merger->Forwarded(n);
      } else {
        s = merger->Push(piece);
      }
      if (s.ok()) s = supply();
      if (!s.ok()) return Refused(s);
      at += n;
    }
  }
  if (merger->source_consumed() != merger->source_bytes()) Fail("the source runs are not the bytes the merger expects");
  if (Status s = supply(); !s.ok()) return Refused(s);
  if (Status s = merger->Finish(); !s.ok()) return Refused(s);
  return {true, "", std::move(sink.bytes), merger->peak_adapter_bytes()};
}

Outcome RunStreaming(const Adapter& adapter, const std::optional<std::string>& config, const MergeOptions& options,
                     const Bytes& base, const Bytes* adapter_file, Cutter& cut) {
  VectorSink sink;
  StreamingMerger merger(adapter, config, options, sink);
  Cutter supply_cut{std::minstd_rand(cut.rng()), static_cast<int>(cut.rng() % 5)};
  auto supply = [&]() { return adapter_file ? Supply(merger, *adapter_file, supply_cut) : NothingNeeded(merger); };
  for (uint64_t at = 0; at < base.size();) {
    const SourceRun r = merger.NextRun();
    if (r.begin != at) Fail("NextRun() does not start at the stream's position");
    uint64_t n = cut.Next(base.size() - at);
    if (r.end > r.begin) n = std::min(n, r.end - r.begin);
    std::span<const uint8_t> piece(base.data() + at, n);
    Status s = Status::Ok();
    if (r.forward) {
      s = sink.Write(piece);
      if (s.ok()) s = merger.Forwarded(n);
    } else {
      s = merger.Feed(piece);
    }
    if (s.ok()) s = supply();
    if (!s.ok()) return Refused(s);
    at += n;
  }
  if (Status s = merger.Finish(); !s.ok()) return Refused(s);
  return {true, "", std::move(sink.bytes), merger.peak_adapter_bytes()};
}

// Every region merged on its own, its bytes put at its place after the header (as the native CLI's threads do).
Outcome RunRegions(const ShardPlan& plan, const pb::Header& header, const Bytes& base, const MergeOptions& options,
                   const Bytes* adapter_file, Cutter& cut, size_t pieces) {
  Bytes out(plan.write.header.begin(), plan.write.header.end());
  out.resize(plan.write.total_size());
  const std::vector<TensorRange> regions = SplitIntoRegions(plan, pieces);
  size_t expect_first = 0;
  for (const TensorRange& range : regions) {
    if (range.first != expect_first || range.last < range.first) Fail("regions do not cover the plan in order");
    expect_first = range.last;
    const RegionOutput where = RegionOutputOf(plan, range);
    Outcome o = RunShardMerger(plan, header, base, options, adapter_file, cut, true, range, true);
    if (!o.ok) return o;  // the earliest failing region gives the error, as in the CLI
    if (where.data_end < where.data_begin || o.output.size() != where.data_end - where.data_begin ||
        plan.write.header.size() + where.data_end > out.size())
      Fail("a region's output is not the size RegionOutputOf says");
    std::copy(o.output.begin(), o.output.end(), out.begin() + plan.write.header.size() + where.data_begin);
  }
  if (expect_first != plan.tensors.size()) Fail("regions do not cover every planned tensor");
  return {true, "", std::move(out), 0};
}

// The float32 evaluation-order bound of docs/merge.md for one element. The engine computes
// fl(fl(w + sign·fl(fl(Σ_k left·right)·s))) with each product and sum rounded (lowrank.h): the sum of r products
// is within γ_r·Σ|left·right| of the exact one (γ_n = n·u/(1 - n·u), u = 2^-24), the scaling and the addition add
// one rounding each (u of the operands' magnitudes), so fp32's w + ΔW is within
//     E = |s|·γ_{r+1}·Σ|left·right| + u·(|w| + |s|·Σ|left·right|)·(1 + γ_{r+1})
// of the exact value, plus, below FLT_MIN, an absolute (r + 2)·2^-149 for the subnormal products and sums. The
// final rounding to a 16-bit output adds at most half its spacing at |exact| + E (we allow one spacing).
double Spacing(Dtype dtype, double x) {
  const int mant = dtype == Dtype::F16 ? 10 : dtype == Dtype::BF16 ? 7 : 23;
  const int min_exp = dtype == Dtype::F16 ? -14 : -126;
  int e = x > 0 ? std::ilogb(x) : min_exp;
  e = std::max(e, min_exp);
  return std::ldexp(1.0, e - mant);
}

double MaxFinite(Dtype dtype) {
  return dtype == Dtype::F16 ? 65504.0 : dtype == Dtype::BF16 ? 3.3895313892515355e38 : 3.4028234663852886e38;
}

bool Plain(Dtype d) { return d == Dtype::F32 || d == Dtype::F16 || d == Dtype::BF16; }

void CheckLowRank(const PlannedTensor& p, const uint8_t* w_bytes, const uint8_t* out_bytes) {
  const LoraModule& m = *p.module;
  if (!m.a.held() || !m.b.held() || !Plain(m.a.dtype) || !Plain(m.b.dtype)) return;
  const uint64_t r = m.rank(), rows = p.rows, cols = p.cols;
  if (r == 0 || rows * cols != Elements(p.shape)) return;
  const std::vector<double> a = Doubles(m.a.dtype, m.a.bytes.data(), m.a.element_count());
  const std::vector<double> b = Doubles(m.b.dtype, m.b.bytes.data(), m.b.element_count());
  const std::vector<double> w = Doubles(p.in_dtype, w_bytes, rows * cols);
  const std::vector<double> out = Doubles(p.out_dtype, out_bytes, rows * cols);
  // left [rows, r], right [r, cols]: Linear / Conv left = B, right = A; Conv1D [in, out] left = Aᵀ, right = Bᵀ.
  const bool out_in = p.orientation == Orientation::kOutIn;
  if (out_in ? (b.size() != rows * r || a.size() != r * cols) : (a.size() != r * rows || b.size() != cols * r)) return;
  for (double v : a)
    if (!std::isfinite(v)) return;
  for (double v : b)
    if (!std::isfinite(v)) return;
  const double s = static_cast<float>(m.settings.scaling);
  if (!std::isfinite(s)) return;
  const double u = std::ldexp(1.0, -24), gamma = (r + 1) * u / (1 - (r + 1) * u);
  for (uint64_t i = 0; i < rows; ++i) {
    for (uint64_t j = 0; j < cols; ++j) {
      double sum = 0, abs_sum = 0;
      bool fp32_overflow = false;
      for (uint64_t k = 0; k < r; ++k) {
        const double l = out_in ? b[i * r + k] : a[k * rows + i];
        const double rt = out_in ? a[k * cols + j] : b[j * r + k];
        sum += l * rt;
        abs_sum += std::fabs(l * rt);
        if (std::fabs(l * rt) > 1e37 || abs_sum > 1e37) fp32_overflow = true;
      }
      const double wij = w[i * cols + j];
      if (!std::isfinite(wij) || fp32_overflow || std::fabs(s) * abs_sum > 1e37)
        continue;  // fp32 may overflow: no bound
      const double exact = wij + s * sum;
      const double e = std::fabs(s) * gamma * abs_sum + u * (std::fabs(wij) + std::fabs(s) * abs_sum) * (1 + gamma) +
                       (r + 2) * std::ldexp(1.0, -149) * std::max(1.0, std::fabs(s));
      const double got = out[i * cols + j];
      const double tol = e + (p.out_dtype == Dtype::F32 ? 0.0 : Spacing(p.out_dtype, std::fabs(exact) + e));
      if (!std::isfinite(got)) {
        if (std::fabs(exact) + tol >= MaxFinite(p.out_dtype)) continue;  // rounded past the dtype's range
      } else if (std::fabs(got - exact) <= tol) {
        continue;
      }
      char detail[512];
      std::snprintf(detail, sizeof detail,
                    "%s [%llu, %llu]: got %.9g, exact %.17g, bound %.3g (w %.9g, s %.9g, r %llu, %s -> %s)",
                    p.name.c_str(), static_cast<unsigned long long>(i), static_cast<unsigned long long>(j), got, exact,
                    tol, wij, s, static_cast<unsigned long long>(r), std::string(pb::DtypeName(p.in_dtype)).c_str(),
                    std::string(pb::DtypeName(p.out_dtype)).c_str());
      Fail("a merged element is outside the float32 bound of the float64 reference", detail);
    }
  }
}

// The largest adapter bytes one planned tensor may hold: its module's factors and magnitude, or bias, plus the
// largest saved tensor the merge starts from or takes whole (tests/native/lazy_adapter.h's LargestModuleBytes).
uint64_t AdapterBound(const Adapter& a) {
  uint64_t extra = 0, module = 0;
  for (const auto& x : a.extras) extra = std::max(extra, x.tensor.byte_length());
  for (const auto& m : a.modules) {
    const uint64_t f = m.a.byte_length() + m.b.byte_length() + (m.magnitude ? m.magnitude->byte_length() : 0);
    module = std::max({module, f, m.b_bias ? m.b_bias->byte_length() : 0});
  }
  return module + extra;
}

void CheckOutput(const MergePlan& plan, const pb::Header& base_header, const Bytes& base, const Bytes& out,
                 const MergeOptions& options) {
  const ShardPlan& shard = plan.shards[0];
  if (out.size() != shard.write.total_size()) Fail("the output is not write.total_size() bytes");
  // Byte for byte: the header is chars (signed here), the output bytes unsigned; a length prefix byte >= 0x80 must
  // compare as the same byte.
  if (!std::equal(shard.write.header.begin(), shard.write.header.end(), out.begin(),
                  [](char h, uint8_t o) { return static_cast<uint8_t>(h) == o; }))
    Fail("the output does not start with the plan's header");
  auto parsed = pb::ParseWholeFile(out);
  if (!parsed.ok()) Fail("the output does not parse: " + parsed.error().message);
  for (const PlannedTensor& p : shard.tensors) {
    if (p.quantized || !p.source) continue;
    auto found = parsed->Find(p.name);
    if (!found) Fail("a planned tensor is missing from the output", p.name);
    const pb::TensorInfo o = parsed->tensor(*found);
    const pb::TensorInfo in = base_header.tensor(*p.source);
    const uint8_t* out_bytes = out.data() + parsed->data_start() + o.begin;
    const uint8_t* in_bytes = base.data() + base_header.data_start() + in.begin;
    if (p.op == TensorOp::kCopy) {
      if (o.end - o.begin != in.end - in.begin || std::memcmp(out_bytes, in_bytes, o.end - o.begin) != 0)
        Fail("a copied tensor changed", p.name);
      continue;
    }
    const bool merged = p.module != nullptr;
    if (merged && options.safe && pb::IsConvertibleFloat(p.out_dtype)) {
      const uint64_t n = Elements(p.shape);
      std::vector<float> f(n);
      pb::kernels::ConvertElements(p.out_dtype, Dtype::F32, out_bytes, f.data(), n);
      for (float v : f)
        if (!std::isfinite(v)) Fail("--safe accepted a merged tensor with NaN or Inf", p.name);
    }
    if (p.op == TensorOp::kLowRank && !p.replacement && !options.unmerge && Plain(p.in_dtype) && Plain(p.out_dtype))
      CheckLowRank(p, in_bytes, out_bytes);
  }
}

// PB_FUZZ_DESCRIBE=1: one line per input on stderr saying what it exercised (how the committed seeds were chosen
// from a corpus, docs/fuzzing.md).
void Describe(const std::string& what) {
  static const bool on = std::getenv("PB_FUZZ_DESCRIBE") != nullptr;
  if (on) std::fprintf(stderr, "describe: %s\n", what.c_str());
}

std::string Ops(const ShardPlan& shard) {
  std::string ops;
  for (const PlannedTensor& p : shard.tensors) {
    ops += std::string(TensorOpName(p.op));
    if (p.module)
      ops += "(r" + std::to_string(p.module->rank()) + (p.orientation == Orientation::kInOut ? ",in-out" : "") + ")";
    ops += p.quantized ? "+q " : " ";
  }
  return ops;
}

}  // namespace

PB_FUZZ_DEFINE_MUTATOR((pb::fuzz::MutatorVocabulary{
    {"r", "lora_alpha", "target_modules", "rank_pattern", "alpha_pattern", "use_dora", "use_rslora", "lora_bias",
     "fan_in_fan_out", "modules_to_save", "bias", "layers_to_transform", "tie_word_embeddings", "model_type",
     "num_attention_heads", "num_key_value_heads"},
    {"gpt2", "llama", "c_attn", "q_proj", "embed_tokens", "score", "all", "lora_only"}}))

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  auto parts = pb::fuzz::SplitParts(input, 3);
  FuzzedDataProvider fdp(reinterpret_cast<const uint8_t*>(parts[0].data()), parts[0].size());
  const NamingTables& tables = NamingTables::Builtin();

  // The base: a few modules of an architecture's templates (or generic Linear names), 1-2 layers, 1-6 features.
  const size_t arch_index = fdp.ConsumeIntegralInRange<size_t>(0, tables.arches().size());
  const ArchTable* arch = arch_index < tables.arches().size() ? &tables.arches()[arch_index] : nullptr;
  const std::string prefix =
      arch ? arch->body_prefixes[fdp.ConsumeIntegralInRange<size_t>(0, arch->body_prefixes.size() - 1)]
           : std::string("model.");
  const uint64_t layers = fdp.ConsumeIntegralInRange<uint64_t>(1, 2);
  struct Module {
    std::string path;
    ModuleKind kind;
    uint64_t in, out, kernel;
  };
  std::vector<Module> modules;
  std::vector<NamedTensor> base;
  const size_t template_count = arch ? arch->modules.size() : 3;
  const Values base_values = static_cast<Values>(fdp.ConsumeIntegralInRange<int>(0, 2));
  for (size_t i = 0; i < template_count && base.size() < 8; ++i) {
    if (!fdp.ConsumeBool()) continue;
    const ModuleTemplate* t = arch ? &arch->modules[i] : nullptr;
    const bool per_layer = t ? t->hf.find("{N}") != std::string::npos : true;
    for (uint64_t layer = 0; layer < (per_layer ? layers : 1) && base.size() < 8; ++layer) {
      const std::string path = t ? (t->head ? t->hf : prefix + pb::fuzz::Filled(t->hf, layer))
                                 : prefix + "layers." + std::to_string(layer) + ".proj" + std::to_string(i);
      const ModuleKind kind = t ? t->kind : ModuleKind::kLinear;
      const uint64_t in = fdp.ConsumeIntegralInRange<uint64_t>(1, 6), out = fdp.ConsumeIntegralInRange<uint64_t>(1, 6);
      const uint64_t kernel = fdp.ConsumeIntegralInRange<uint64_t>(1, 2);
      const Dtype dt = kBaseDtypes[fdp.ConsumeIntegralInRange<size_t>(0, std::size(kBaseDtypes) - 1)];
      std::vector<uint64_t> shape;
      switch (kind) {
        case ModuleKind::kConv1D: shape = {in, out}; break;
        case ModuleKind::kConv2d: shape = {out, in, kernel, kernel}; break;
        case ModuleKind::kOther: shape = {out}; break;
        default: shape = {out, in}; break;  // Linear [out, in]; Embedding [num = out, dim = in]
      }
      base.push_back({path + ".weight", dt, shape, MakeValues(fdp, dt, Elements(shape), base_values)});
      if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0)
        base.push_back({path + ".bias", dt, {shape[0]}, MakeValues(fdp, dt, shape[0], base_values)});
      if (kind != ModuleKind::kOther) modules.push_back({path, kind, in, out, kernel});
    }
  }
  if (fdp.ConsumeBool())
    base.push_back({prefix + "norm.weight", Dtype::F32, {2}, MakeValues(fdp, Dtype::F32, 2, base_values)});

  // The adapter: factors with values for a subset of the modules, sometimes wrong, ranks per module.
  const uint64_t r = kRanks[fdp.ConsumeIntegralInRange<size_t>(0, std::size(kRanks) - 1)];
  const bool dora = fdp.ConsumeIntegralInRange<int>(0, 3) == 0,
             lora_bias = !dora && fdp.ConsumeIntegralInRange<int>(0, 3) == 0;
  const Dtype adt = kAdapterDtypes[fdp.ConsumeIntegralInRange<size_t>(0, std::size(kAdapterDtypes) - 1)];
  const Values adapter_values = static_cast<Values>(fdp.ConsumeIntegralInRange<int>(0, 2));
  std::vector<NamedTensor> factors;
  json targets = json::array(), rank_pattern = json::object();
  auto add = [&](const std::string& key, std::vector<uint64_t> shape) {
    factors.push_back({key, adt, shape, MakeValues(fdp, adt, Elements(shape), adapter_values)});
  };
  for (const auto& m : modules) {
    if (!fdp.ConsumeBool()) continue;
    std::string path = m.path;
    const int flaw = fdp.ConsumeIntegralInRange<int>(0, 15);  // 0: a module the base lacks; 1: wrong in; 2: wrong out
    if (flaw == 0) path += "_missing";
    const uint64_t in = m.in + (flaw == 1), out = m.out + (flaw == 2);
    uint64_t rm = r;
    if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {
      rm = kRanks[fdp.ConsumeIntegralInRange<size_t>(0, std::size(kRanks) - 1)];
      rank_pattern[path] = rm;
    }
    const std::string key = "base_model.model." + path;
    if (m.kind == ModuleKind::kEmbedding) {
      add(key + ".lora_embedding_A", {rm, m.out});
      add(key + ".lora_embedding_B", {m.in, rm});
    } else if (m.kind == ModuleKind::kConv2d) {
      add(key + ".lora_A.weight", {rm, in, m.kernel, m.kernel});
      add(key + ".lora_B.weight", {out, rm, 1, 1});
    } else {
      add(key + ".lora_A.weight", {rm, in});
      add(key + ".lora_B.weight", {out, rm});
    }
    if (dora) add(key + ".lora_magnitude_vector", {m.kind == ModuleKind::kEmbedding ? m.in : out});
    if (lora_bias) add(key + ".lora_B.bias", {out});
    const std::string name = path.substr(path.rfind('.') + 1);
    if (std::find(targets.begin(), targets.end(), name) == targets.end()) targets.push_back(name);
  }
  const bool score = fdp.ConsumeIntegralInRange<int>(0, 7) == 0;
  if (score) add("base_model.model.score.weight", {2, 3});
  json config = {{"peft_type", "LORA"},
                 {"r", r},
                 {"lora_alpha", fdp.ConsumeIntegralInRange<int>(0, 64)},
                 {"target_modules", targets},
                 {"use_dora", dora},
                 {"lora_bias", lora_bias},
                 {"use_rslora", fdp.ConsumeBool()},
                 {"fan_in_fan_out", false},
                 {"bias", "none"}};
  if (!rank_pattern.empty()) config["rank_pattern"] = rank_pattern;
  if (score) config["modules_to_save"] = {"score"};
  if (parts.size() > 1) {
    auto overlay = pb::ParseJson(parts[1], "overlay");
    if (overlay.ok() && overlay->is_object())
      for (auto& [k, v] : overlay->items()) config[k] = v;
  }
  std::optional<std::string> base_config;
  if (parts.size() > 2) base_config = std::string(parts[2]);

  // Merge options.
  MergeOptions options;
  if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) options.dtype = kBaseDtypes[fdp.ConsumeIntegralInRange<size_t>(0, 8)];
  options.unmerge = fdp.ConsumeIntegralInRange<int>(0, 5) == 0;
  options.safe = fdp.ConsumeBool();
  options.allow_partial = fdp.ConsumeBool();
  if (arch && fdp.ConsumeBool()) options.arch = arch->name;
  options.factor_block_bytes = kBlockBytes[fdp.ConsumeIntegralInRange<size_t>(0, std::size(kBlockBytes) - 1)];
  if (fdp.ConsumeIntegralInRange<int>(0, 4) == 0) {  // --quantize, any mix the options allow (the plan may refuse)
    static const char* const kMethods[] = {"fp8", "int8", "int4"};
    static const char* const kSchemes[] = {"per-channel", "per-group", "block"};
    static const char* const kGroups[] = {"2", "4", "3", "128"};
    const char* method = kMethods[fdp.ConsumeIntegralInRange<size_t>(0, 2)];
    std::optional<std::string_view> scheme, group;
    if (fdp.ConsumeBool()) scheme = kSchemes[fdp.ConsumeIntegralInRange<size_t>(0, 2)];
    if (fdp.ConsumeBool()) group = kGroups[fdp.ConsumeIntegralInRange<size_t>(0, 3)];
    if (auto q = MakeQuantizeOptions(method, scheme, group); q.ok()) options.quantize = q.value();
  }
  const uint32_t seed = fdp.ConsumeIntegral<uint32_t>();
  const int push_style = fdp.ConsumeIntegralInRange<int>(0, 4), stream_style = fdp.ConsumeIntegralInRange<int>(0, 4);
  const bool forward = fdp.ConsumeBool(), stream_held = fdp.ConsumeBool();
  const size_t pieces = fdp.ConsumeIntegralInRange<size_t>(1, 5);

  const std::string options_text =
      std::string("safe=") + (options.safe ? "1" : "0") + " unmerge=" + (options.unmerge ? "1" : "0") +
      " quantize=" + (options.quantize ? "1" : "0") + " block=" + std::to_string(options.factor_block_bytes) +
      " dtype=" + (options.dtype ? std::string(pb::DtypeName(*options.dtype)) : "-") +
      " arch=" + (arch ? arch->name : "-") + " values=" + std::to_string(static_cast<int>(base_values)) + "/" +
      std::to_string(static_cast<int>(adapter_values)) + " | ";
  // The files, and the adapter read twice: whole (its tensors held) and from its header (referenced, fetched).
  const Bytes base_file = EmitFile(base);
  auto base_header = pb::ParseWholeFile(base_file);
  if (!base_header.ok()) Fail("the synthesised base does not parse: " + base_header.error().message);
  std::vector<NamedTensor> unique;
  for (auto& f : factors)
    if (std::none_of(unique.begin(), unique.end(), [&](const NamedTensor& u) { return u.name == f.name; }))
      unique.push_back(f);
  const Bytes adapter_file = EmitFile(unique);
  const std::string config_text = config.dump(-1, ' ', false, json::error_handler_t::replace);
  ReadOptions read_options;
  read_options.format = AdapterFormat::kPeft;
  auto held = ReadAdapter({"adapter_model.safetensors", adapter_file, config_text, base_config}, read_options);
  auto adapter_header = pb::ParseWholeFile(adapter_file);
  if (!adapter_header.ok()) Fail("the synthesised adapter does not parse: " + adapter_header.error().message);
  Bytes inline_bytes;
  for (const ByteRange& r : InlineTensorRanges(adapter_header.value()))
    inline_bytes.insert(inline_bytes.end(), adapter_file.begin() + r.begin, adapter_file.begin() + r.end);
  AdapterSource header_only{"adapter_model.safetensors", {},          config_text, base_config,
                            &adapter_header.value(),     inline_bytes};
  auto referenced = ReadAdapter(header_only, read_options);
  if (held.ok() != referenced.ok()) Fail("reading the adapter whole and from its header disagree");
  if (!held.ok()) {
    Describe(options_text + "adapter refused: " + held.error().message.substr(0, 100));
    return 0;  // fuzz_adapter_readers covers the readers' verdicts
  }

  const std::vector<BaseShardHeader> shards{{"model.safetensors", &base_header.value()}};
  auto plan_held = PlanMerge(shards, held->adapter, base_config, options);
  auto plan_ref = PlanMerge(shards, referenced->adapter, base_config, options);
  Cutter stream_cut{std::minstd_rand(seed ^ 0x9e3779b9u), stream_style};
  if (plan_held.ok() != plan_ref.ok()) Fail("the held and the referenced adapter plan differently");
  if (!plan_held.ok()) {
    if (plan_held.error().message.empty() || plan_ref.error().message.empty()) Fail("a refused plan without a message");
    Outcome s = RunStreaming(held->adapter, base_config, options, base_file, nullptr, stream_cut);
    if (s.ok) Fail("StreamingMerger merged what PlanMerge refused");
    Describe(options_text + "plan refused: " + plan_held.error().message.substr(0, 100));
    return 0;
  }
  const ShardPlan& shard_held = plan_held->shards.at(0);
  const ShardPlan& shard_ref = plan_ref->shards.at(0);
  if (shard_held.write.header != shard_ref.write.header) Fail("the held and the referenced adapter plan other headers");

  Cutter whole{std::minstd_rand(seed), 3}, pushes{std::minstd_rand(seed + 1), push_style},
      region_cut{std::minstd_rand(seed + 2), push_style};
  const Outcome a =
      RunShardMerger(shard_held, base_header.value(), base_file, options, nullptr, whole, false, {}, false);
  const Outcome b =
      RunShardMerger(shard_ref, base_header.value(), base_file, options, &adapter_file, pushes, forward, {}, false);
  const Outcome c = stream_held
                        ? RunStreaming(held->adapter, base_config, options, base_file, nullptr, stream_cut)
                        : RunStreaming(referenced->adapter, base_config, options, base_file, &adapter_file, stream_cut);
  const Outcome d = RunRegions(shard_ref, base_header.value(), base_file, options, &adapter_file, region_cut, pieces);
  if (a.ok != b.ok || a.ok != c.ok || a.ok != d.ok)
    Fail("the routes disagree on accepting the merge",
         "whole: " + a.message + "\npushed: " + b.message + "\nstreamed: " + c.message + "\nregions: " + d.message);
  if (!a.ok) {
    if (a.message != b.message)
      Fail("the held and the referenced merge fail differently", a.message + "\n" + b.message);
    Describe(options_text + "merge refused: " + a.message.substr(0, 100) + " | " + Ops(shard_held));
    return 0;
  }
  if (b.output != a.output) Fail("pushed in pieces, the output differs");
  if (c.output != a.output) Fail("through StreamingMerger, the output differs");
  if (d.output != a.output) Fail("merged in regions, the output differs");
  if (b.peak > AdapterBound(referenced->adapter))
    Fail("the merge held more adapter bytes than the largest module's",
         std::to_string(b.peak) + " > " + std::to_string(AdapterBound(referenced->adapter)));
  CheckOutput(plan_held.value(), base_header.value(), base_file, a.output, options);
  Describe(options_text + "merged, peak " + std::to_string(b.peak) + " | " + Ops(shard_held));
  return 0;
}

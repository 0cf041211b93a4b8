// libFuzzer target for the merge planner (merge_plan.h): a base model's shard headers and a PEFT adapter's
// files, synthesised from the input in a structured way, through ReadAdapter and PlanMerge.
//
// Input: part 0 = choices for FuzzedDataProvider (architecture, layers, which templates, shapes, dtypes,
// orientation, which modules the adapter has and how they are wrong, ranks, DoRA / lora_bias / rslora,
// merge options, how the base is split into shards); part 1 (optional) = a JSON object whose members
// override the synthesised adapter_config.json; part 2 (optional) = the base config.json text (else one is
// synthesised from the choices). Compact encoding expanded first.
//
// Checks on an accepted plan (abort() on failure): every base tensor of every shard is planned exactly once,
// in data order, additions last and without a source; merge ops name a module of the adapter and a
// rows x cols view equal to the tensor's size; the output header of each shard parses and lists the planned
// tensors (name, dtype, shape) in order; total_tensor_bytes / total_file_bytes are the sums over the shards;
// the reports render. A refused plan carries a message.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "core/json.h"

#include "adapter/adapter_io.h"
#include "adapter/naming_tables.h"
#include "core/header.h"
#include "fuzz_input.h"
#include "json_mutator.h"
#include "merge_inputs.h"
#include "merge/merge_plan.h"
#include "merge/quantize_plan.h"
#include "merge/merge_report.h"

namespace {

using json = pb::Json;
using pb::Dtype;
using namespace pb::adapter;

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_merge_plan: %s\n%s\n", what.c_str(), detail.substr(0, 4000).c_str());
  std::abort();
}

constexpr Dtype kBaseDtypes[] = {Dtype::F32,  Dtype::F16, Dtype::BF16,   Dtype::F32,
                                 Dtype::BF16, Dtype::I64, Dtype::F8_E4M3};
constexpr Dtype kAdapterDtypes[] = {Dtype::F32, Dtype::F16, Dtype::BF16};

struct BaseTensor {
  std::string name;
  Dtype dtype;
  std::vector<uint64_t> shape;
};

struct AdapterTensor {
  std::string key;
  Dtype dtype;
  std::vector<uint64_t> shape;
};

using pb::fuzz::ByteLength;
using pb::fuzz::Elements;
using pb::fuzz::Filled;

std::string HeaderJson(const std::vector<BaseTensor>& tensors) {
  json h = json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t bytes = ByteLength(t.dtype, t.shape);
    h[t.name] = {
        {"dtype", std::string(pb::DtypeName(t.dtype))}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  return h.dump();
}

void CheckPlan(const pb::merge::MergePlan& plan, const std::vector<pb::Header>& headers,
               const pb::adapter::Adapter& adapter) {
  if (plan.shards.size() != headers.size()) Fail("a shard was lost");
  uint64_t tensor_bytes = 0, file_bytes = 0;
  for (size_t s = 0; s < plan.shards.size(); ++s) {
    const auto& shard = plan.shards[s];
    const pb::Header& h = headers[s];
    std::set<size_t> seen;
    uint64_t last_begin = 0;
    bool additions = false;
    for (const auto& t : shard.tensors) {
      if (!t.source) {
        if (t.op != pb::merge::TensorOp::kAdd) Fail("a planned tensor without a source is not an addition", t.name);
        additions = true;
        continue;
      }
      if (additions) Fail("a base tensor after the additions", t.name);
      if (t.op == pb::merge::TensorOp::kAdd) Fail("an addition with a source", t.name);
      if (*t.source >= h.tensor_count() || !seen.insert(*t.source).second)
        Fail("a source planned twice or out of range", t.name);
      pb::TensorInfo info = h.tensor(*t.source);
      if (info.name != t.name) Fail("a planned tensor renamed", t.name);
      if (info.begin < last_begin) Fail("tensors out of data order", t.name);
      last_begin = info.begin;
      using pb::merge::TensorOp;
      if (t.op == TensorOp::kLowRank || t.op == TensorOp::kLowRankEmbedding || t.op == TensorOp::kDoraRows ||
          t.op == TensorOp::kDoraColumns || t.op == TensorOp::kAddBias) {
        if (t.module == nullptr || t.module < adapter.modules.data() ||
            t.module >= adapter.modules.data() + adapter.modules.size())
          Fail("a merge op without a module of the adapter", t.name);
        if (t.op != TensorOp::kAddBias && t.rows * t.cols != Elements(t.shape))
          Fail("rows x cols is not the tensor's size", t.name);
      }
    }
    if (seen.size() != h.tensor_count()) Fail("a base tensor is not planned", shard.name);
    // The output header parses and lists the planned tensors in order.
    if (shard.write.header.size() < 8) Fail("no output header", shard.name);
    auto out = pb::ParseHeader(shard.write.header.substr(8));
    if (!out.ok()) Fail("the output header does not parse: " + out.error().message, shard.write.header.substr(8));
    // --quantize: a quantized weight is written as its layout's 2 or 3 tensors (merge/quantize_plan.h).
    size_t outputs = 0;
    for (const auto& t : shard.tensors) outputs += t.quantized ? (t.quantized->shape.empty() ? 2 : 3) : 1;
    if (out->tensor_count() != outputs) Fail("the output header has other tensors", shard.name);
    if (shard.write.tensors.size() != outputs) Fail("the write plan has other tensors", shard.name);
    for (const auto& t : shard.tensors) {
      if (t.quantized) {
        const auto& q = *t.quantized;
        if (t.shape.size() != 2 || t.rows * t.cols != Elements(t.shape))
          Fail("a quantized tensor is not a matrix", t.name);
        if (!plan.quantize) Fail("a quantized tensor without --quantize", t.name);
        for (const std::string* name : {&q.weight, &q.scale})
          if (!out->Find(*name)) Fail("a quantized tensor's output is missing from the header", *name);
        continue;
      }
      auto found = out->Find(t.name);
      if (!found) Fail("a planned tensor is missing from the output header", t.name);
      pb::TensorInfo o = out->tensor(*found);
      if (o.dtype != t.out_dtype || std::vector<uint64_t>(o.shape.begin(), o.shape.end()) != t.shape)
        Fail("the output header's dtype or shape differs from the plan", t.name);
    }
    tensor_bytes += shard.write.data_size;
    file_bytes += shard.write.total_size();
  }
  if (tensor_bytes != plan.total_tensor_bytes || file_bytes != plan.total_file_bytes) Fail("totals are not the sums");
  if (plan.modules_matched > adapter.modules.size()) Fail("more modules matched than the adapter has");
}

}  // namespace

PB_FUZZ_DEFINE_MUTATOR((pb::fuzz::MutatorVocabulary{
    {"r", "lora_alpha", "target_modules", "rank_pattern", "alpha_pattern", "use_dora", "use_rslora", "lora_bias",
     "fan_in_fan_out", "modules_to_save", "bias", "layers_to_transform", "tie_word_embeddings", "model_type",
     "architectures", "num_attention_heads", "num_key_value_heads", "torch_dtype", "groups"},
    {"llama", "gpt2", "q_proj", "c_attn", "lm_head", "embed_tokens", "score", "all", "lora_only", "bfloat16"}}))

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  auto parts = pb::fuzz::SplitParts(input, 3);
  FuzzedDataProvider fdp(reinterpret_cast<const uint8_t*>(parts[0].data()), parts[0].size());
  const NamingTables& tables = NamingTables::Builtin();

  // The base: templates of an architecture (or generic names) under one body prefix, in 1-3 layers.
  const size_t arch_index = fdp.ConsumeIntegralInRange<size_t>(0, tables.arches().size());
  const ArchTable* arch = arch_index < tables.arches().size() ? &tables.arches()[arch_index] : nullptr;
  const std::string prefix =
      arch ? arch->body_prefixes[fdp.ConsumeIntegralInRange<size_t>(0, arch->body_prefixes.size() - 1)]
           : std::string("model.");
  const uint64_t layers = fdp.ConsumeIntegralInRange<uint64_t>(1, 3);
  const uint64_t hidden = 1ull << fdp.ConsumeIntegralInRange<int>(1, 4);
  struct Module {
    std::string path;
    ModuleKind kind;
    uint64_t in, out;
  };
  std::vector<Module> modules;
  std::vector<BaseTensor> base;
  const size_t template_count = arch ? arch->modules.size() : 4;
  for (size_t i = 0; i < template_count && base.size() < 48; ++i) {
    if (!fdp.ConsumeBool()) continue;
    const ModuleTemplate* t = arch ? &arch->modules[i] : nullptr;
    bool per_layer = t ? t->hf.find("{N}") != std::string::npos : true;
    for (uint64_t layer = 0; layer < (per_layer ? layers : 1); ++layer) {
      std::string path = t ? (t->head ? t->hf : prefix + Filled(t->hf, layer))
                           : prefix + "layers." + std::to_string(layer) + ".proj" + std::to_string(i);
      ModuleKind kind = t ? t->kind : ModuleKind::kLinear;
      uint64_t in = hidden * fdp.ConsumeIntegralInRange<uint64_t>(1, 3),
               out = hidden * fdp.ConsumeIntegralInRange<uint64_t>(1, 3);
      Dtype dt = kBaseDtypes[fdp.ConsumeIntegralInRange<size_t>(0, std::size(kBaseDtypes) - 1)];
      std::vector<uint64_t> shape;
      switch (kind) {
        case ModuleKind::kConv1D: shape = {in, out}; break;
        case ModuleKind::kConv2d: shape = {out, in, 3, 3}; break;
        case ModuleKind::kOther: shape = {out}; break;
        default: shape = {out, in}; break;  // Linear [out, in]; Embedding [num = out... dim = in]
      }
      if (fdp.ConsumeIntegralInRange<int>(0, 15) == 0) std::reverse(shape.begin(), shape.end());  // the shapes decide
      base.push_back({path + ".weight", dt, shape});
      if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) base.push_back({path + ".bias", dt, {shape[0]}});
      if (kind != ModuleKind::kOther) modules.push_back({path, kind, in, out});
    }
  }
  if (fdp.ConsumeBool()) base.push_back({prefix + "norm.weight", Dtype::F32, {hidden}});

  // The adapter: factors for a subset of the modules, sometimes wrong.
  const uint64_t r = fdp.ConsumeIntegralInRange<uint64_t>(1, 4);
  const bool dora = fdp.ConsumeIntegralInRange<int>(0, 3) == 0,
             lora_bias = !dora && fdp.ConsumeIntegralInRange<int>(0, 3) == 0;
  const Dtype adt = kAdapterDtypes[fdp.ConsumeIntegralInRange<size_t>(0, std::size(kAdapterDtypes) - 1)];
  std::vector<AdapterTensor> factors;
  json targets = json::array();
  for (const auto& m : modules) {
    if (!fdp.ConsumeBool()) continue;
    std::string path = m.path;
    int flaw = fdp.ConsumeIntegralInRange<int>(0, 15);  // 0: a module the base lacks; 1: wrong in; 2: wrong out
    if (flaw == 0) path += "_missing";
    uint64_t in = m.in + (flaw == 1), out = m.out + (flaw == 2);
    const std::string key = "base_model.model." + path;
    if (m.kind == ModuleKind::kEmbedding) {
      factors.push_back({key + ".lora_embedding_A", adt, {r, m.out}});
      factors.push_back({key + ".lora_embedding_B", adt, {m.in, r}});
    } else if (m.kind == ModuleKind::kConv2d) {
      factors.push_back({key + ".lora_A.weight", adt, {r, in, 3, 3}});
      factors.push_back({key + ".lora_B.weight", adt, {out, r, 1, 1}});
    } else {
      factors.push_back({key + ".lora_A.weight", adt, {r, in}});
      factors.push_back({key + ".lora_B.weight", adt, {out, r}});
    }
    if (dora) factors.push_back({key + ".lora_magnitude_vector", adt, {out}});
    if (lora_bias) factors.push_back({key + ".lora_B.bias", adt, {out}});
    std::string name = path.substr(path.rfind('.') + 1);
    if (std::find(targets.begin(), targets.end(), name) == targets.end()) targets.push_back(name);
  }
  if (fdp.ConsumeIntegralInRange<int>(0, 7) == 0)
    factors.push_back({"base_model.model.score.weight", adt, {2, hidden}});

  json config = {{"peft_type", "LORA"},
                 {"r", r},
                 {"lora_alpha", fdp.ConsumeIntegralInRange<int>(1, 64)},
                 {"target_modules", targets},
                 {"use_dora", dora},
                 {"lora_bias", lora_bias},
                 {"use_rslora", fdp.ConsumeBool()},
                 {"fan_in_fan_out", fdp.ConsumeBool()},
                 {"bias", "none"}};
  if (fdp.ConsumeIntegralInRange<int>(0, 7) == 0) config["modules_to_save"] = {"score"};
  if (parts.size() > 1) {
    // ParseJson: the overlay may be 200k levels deep or hold 100k keys (nlohmann's own parse would overflow
    // the stack freeing the one and take quadratic time over the other).
    auto overlay = pb::ParseJson(parts[1], "overlay");
    if (overlay.ok() && overlay->is_object())
      for (auto& [k, v] : overlay->items()) config[k] = v;
  }
  std::string base_config;
  if (parts.size() > 2) {
    base_config = std::string(parts[2]);
  } else {
    json bc = {{"num_attention_heads", fdp.ConsumeIntegralInRange<int>(1, 4)},
               {"tie_word_embeddings", fdp.ConsumeBool()}};
    if (arch && !arch->model_types.empty()) bc["model_type"] = arch->model_types.front();
    base_config = bc.dump();
  }

  // The adapter's safetensors file (zero data: the plan decides from headers alone).
  SafetensorsOutput file;
  for (const auto& f : factors) {
    if (std::any_of(file.tensors.begin(), file.tensors.end(), [&](const pb::TensorSpec& s) { return s.name == f.key; }))
      continue;
    file.tensors.push_back({f.key, f.dtype, f.shape});
    file.data.emplace_back(ByteLength(f.dtype, f.shape), 0);
  }
  pb::fuzz::VectorSink sink;
  if (!EmitSafetensors(file, sink).ok()) return 0;
  AdapterSource source{"adapter_model.safetensors", sink.bytes,
                       config.dump(-1, ' ', false, json::error_handler_t::replace), base_config};
  ReadOptions read_options;
  read_options.format = AdapterFormat::kPeft;
  auto adapter = ReadAdapter(source, read_options);
  if (!adapter.ok()) return 0;  // fuzz_adapter_readers covers the readers' verdicts

  // The base in 1-3 shards.
  const size_t shard_count =
      std::min<size_t>(fdp.ConsumeIntegralInRange<size_t>(1, 3), std::max<size_t>(1, base.size()));
  std::vector<std::vector<BaseTensor>> split(shard_count);
  for (size_t i = 0; i < base.size(); ++i)
    split[fdp.ConsumeIntegralInRange<size_t>(0, shard_count - 1)].push_back(base[i]);
  std::vector<pb::Header> headers;
  for (const auto& s : split) {
    auto h = pb::ParseHeader(HeaderJson(s));
    if (!h.ok()) Fail("a synthesised base header does not parse: " + h.error().message, HeaderJson(s));
    headers.push_back(std::move(h.value()));
  }
  std::vector<pb::merge::BaseShardHeader> shards;
  for (size_t i = 0; i < headers.size(); ++i)
    shards.push_back(
        {"model-0000" + std::to_string(i + 1) + "-of-0000" + std::to_string(headers.size()) + ".safetensors",
         &headers[i]});

  pb::merge::MergeOptions options;
  if (fdp.ConsumeBool()) options.dtype = kBaseDtypes[fdp.ConsumeIntegralInRange<size_t>(0, std::size(kBaseDtypes) - 1)];
  options.unmerge = fdp.ConsumeIntegralInRange<int>(0, 3) == 0;
  options.safe = fdp.ConsumeBool();
  if (arch && fdp.ConsumeBool()) options.arch = arch->name;
  if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {  // --quantize, any mix (refused ones are skipped)
    static const char* const kMethods[] = {"fp8", "int8", "int4"};
    static const char* const kSchemes[] = {"per-channel", "per-group", "block"};
    static const char* const kGroups[] = {"128", "16", "3", "7"};
    const char* method = kMethods[fdp.ConsumeIntegralInRange<size_t>(0, 2)];
    std::optional<std::string_view> scheme, group;
    if (fdp.ConsumeBool()) scheme = kSchemes[fdp.ConsumeIntegralInRange<size_t>(0, 2)];
    if (fdp.ConsumeBool()) group = kGroups[fdp.ConsumeIntegralInRange<size_t>(0, 3)];
    if (auto q = pb::merge::MakeQuantizeOptions(method, scheme, group); q.ok()) options.quantize = q.value();
  }
  std::optional<std::string> config_arg;
  if (fdp.ConsumeIntegralInRange<int>(0, 3) != 0) config_arg = base_config;

  auto plan = pb::merge::PlanMerge(shards, adapter->adapter, config_arg, options);
  if (!plan.ok()) {
    if (plan.error().message.empty()) Fail("a refused plan without a message");
    return 0;
  }
  CheckPlan(plan.value(), headers, adapter->adapter);
  pb::merge::MergeSummary summary{&plan.value(), &adapter.value(), 0, 0.0, 0, true, options.unmerge};
  (void)pb::merge::RenderMergeText(summary);
  auto report = pb::ParseJson(pb::merge::RenderMergeJson(summary), "merge report");
  if (!report.ok()) Fail("RenderMergeJson is not JSON");
  return 0;
}

// libFuzzer target for every adapter reader and writer: safetensors bytes + config -> canonical Adapter ->
// every writable convention, and back.
//
// Input: part 0 = options (byte 0: the format to read, 0 = detect, else 1 + AdapterFormat; byte 1: bit 0
// strict, bits 1-7 the naming table, 0 = none, else Builtin().arches()[n - 1]); part 1 = the safetensors file;
// part 2 (optional) = adapter_config.json text; part 3 (optional) = the base model's config.json text.
// Compact encoding expanded first (so a header can hold a 1 MB name or 100k keys).
//
// Checks (abort() on failure):
//   - a refused read carries a message; an accepted one renders adapter-info (text and JSON, the JSON parses)
//     and accounts for every input tensor (one mapping each);
//   - for peft, mlx, kohya and gguf-names: an accepted WriteAdapter emits a file that ParseWholeFile accepts with
//     the planned tensors, its config text is JSON (for peft, a config ParseLoraConfig accepts), and reading it
//     back does not crash; the PEFT re-read holds the same modules;
//   - a header-only read (the header plus InlineTensorRanges' bytes, as the CLIs read) accepts what the whole
//     read accepts, with the same modules and mappings;
//   - Translate to the same format agrees with ReadAdapter + WriteAdapter on success, and its reports render.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "adapter/adapter_report.h"
#include "adapter/lora_config.h"
#include "adapter/tensor_fetch.h"
#include "adapter/translate.h"
#include "core/json.h"
#include "fuzz_input.h"
#include "json_mutator.h"

namespace {

using namespace pb::adapter;

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_adapter_readers: %s\n%s\n", what.c_str(), detail.substr(0, 4000).c_str());
  std::abort();
}

struct Sink : pb::ByteSink {
  std::vector<uint8_t> bytes;
  pb::Status Write(std::span<const uint8_t> b) override {
    bytes.insert(bytes.end(), b.begin(), b.end());
    return pb::Status::Ok();
  }
};

bool IsJson(const std::string& text) { return pb::ParseJson(text, "output").ok(); }

constexpr AdapterFormat kWritable[] = {AdapterFormat::kPeft, AdapterFormat::kMlx, AdapterFormat::kKohya,
                                       AdapterFormat::kGgufNames};

void CheckWrite(const ReadResult& read, AdapterFormat to, const AdapterSource& source, const ReadOptions& ro) {
  WriteOptions wo;
  wo.strict = ro.strict;
  wo.base_config = source.base_config;
  wo.arch = read.adapter.arch ? read.adapter.arch : ro.arch;
  auto out = WriteAdapter(read.adapter, to, wo);
  if (!out.ok()) {
    if (out.error().message.empty()) Fail("a refused write without a message");
    return;
  }
  Sink sink;
  auto emitted = EmitSafetensors(out->weights, sink);
  if (!emitted.ok()) Fail("a planned adapter cannot be emitted: " + emitted.error().message);
  auto parsed = pb::ParseWholeFile(sink.bytes);
  if (!parsed.ok()) Fail("a written adapter does not parse: " + parsed.error().message, std::string(FormatName(to)));
  if (parsed->tensor_count() != out->weights.tensors.size())
    Fail("a written adapter lost tensors", std::string(FormatName(to)));
  if (out->config_name && !IsJson(out->config_text)) Fail("a written config is not JSON", out->config_text);
  if (to == AdapterFormat::kPeft) {
    auto cfg = ParseLoraConfig(out->config_text);
    if (!cfg.ok()) Fail("a written PEFT config is refused: " + cfg.error().message, out->config_text);
  }
  AdapterSource back{out->weights_name, sink.bytes, std::nullopt, source.base_config};
  if (out->config_name) back.config = out->config_text;
  ReadOptions bo;
  bo.format = to;
  bo.arch = wo.arch;
  auto again = ReadAdapter(back, bo);
  if (to == AdapterFormat::kPeft) {
    if (!again.ok()) Fail("a written PEFT adapter is not read back: " + again.error().message, out->config_text);
    if (again->adapter.modules.size() != read.adapter.modules.size())
      Fail("the PEFT round trip changed the module count",
           std::to_string(read.adapter.modules.size()) + " -> " + std::to_string(again->adapter.modules.size()));
  }
}

// The CLIs read an adapter from its header and the few inline tensors' bytes (tensors referenced by range):
// that read must reach the same verdict, modules and mappings as the read of the whole file.
void CheckHeaderOnly(const ReadResult& whole, const pb::Header& header, const AdapterSource& source,
                     const ReadOptions& ro) {
  std::vector<uint8_t> inline_bytes;
  for (const ByteRange& r : InlineTensorRanges(header)) {
    if (r.end > source.weights.size() || r.begin > r.end) Fail("an inline tensor range is outside the file");
    inline_bytes.insert(inline_bytes.end(), source.weights.begin() + r.begin, source.weights.begin() + r.end);
  }
  AdapterSource lazy{source.weights_name, {}, source.config, source.base_config, &header, inline_bytes};
  auto read = ReadAdapter(lazy, ro);
  if (!read.ok()) Fail("a header-only read refuses what the whole read accepts: " + read.error().message);
  if (read->adapter.modules.size() != whole.adapter.modules.size() || read->mappings.size() != whole.mappings.size())
    Fail("a header-only read finds other modules or mappings",
         std::to_string(read->adapter.modules.size()) + " vs " + std::to_string(whole.adapter.modules.size()));
  for (size_t i = 0; i < read->mappings.size(); ++i) {
    const TensorMapping &a = read->mappings[i], &b = whole.mappings[i];
    if (a.from != b.from || a.to != b.to || a.action != b.action)
      Fail("a header-only read maps a tensor otherwise",
           a.from + " -> " + a.to + " (" + a.action + ") vs " + b.from + " -> " + b.to + " (" + b.action + ")");
  }
}

}  // namespace

PB_FUZZ_DEFINE_MUTATOR((pb::fuzz::MutatorVocabulary{
    {"dtype",
     "shape",
     "data_offsets",
     "__metadata__",
     "peft_type",
     "r",
     "lora_alpha",
     "target_modules",
     "use_dora",
     "lora_parameters",
     "rank",
     "scale",
     "alpha",
     "keys",
     "num_layers",
     "fine_tune_type",
     "modules_to_save",
     "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
     "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
     "model.layers.0.self_attn.q_proj.lora_a",
     "lora_te_text_model_encoder_layers_0_self_attn_q_proj.lora_down.weight",
     "blk.0.attn_q.weight.lora_a",
     "adapter.type",
     "general.type",
     "adapter.lora.alpha"},
    {"F32", "F16", "BF16", "I64", "F8_E4M3", "LORA", "lora", "q_proj", "base_model.model.", ".lora_A.weight",
     ".lora_B.weight", ".lora_embedding_A", ".lora_magnitude_vector", ".lora_a", ".alpha", ".lora_up.weight",
     "_lora.down.weight", "attn_q", "adapter"}}))

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  auto parts = pb::fuzz::SplitParts(input, 4);
  if (parts.size() < 2) return 0;
  const std::string_view opts = parts[0];
  const NamingTables& tables = NamingTables::Builtin();
  ReadOptions ro;
  if (opts.size() > 0 && static_cast<uint8_t>(opts[0]) % 8 >= 1 &&
      static_cast<uint8_t>(opts[0]) % 8 <= kAdapterFormatCount)
    ro.format = static_cast<AdapterFormat>(static_cast<uint8_t>(opts[0]) % 8 - 1);
  if (opts.size() > 1) {
    ro.strict = opts[1] & 1;
    size_t arch = (static_cast<uint8_t>(opts[1]) >> 1) % (tables.arches().size() + 1);
    if (arch > 0) ro.arch = tables.arches()[arch - 1].name;
  }
  const std::string_view weights = parts[1];
  AdapterSource source{"adapter_model.safetensors",
                       std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(weights.data()), weights.size()),
                       parts.size() > 2 ? std::optional<std::string>(std::string(parts[2])) : std::nullopt,
                       parts.size() > 3 ? std::optional<std::string>(std::string(parts[3])) : std::nullopt};
  auto read = ReadAdapter(source, ro);
  if (!read.ok()) {
    if (read.error().message.empty()) Fail("a refused read without a message");
    return 0;
  }
  (void)RenderAdapterInfoText(read.value());
  // Every round trip below parses the config again and compiles each of its patterns: with 16,437
  // modules_to_save regexes one read costs ~0.1 s natively but ~2.5 s under ASan + coverage, and the ten
  // round trips went past the timeout (docs/fuzzing.md). One read of such a config is checked; the round
  // trips of configs with more than kRoundTripPatterns patterns are left out.
  constexpr size_t kRoundTripPatterns = 1000;
  const LoraConfig& c = read->adapter.config;
  if (c.rank_pattern.size() + c.alpha_pattern.size() + c.modules_to_save.size() > kRoundTripPatterns) return 0;
  if (!IsJson(RenderAdapterInfoJson(read.value()))) Fail("adapter-info JSON is not JSON");
  auto header = pb::ParseWholeFile(source.weights);
  if (!header.ok()) Fail("an adapter was read from a file ParseWholeFile refuses");
  if (read->mappings.size() != header->tensor_count())
    Fail("input tensors not accounted for", std::to_string(read->mappings.size()) + " mappings for " +
                                                std::to_string(header->tensor_count()) + " tensors");
  for (AdapterFormat to : kWritable) CheckWrite(read.value(), to, source, ro);
  CheckHeaderOnly(read.value(), header.value(), source, ro);

  const AdapterFormat to = kWritable[opts.size() > 2 ? static_cast<uint8_t>(opts[2]) % 4 : 0];
  auto translated = Translate(source, to, ro, WriteOptions{.strict = ro.strict});
  if (translated.ok()) {
    (void)RenderTranslateText(translated.value(), to, true);
    if (!IsJson(RenderTranslateJson(translated.value(), to, false))) Fail("translate JSON is not JSON");
  }
  return 0;
}

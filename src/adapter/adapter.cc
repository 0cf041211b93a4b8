#include "adapter/adapter.h"

#include <algorithm>
#include <array>
#include <map>

namespace pb::adapter {

namespace {

struct RoleSuffix {
  PeftRole role;
  std::string_view suffix;
};
// Longest suffixes first where one ends another (none do today, but the order documents the intent).
constexpr std::array<RoleSuffix, 7> kRoleSuffixes = {{
    {PeftRole::kLoraA, ".lora_A.weight"},
    {PeftRole::kLoraB, ".lora_B.weight"},
    {PeftRole::kLoraBBias, ".lora_B.bias"},
    {PeftRole::kEmbeddingA, ".lora_embedding_A"},
    {PeftRole::kEmbeddingB, ".lora_embedding_B"},
    {PeftRole::kMagnitude, ".lora_magnitude_vector"},
    {PeftRole::kTrainableTokens, ".token_adapter.trainable_tokens_delta"},
}};

Error Mismatch(const std::string& module, const std::string& what) {
  return MakeError(ErrorCode::ShapeMismatch, "module `" + module + "`: " + what);
}

}  // namespace

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t Tensor::element_count() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::string_view LoraShapeName(LoraShape shape) {
  switch (shape) {
    case LoraShape::kLinear: return "linear";
    case LoraShape::kEmbedding: return "embedding";
    case LoraShape::kConv: return "conv";
    case LoraShape::kExperts: return "experts";
  }
  return "?";
}

std::string_view ExtraKindName(ExtraKind kind) {
  switch (kind) {
    case ExtraKind::kModulesToSave: return "modules_to_save";
    case ExtraKind::kSavedEmbedding: return "saved_embedding";
    case ExtraKind::kBias: return "bias";
    case ExtraKind::kTrainableTokens: return "trainable_tokens";
  }
  return "?";
}

std::string TrainableTokensModule(const ExtraTensor& e) {
  const std::string_view suffix = PeftRoleSuffix(PeftRole::kTrainableTokens);
  std::string_view key = e.key;
  if (key.ends_with(suffix)) key.remove_suffix(suffix.size());
  return std::string(key);
}

std::string DescribeExtra(const ExtraTensor& e) {
  if (e.kind == ExtraKind::kTrainableTokens)
    return "a trainable_tokens tensor (" + std::to_string(e.token_indices.size()) + " replaced rows of `" +
           TrainableTokensModule(e) + "`)";
  return "a full " + std::string(ExtraKindName(e.kind)) + " tensor";
}

uint64_t LoraModule::in_features() const { return a.shape.size() >= 2 ? a.shape[1] : 0; }
uint64_t LoraModule::out_features() const { return b.shape.empty() ? 0 : b.shape[0]; }

uint64_t Adapter::parameter_count() const {
  uint64_t n = 0;
  for (const auto& m : modules) {
    n += m.a.element_count() + m.b.element_count();
    if (m.b_bias) n += m.b_bias->element_count();
    if (m.magnitude) n += m.magnitude->element_count();
  }
  for (const auto& e : extras) n += e.tensor.element_count();
  return n;
}

const LoraModule* Adapter::FindModule(std::string_view path) const {
  for (const auto& m : modules)
    if (m.path == path) return &m;
  return nullptr;
}

std::optional<PeftKey> ParsePeftLoraKey(std::string_view key) {
  for (const auto& [role, suffix] : kRoleSuffixes) {
    if (key.size() > suffix.size() && key.ends_with(suffix))
      return PeftKey{std::string(key.substr(0, key.size() - suffix.size())), role};
  }
  // PEFT <= 0.x DoRA checkpoints saved through a raw state_dict keep ".weight" on the magnitude; PEFT's
  // loader appends it anyway, so both spellings mean the same parameter.
  constexpr std::string_view kMagnitudeWeight = ".lora_magnitude_vector.weight";
  if (key.size() > kMagnitudeWeight.size() && key.ends_with(kMagnitudeWeight))
    return PeftKey{std::string(key.substr(0, key.size() - kMagnitudeWeight.size())), PeftRole::kMagnitude};
  return std::nullopt;
}

std::string_view PeftRoleSuffix(PeftRole role) {
  for (const auto& rs : kRoleSuffixes)
    if (rs.role == role) return rs.suffix;
  return "";
}

std::string PeftKeyFor(std::string_view module, PeftRole role) {
  return std::string(module) + std::string(PeftRoleSuffix(role));
}

Tensor TensorFromFile(const Header& header, std::span<const uint8_t> file, size_t index) {
  TensorInfo info = header.tensor(index);
  Tensor t;
  t.dtype = info.dtype;
  t.shape.assign(info.shape.begin(), info.shape.end());
  const uint8_t* begin = file.data() + header.data_start() + info.begin;
  t.bytes.assign(begin, begin + info.byte_length());
  return t;
}

Tensor TensorRefFromHeader(const Header& header, size_t index) {
  TensorInfo info = header.tensor(index);
  Tensor t;
  t.dtype = info.dtype;
  t.shape.assign(info.shape.begin(), info.shape.end());
  t.ref = TensorRef{{header.data_start() + info.begin, header.data_start() + info.end}, t.shape, {}};
  return t;
}

Result<std::vector<LoraModule>> AssembleModules(std::vector<RoleTensor> tensors, const LoraConfig& config) {
  std::vector<LoraModule> modules;
  std::map<std::string, size_t> index;  // module path -> position in `modules`
  std::map<std::string, std::array<bool, 7>> seen;
  for (auto& rt : tensors) {
    auto [it, inserted] = index.emplace(rt.module, modules.size());
    if (inserted) {
      modules.emplace_back();
      modules.back().path = rt.module;
    }
    LoraModule& m = modules[it->second];
    auto& flags = seen[rt.module];
    size_t role_slot = static_cast<size_t>(rt.role);
    if (flags[role_slot]) return Mismatch(rt.module, "two tensors for " + std::string(PeftRoleSuffix(rt.role)));
    flags[role_slot] = true;
    switch (rt.role) {
      case PeftRole::kLoraA: m.a = std::move(rt.tensor); break;
      case PeftRole::kLoraB: m.b = std::move(rt.tensor); break;
      case PeftRole::kEmbeddingA:
        m.a = std::move(rt.tensor);
        m.shape = LoraShape::kEmbedding;
        break;
      case PeftRole::kEmbeddingB:
        m.b = std::move(rt.tensor);
        m.shape = LoraShape::kEmbedding;
        break;
      case PeftRole::kLoraBBias: m.b_bias = std::move(rt.tensor); break;
      case PeftRole::kMagnitude: m.magnitude = std::move(rt.tensor); break;
      case PeftRole::kTrainableTokens: break;  // not a LoRA factor; callers keep these as extras
    }
  }
  for (auto& m : modules) {
    const auto& f = seen[m.path];
    bool linear_pair = f[static_cast<size_t>(PeftRole::kLoraA)] || f[static_cast<size_t>(PeftRole::kLoraB)];
    bool embedding_pair = f[static_cast<size_t>(PeftRole::kEmbeddingA)] ||
                          f[static_cast<size_t>(PeftRole::kEmbeddingB)];
    if (linear_pair && embedding_pair) return Mismatch(m.path, "has both lora_A/lora_B and lora_embedding_A/B");
    if (!f[static_cast<size_t>(PeftRole::kLoraA)] && !f[static_cast<size_t>(PeftRole::kEmbeddingA)])
      return Mismatch(m.path, "has no lora_A (or lora_embedding_A) tensor");
    if (!f[static_cast<size_t>(PeftRole::kLoraB)] && !f[static_cast<size_t>(PeftRole::kEmbeddingB)])
      return Mismatch(m.path, "has no lora_B (or lora_embedding_B) tensor");
    const auto& as = m.a.shape;
    const auto& bs = m.b.shape;
    // A factor with a zero-size dimension holds no element, so no byte of the file backs the rank or the
    // features it declares (PEFT creates none: r and the features are at least 1); taken, such a shape would
    // size work and memory by numbers the file never paid for (r = 2^62 of [2^62, 0]).
    for (const auto* f : {&m.a, &m.b})
      if (std::find(f->shape.begin(), f->shape.end(), 0) != f->shape.end())
        return Mismatch(m.path, std::string(f == &m.a ? "lora_A " : "lora_B ") + ShapeText(f->shape) +
                                    " has a zero-size dimension; a LoRA factor has r >= 1 rows and columns");
    if (m.shape == LoraShape::kEmbedding) {
      if (as.size() != 2 || bs.size() != 2)
        return Mismatch(m.path, "embedding factors must be 2-D, found A " + ShapeText(as) + " and B " + ShapeText(bs));
      if (as[0] != bs[1])
        return Mismatch(m.path, "lora_embedding_A " + ShapeText(as) + " and lora_embedding_B " + ShapeText(bs) +
                                    " disagree on the rank");
    } else {
      if (as.size() < 2 || as.size() != bs.size() || as.size() > 5)
        return Mismatch(m.path, "lora_A " + ShapeText(as) + " and lora_B " + ShapeText(bs) +
                                    " must both be 2-D (linear) or both 3-D to 5-D (conv)");
      if (as.size() > 2 && bs[1] != 0 && as[0] != bs[1] && as[0] % bs[1] == 0)
        return MakeError(ErrorCode::UnsupportedAdapter,
                         "module `" + m.path + "`: a grouped convolution (lora_A " + ShapeText(as) + ", lora_B " +
                             ShapeText(bs) + ", groups = " + std::to_string(as[0] / bs[1]) +
                             "); PEFT refuses to merge LoRA into conv layers with groups > 1");
      if (as[0] != bs[1])
        return Mismatch(m.path, "lora_A " + ShapeText(as) + " and lora_B " + ShapeText(bs) + " disagree on the rank");
      if (as.size() > 2) {
        m.shape = LoraShape::kConv;
        for (size_t d = 2; d < bs.size(); ++d)
          if (bs[d] != 1) return Mismatch(m.path, "conv lora_B " + ShapeText(bs) + " must have 1x1 kernels");
      }
    }
    if (m.a.dtype != m.b.dtype)
      return Mismatch(m.path,
                      "A is " + std::string(DtypeName(m.a.dtype)) + " but B is " + std::string(DtypeName(m.b.dtype)));
    if (!IsConvertibleFloat(m.a.dtype))
      return MakeError(ErrorCode::UnsupportedDtype, "module `" + m.path + "`: LoRA factors of dtype " +
                                                        std::string(DtypeName(m.a.dtype)) +
                                                        " cannot be applied; expected F16, BF16, F32 or F64");
    uint64_t out = m.out_features();
    if (m.b_bias && (m.b_bias->shape.size() != 1 || m.b_bias->shape[0] != out))
      return Mismatch(m.path, "lora_B.bias " + ShapeText(m.b_bias->shape) + " does not match " + std::to_string(out) +
                                  " output features");
    if (m.magnitude) {
      const auto& ms = m.magnitude->shape;
      uint64_t elements = m.magnitude->element_count();
      bool ok = m.shape == LoraShape::kConv ? (ms.size() == as.size() && ms[0] == 1 && ms[1] == out && elements == out)
                                            : (ms.size() == 1 && ms[0] == out);
      if (!ok)
        return Mismatch(m.path, "lora_magnitude_vector " + ShapeText(ms) + " does not fit " + std::to_string(out) +
                                    " output features" +
                                    (m.shape == LoraShape::kConv ? " (conv magnitudes are [1, out, 1...])" : ""));
    }
    if (auto wrapped = ParamWrapperOf(config, m.path)) {
      // LoRA on a fused experts parameter: PEFT resolves r and alpha for the parameter's path.
      if (!wrapped->ok()) return wrapped->error();
      if (as.size() != 2 || m.magnitude || m.b_bias || m.shape != LoraShape::kLinear)
        return Mismatch(m.path, "LoRA on parameter `" + wrapped->value().parameter_path +
                                    "` must be 2-D lora_A and lora_B only, found A " + ShapeText(as) + " and B " +
                                    ShapeText(bs));
      m.shape = LoraShape::kExperts;
      m.experts = std::move(wrapped->value());
      m.settings = ResolveModuleSettings(config, m.experts->parameter_path);
      const uint64_t r = static_cast<uint64_t>(m.settings.r);
      if (as[0] % r != 0)
        return Mismatch(m.path, "lora_A " + ShapeText(as) + " of parameter `" + m.experts->parameter_path +
                                    "` should have r · experts rows, but " + std::to_string(as[0]) +
                                    " is no multiple of r = " + std::to_string(r));
      m.experts->num_experts = as[0] / r;
      continue;
    }
    m.settings = ResolveModuleSettings(config, m.path);
    if (static_cast<uint64_t>(m.settings.r) != m.rank()) {
      std::string source = m.settings.rank_pattern_key ? "rank_pattern[\"" + *m.settings.rank_pattern_key + "\"]"
                                                       : std::string("r");
      return Mismatch(m.path, "the tensors have rank " + std::to_string(m.rank()) + " but the config gives " + source +
                                  " = " + std::to_string(m.settings.r) +
                                  " (PEFT would fail to load them with a size mismatch)");
    }
  }
  return modules;
}

Result<std::string> CheckDropped(std::string_view command, const std::vector<RejectedTensor>& dropped,
                                 bool allow_partial) {
  std::string lines;
  for (const auto& d : dropped)
    lines += (allow_partial ? "warning: dropped " : "\n  ") + d.name + ": " + d.reason + (allow_partial ? "\n" : "");
  if (dropped.empty() || allow_partial) return lines;
  return MakeError(ErrorCode::UnresolvedTensor,
                   std::string(command) + " would drop " + std::to_string(dropped.size()) +
                       " tensor(s); pass --allow-partial to write the rest anyway:" + lines);
}

}  // namespace pb::adapter

// `--quantize`: the kernels on known values (compressed-tensors' 127.5 ties, saturation, zero groups, the int32
// packing order, fine-grained FP8 blocks) and the planner's choices (what is quantized, what is kept and why, the
// layout's names and shapes, the config block). The bytes against the Python packages themselves are checked live
// (tests/golden/check_quantize.py).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <vector>

#include "core/header.h"

#include "kernels/convert.h"
#include "kernels/quantize.h"
#include "merge/merge_report.h"
#include "merge/quantize_plan.h"

namespace pb {
namespace {

using kernels::QuantType;

float F8(uint8_t b) {
  float f;
  kernels::F8E4M3ToF32(&b, &f, 1);
  return f;
}

std::vector<int8_t> Signed(const std::vector<uint8_t>& q) { return {q.begin(), q.end()}; }

TEST(Quantize, Int8TiesRoundHalfToEvenAfterTheClamp) {
  // amax 255 -> scale 255 / 127.5 = 2 exactly; x / 2 gives the .5 ties.
  const std::vector<float> x = {255, -255, 5, 3, 1, 0, -1, -3};
  std::vector<uint8_t> q(x.size()), scale(4);
  ASSERT_TRUE(kernels::QuantizeSymmetric(x.data(), 1, x.size(), x.size(), QuantType::kInt8, Dtype::F32, q.data(),
                                         scale.data()));
  // 127.5 is clamped to 127 before rounding; -127.5 rounds to even, -128; 2.5 -> 2, 1.5 -> 2, 0.5 -> 0, -1.5 -> -2.
  EXPECT_EQ(Signed(q), (std::vector<int8_t>{127, -128, 2, 2, 0, 0, 0, -2}));
  float s;
  std::memcpy(&s, scale.data(), 4);
  EXPECT_EQ(s, 2.0f);
}

TEST(Quantize, Int4GroupsEachHaveTheirScale) {
  // Two groups of 4: amax 7.5 -> scale 1 (ties at ±7.5, ±0.5); amax 15 -> scale 2.
  const std::vector<float> x = {7.5f, -7.5f, 0.5f, -2.5f, 15, -1, 3, 0};
  std::vector<uint8_t> q(8), scale(2 * 2);
  ASSERT_TRUE(kernels::QuantizeSymmetric(x.data(), 1, 8, 4, QuantType::kInt4, Dtype::BF16, q.data(), scale.data()));
  EXPECT_EQ(Signed(q), (std::vector<int8_t>{7, -8, 0, -2, 7, 0, 2, 0}));
  std::vector<float> s(2);
  kernels::ConvertElements(Dtype::BF16, Dtype::F32, scale.data(), s.data(), 2);
  EXPECT_EQ(s, (std::vector<float>{1.0f, 2.0f}));
}

TEST(Quantize, ZeroGroupGetsTheScaleDtypesEps) {
  const std::vector<float> x(6, 0.0f);
  for (auto [t, eps] :
       {std::pair{Dtype::BF16, 0.0078125f}, {Dtype::F16, 0.0009765625f}, {Dtype::F32, 1.1920928955078125e-07f}}) {
    std::vector<uint8_t> q(6, 0xAA), scale(2 * 4);
    ASSERT_TRUE(kernels::QuantizeSymmetric(x.data(), 2, 3, 3, QuantType::kInt8, t, q.data(), scale.data()));
    std::vector<float> s(2);
    kernels::ConvertElements(t, Dtype::F32, scale.data(), s.data(), 2);
    EXPECT_EQ(s[0], eps) << DtypeName(t);
    EXPECT_EQ(s[1], eps) << DtypeName(t);
    EXPECT_EQ(q, std::vector<uint8_t>(6, 0));
  }
}

TEST(Quantize, ScaleAndQuotientAreRoundedToTheModelDtype) {
  // BF16: scale = bf16(3 / 127.5) = bf16(0.0235294...) = 0.0235595703125. The quotients are rounded to BF16
  // before the integer rounding: 3 / scale = 127.34 -> 127.5 -> clamped to 127; -127.34 -> -127.5 -> -128 (half to
  // even; the exact quotient would give -127); 1 / scale = 42.45 -> 42.5 -> 42 (even); 2 / scale = 84.89 -> 85.
  const std::vector<float> x = {3, 1, 2, -3};
  std::vector<uint8_t> q(4), scale(2);
  ASSERT_TRUE(kernels::QuantizeSymmetric(x.data(), 1, 4, 4, QuantType::kInt8, Dtype::BF16, q.data(), scale.data()));
  float s;
  kernels::ConvertElements(Dtype::BF16, Dtype::F32, scale.data(), &s, 1);
  EXPECT_EQ(s, 0.0235595703125f);
  EXPECT_EQ(Signed(q), (std::vector<int8_t>{127, 42, 85, -128}));
}

TEST(Quantize, Fp8SaturatesAtTheClampAndRoundsToNearestEven) {
  const std::vector<float> x = {1000, -1000, 896, 0};
  std::vector<uint8_t> q(4), scale(4);
  ASSERT_TRUE(kernels::QuantizeSymmetric(x.data(), 1, 4, 4, QuantType::kFp8E4M3, Dtype::F32, q.data(), scale.data()));
  float s;
  std::memcpy(&s, scale.data(), 4);
  EXPECT_EQ(s, 1000.0f / 448.0f);
  EXPECT_EQ(F8(q[0]), 448.0f);  // 1000 / s rounds to just above 448 in fp32: the clamp saturates it, never NaN
  EXPECT_EQ(F8(q[1]), -448.0f);
  EXPECT_EQ(F8(q[2]), 416.0f);  // 401.4: between 384 and 416 (steps of 32), nearer 416
  EXPECT_EQ(q[3], 0);
}

TEST(Quantize, RefusesGroupsThatDoNotDivideTheRow) {
  std::vector<float> x(130, 1.0f);
  std::vector<uint8_t> q(130), scale(8);
  EXPECT_FALSE(
      kernels::QuantizeSymmetric(x.data(), 1, 130, 128, QuantType::kInt4, Dtype::BF16, q.data(), scale.data()));
  EXPECT_FALSE(kernels::QuantizeSymmetric(x.data(), 1, 130, 0, QuantType::kInt4, Dtype::BF16, q.data(), scale.data()));
  EXPECT_FALSE(
      kernels::QuantizeSymmetric(x.data(), 1, 130, 130, QuantType::kInt4, Dtype::F8_E4M3, q.data(), scale.data()));
}

TEST(Quantize, PackInt32IsLsbFirstWithTheOffset) {
  std::vector<int8_t> q;
  for (int v = -8; v <= 7; ++v) q.push_back(static_cast<int8_t>(v));
  std::vector<uint8_t> out(2 * 4);
  ASSERT_EQ(kernels::PackedWords(16, 4), 2u);
  kernels::PackInt32(q.data(), 1, 16, 4, out.data());
  uint32_t w[2];
  std::memcpy(w, out.data(), 8);
  EXPECT_EQ(w[0], 0x76543210u);  // -8 + 8 = 0 in the lowest nibble
  EXPECT_EQ(w[1], 0xFEDCBA98u);
  // A row's tail word is zero-padded; rows do not share words.
  const std::vector<int8_t> tail = {1, 2, 3, -1, 0, 0};
  std::vector<uint8_t> packed(2 * 4);
  kernels::PackInt32(tail.data(), 2, 3, 4, packed.data());
  std::memcpy(w, packed.data(), 8);
  EXPECT_EQ(w[0], 0xBA9u);
  EXPECT_EQ(w[1], 0x887u);
  const std::vector<int8_t> bytes = {-128, 0, 127, 1};
  kernels::PackInt32(bytes.data(), 1, 4, 8, packed.data());
  std::memcpy(w, packed.data(), 4);
  EXPECT_EQ(w[0], 0x81FF8000u);
}

TEST(Quantize, FineGrainedFp8Blocks) {
  // Two rows, two 128-column blocks: block 0's amax 2 -> scale 448 / 2 = 224, inverse 1 / 224; block 1 all zero ->
  // scale 1, inverse 1.
  std::vector<float> x(2 * 256, 0.0f);
  x[0] = 2.0f;
  x[1] = -1.0f;
  x[256 + 5] = 0.01f;
  std::vector<uint8_t> q(x.size());
  std::vector<float> inv(2);
  ASSERT_TRUE(kernels::QuantizeFp8Blocks(x.data(), 2, 256, 128, q.data(), inv.data()));
  EXPECT_EQ(inv[0], 1.0f / 224.0f);
  EXPECT_EQ(inv[1], 1.0f);
  EXPECT_EQ(F8(q[0]), 448.0f);
  EXPECT_EQ(F8(q[1]), -224.0f);
  EXPECT_EQ(F8(q[256 + 5]), 2.25f);  // 2.24 -> e4m3 steps of 0.25 between 2 and 4
  EXPECT_EQ(q[128], 0);
  EXPECT_FALSE(kernels::QuantizeFp8Blocks(x.data(), 2, 256, 100, q.data(), inv.data()));
}

TEST(Quantize, DequantizeMultipliesInTheScaleDtype) {
  const std::vector<uint8_t> q = {static_cast<uint8_t>(int8_t{-3}), 7};
  const std::vector<float> scale = {0.1f};
  std::vector<float> out(2);
  kernels::DequantizeSymmetric(q.data(), scale.data(), 1, 2, 2, QuantType::kInt4, Dtype::BF16, out.data());
  std::vector<uint16_t> bf(2);
  const float exact[2] = {-3 * 0.1f, 7 * 0.1f};
  kernels::F32ToBF16(exact, bf.data(), 2);
  std::vector<float> expected(2);
  kernels::BF16ToF32(bf.data(), expected.data(), 2);
  EXPECT_EQ(out, expected);
}

TEST(QuantizeOptions, DefaultsAndRefusals) {
  auto fp8 = merge::MakeQuantizeOptions("fp8", std::nullopt, std::nullopt);
  ASSERT_TRUE(fp8.ok());
  EXPECT_EQ(fp8->scheme, merge::QuantScheme::kChannel);
  auto int4 = merge::MakeQuantizeOptions("int4", std::nullopt, std::nullopt);
  ASSERT_TRUE(int4.ok());
  EXPECT_EQ(int4->scheme, merge::QuantScheme::kGroup);
  EXPECT_EQ(int4->group_size, 128u);
  auto g64 = merge::MakeQuantizeOptions("int8", "per-group", "64");
  ASSERT_TRUE(g64.ok());
  EXPECT_EQ(g64->group_size, 64u);
  EXPECT_FALSE(merge::MakeQuantizeOptions("fp8", "per-group", std::nullopt).ok());
  EXPECT_FALSE(merge::MakeQuantizeOptions("int8", "block", std::nullopt).ok());
  EXPECT_FALSE(merge::MakeQuantizeOptions("int4", "per-channel", "64").ok());
  EXPECT_FALSE(merge::MakeQuantizeOptions("int4", std::nullopt, "0").ok());
  EXPECT_FALSE(merge::MakeQuantizeOptions("int4", std::nullopt, "12x").ok());
  EXPECT_FALSE(merge::MakeQuantizeOptions("nf4", std::nullopt, std::nullopt).ok());
}

merge::PlannedTensor Weight(std::string name, std::vector<uint64_t> shape, Dtype dtype = Dtype::BF16) {
  merge::PlannedTensor p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.in_dtype = p.out_dtype = dtype;
  return p;
}

TEST(QuantizePlan, ChoosesLinearWeightsAndListsWhatItKeeps) {
  merge::QuantizePlan plan;
  plan.options = merge::MakeQuantizeOptions("int4", std::nullopt, std::nullopt).value();
  const auto& tables = adapter::NamingTables::Builtin();
  const adapter::ArchTable* llama = tables.Find("llama");
  std::vector<merge::PlannedTensor> t = {
      Weight("model.layers.0.self_attn.q_proj.weight", {256, 256}),
      Weight("model.layers.0.mlp.down_proj.weight", {256, 200}),  // 200 columns: no whole groups of 128
      Weight("model.embed_tokens.weight", {1000, 256}),           // an Embedding
      Weight("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", {32, 8}),  // T5's, an Embedding
      Weight("model.layers.0.input_layernorm.weight", {256}),                                   // 1-D
      Weight("lm_head.weight", {1000, 256}),
      Weight("model.layers.0.mlp.gate.weight", {8, 256}),  // a MoE router
      Weight("model.layers.0.mlp.experts.3.up_proj.weight", {128, 256}),
      Weight("model.layers.0.self_attn.k_proj.bias", {256}),
      Weight("model.layers.0.self_attn.v_proj.weight", {256, 256}, Dtype::F8_E4M3),
  };
  for (auto& p : t) merge::PlanQuantizedTensor(p, tables, llama, plan);
  merge::FinishQuantizePlan(plan);
  ASSERT_TRUE(t[0].quantized);
  const auto& q = *t[0].quantized;
  EXPECT_EQ(q.weight, "model.layers.0.self_attn.q_proj.weight_packed");
  EXPECT_EQ(q.weight_dtype, Dtype::I32);
  EXPECT_EQ(q.weight_shape, (std::vector<uint64_t>{256, 32}));
  EXPECT_EQ(q.scale, "model.layers.0.self_attn.q_proj.weight_scale");
  EXPECT_EQ(q.scale_dtype, Dtype::BF16);
  EXPECT_EQ(q.scale_shape, (std::vector<uint64_t>{256, 2}));
  EXPECT_EQ(q.shape, "model.layers.0.self_attn.q_proj.weight_shape");
  for (size_t i = 1; i < t.size(); ++i) EXPECT_FALSE(t[i].quantized) << t[i].name;
  EXPECT_EQ(plan.quantized, std::vector<std::string>{"model.layers.0.self_attn.q_proj.weight"});
  ASSERT_EQ(plan.kept.size(), 5u);
  EXPECT_EQ(plan.kept[0].first, "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(plan.ignore,
            (std::vector<std::string>{"model.layers.0.mlp.down_proj", "model.layers.0.mlp.experts.3.up_proj",
                                      "model.layers.0.mlp.gate", "model.layers.0.self_attn.v_proj", "lm_head"}));
  Json config = merge::QuantizationConfigJson(plan);
  EXPECT_EQ(config["format"], "pack-quantized");
  EXPECT_EQ(config["version"], std::string(merge::kCompressedTensorsVersion));
  EXPECT_EQ(config["config_groups"]["group_0"]["weights"]["group_size"], 128);
  EXPECT_EQ(config["config_groups"]["group_0"]["weights"]["num_bits"], 4);
  EXPECT_TRUE(config["config_groups"]["group_0"]["input_activations"].is_null());
}

TEST(QuantizePlan, FineGrainedNeedsWholeBlocks) {
  merge::QuantizePlan plan;
  plan.options = merge::MakeQuantizeOptions("fp8", "block", std::nullopt).value();
  auto a = Weight("model.layers.0.mlp.up_proj.weight", {384, 256}, Dtype::F16);
  auto b = Weight("model.layers.0.mlp.down_proj.weight", {256, 384 + 64}, Dtype::F16);
  merge::PlanQuantizedTensor(a, adapter::NamingTables::Builtin(), nullptr, plan);
  merge::PlanQuantizedTensor(b, adapter::NamingTables::Builtin(), nullptr, plan);
  ASSERT_TRUE(a.quantized);
  EXPECT_EQ(a.quantized->weight, "model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(a.quantized->weight_dtype, Dtype::F8_E4M3);
  EXPECT_EQ(a.quantized->scale, "model.layers.0.mlp.up_proj.weight_scale_inv");
  EXPECT_EQ(a.quantized->scale_dtype, Dtype::F32);
  EXPECT_EQ(a.quantized->scale_shape, (std::vector<uint64_t>{3, 2}));
  EXPECT_FALSE(b.quantized);
  merge::FinishQuantizePlan(plan);
  Json config = merge::QuantizationConfigJson(plan);
  EXPECT_EQ(config["quant_method"], "fp8");
  EXPECT_EQ(config["modules_to_not_convert"], Json::array({"model.layers.0.mlp.down_proj", "lm_head"}));
}

TEST(QuantizePlan, AGroupSizeThatDividesNoWeightIsRefused) {
  merge::QuantizePlan plan;
  plan.options = merge::MakeQuantizeOptions("int4", std::nullopt, "100").value();
  const auto& tables = adapter::NamingTables::Builtin();
  std::vector<merge::PlannedTensor> t;
  for (const char* layer : {"0", "1"}) {
    t.push_back(Weight(std::string("model.layers.") + layer + ".self_attn.q_proj.weight", {32, 32}));
    t.push_back(Weight(std::string("model.layers.") + layer + ".mlp.down_proj.weight", {32, 64}));
  }
  t.push_back(Weight("lm_head.weight", {128, 32}));
  for (auto& p : t) merge::PlanQuantizedTensor(p, tables, tables.Find("llama"), plan);
  merge::FinishQuantizePlan(plan);
  EXPECT_TRUE(plan.quantized.empty());
  Status s = merge::CheckQuantizePlan(plan);
  ASSERT_FALSE(s.ok()) << "a --quantize that quantizes nothing used to write an unquantized model claiming otherwise";
  EXPECT_EQ(s.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(
      s.error().message,
      "--quantize int4 --scheme per-group --group-size 100 would quantize no weight of this model (its config.json "
      "would claim a quantization that is not there):\n"
      "  2 x `model.layers.*.self_attn.q_proj.weight`: in_features 32 is not a multiple of the group size 100\n"
      "  2 x `model.layers.*.mlp.down_proj.weight`: in_features 64 is not a multiple of the group size 100\n"
      "  1 x `lm_head.weight`: lm_head (llm-compressor's default ignore)\n"
      "--group-size 100 divides the in_features of none of them; 32 divides every one (or use --scheme per-channel)");
}

TEST(QuantizePlan, AModelWithNothingToQuantizeIsRefused) {
  merge::QuantizePlan plan;
  plan.options = merge::MakeQuantizeOptions("fp8", std::nullopt, std::nullopt).value();
  auto emb = Weight("model.embed_tokens.weight", {128, 32});
  auto head = Weight("lm_head.weight", {128, 32});
  merge::PlanQuantizedTensor(emb, adapter::NamingTables::Builtin(), nullptr, plan);
  merge::PlanQuantizedTensor(head, adapter::NamingTables::Builtin(), nullptr, plan);
  merge::FinishQuantizePlan(plan);
  Status s = merge::CheckQuantizePlan(plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("1 x `lm_head.weight`: lm_head"), std::string::npos) << s.error().message;
}

TEST(QuantizePlan, WeightsKeptForTheirDimsAreWarnedOncePerClass) {
  merge::QuantizePlan plan;
  plan.options = merge::MakeQuantizeOptions("int4", std::nullopt, std::nullopt).value();
  const auto& tables = adapter::NamingTables::Builtin();
  std::vector<merge::PlannedTensor> t;
  for (int layer = 0; layer < 3; ++layer) {
    const std::string l = "model.layers." + std::to_string(layer);
    t.push_back(Weight(l + ".self_attn.q_proj.weight", {256, 256}));
    t.push_back(Weight(l + ".mlp.down_proj.weight", {256, 200}));
    t.push_back(Weight(l + ".mlp.up_proj.weight", {200, 256}, Dtype::F8_E4M3));
  }
  t.push_back(Weight("lm_head.weight", {1000, 256}));
  for (auto& p : t) merge::PlanQuantizedTensor(p, tables, tables.Find("llama"), plan);
  merge::FinishQuantizePlan(plan);
  ASSERT_TRUE(merge::CheckQuantizePlan(plan).ok());
  EXPECT_EQ(plan.quantized.size(), 3u);
  // One line per class (not per weight); lm_head, the libraries' own default, is not warned about.
  EXPECT_EQ(
      plan.warnings,
      (std::vector<std::string>{
          "--quantize int4 --scheme per-group --group-size 128: 3 weight(s) `model.layers.*.mlp.down_proj.weight` "
          "stay unquantized: in_features 200 is not a multiple of the group size 128",
          "--quantize int4 --scheme per-group --group-size 128: 3 weight(s) `model.layers.*.mlp.up_proj.weight` "
          "stay unquantized: F8_E4M3: only BF16, F16 and F32 weights are quantized"}));
}

// The text summary speaks of classes of weights, not of each one: a 700-weight model (an MoE: tens of thousands)
// printed a line per weight kept and a line per weight's error.
TEST(QuantizeSummary, KeptWeightsAndErrorsArePrintedPerClass) {
  merge::QuantizePlan plan;
  plan.options = merge::MakeQuantizeOptions("int4", std::nullopt, std::nullopt).value();
  const auto& tables = adapter::NamingTables::Builtin();
  std::vector<merge::PlannedTensor> t;
  for (int layer = 0; layer < 3; ++layer) {
    const std::string l = "model.layers." + std::to_string(layer);
    t.push_back(Weight(l + ".self_attn.q_proj.weight", {256, 256}));
    for (int expert = 0; expert < 4; ++expert)
      t.push_back(Weight(l + ".mlp.experts." + std::to_string(expert) + ".up_proj.weight", {256, 256}));
  }
  t.push_back(Weight("lm_head.weight", {1000, 256}));
  for (auto& p : t) merge::PlanQuantizedTensor(p, tables, tables.Find("llama"), plan);
  merge::FinishQuantizePlan(plan);
  ASSERT_TRUE(merge::CheckQuantizePlan(plan).ok());
  EXPECT_EQ(merge::WeightClass("model.layers.12.mlp.experts.7.up_proj.weight"),
            "model.layers.*.mlp.experts.*.up_proj.weight");
  EXPECT_EQ(merge::KeptClassLines(plan),
            (std::vector<std::string>{"12 x `model.layers.*.mlp.experts.*.up_proj.weight`: MoE expert weight",
                                      "1 x `lm_head.weight`: lm_head (llm-compressor's default ignore)"}));
  merge::MergeSummary summary{nullptr, nullptr, 3u << 20, 1.5, 0, false, false};
  for (int layer = 0; layer < 3; ++layer) {
    merge::QuantError e{"model.layers." + std::to_string(layer) + ".self_attn.q_proj.weight"};
    e.max_abs = 0.01 * (layer + 1);
    e.sum_sq_err = 4.0 * (3 - layer);
    e.sum_sq_ref = 400.0;
    e.count = 100;
    summary.quant_errors.push_back(e);
  }
  const std::string text = merge::RenderMergeOutcomeText(summary);
  EXPECT_EQ(text.substr(0, text.find(" in 1.50 s")),
            "dequantization error (max abs, RMS, relative; the largest in each class, --json has every weight's):\n"
            "  3 x `model.layers.*.self_attn.q_proj.weight`: 3.000e-02, 3.464e-01, 1.732e-01\n"
            "3.15 MB");
}

}  // namespace
}  // namespace pb

#ifdef PB_CLI_PATH
// End to end through the native CLI on a golden case (sharded BF16 LLaMA): every quantized weight's bytes are the
// kernels' on the plain merge's weight (the merge rounds to BF16 first, as the package observes the model), its
// dequantized values lie within half a step of the plain merge, the index maps the new names and not the old.
namespace pb::e2e {

namespace fs = std::filesystem;
using kernels::QuantType;

int RunCli(const std::string& args) {
  const std::string cmd = std::string(PB_CLI_PATH) + " " + args + " >/dev/null 2>&1";
  return std::system(cmd.c_str());
}

std::map<std::string, std::pair<Dtype, std::vector<uint8_t>>> ReadFolder(const fs::path& dir) {
  std::map<std::string, std::pair<Dtype, std::vector<uint8_t>>> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto header = ParseWholeFile(file);
    EXPECT_TRUE(header.ok()) << entry.path();
    if (!header.ok()) continue;
    for (size_t i = 0; i < header->tensor_count(); ++i) {
      TensorInfo t = header->tensor(i);
      const uint8_t* at = file.data() + header->data_start() + t.begin;
      out[std::string(t.name)] = {t.dtype, std::vector<uint8_t>(at, at + t.byte_length())};
    }
  }
  return out;
}

TEST(QuantizeCli, Int8GroupsOnAShardedBf16Merge) {
  const fs::path golden = fs::path(PB_SOURCE_DIR) / "tests" / "golden" / "corpus" / "llama_lora_bf16";
  const fs::path dir = fs::temp_directory_path() / ("pb_quantize_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string common =
      "merge --base " + (golden / "base").string() + " --adapter " + (golden / "adapter").string();
  ASSERT_EQ(RunCli(common + " -o " + (dir / "plain").string()), 0);
  ASSERT_EQ(RunCli(common + " -o " + (dir / "q").string() + " --quantize int8 --group-size 16"), 0);
  auto plain = ReadFolder(dir / "plain");
  auto quant = ReadFolder(dir / "q");
  size_t checked = 0;
  for (const auto& [name, value] : plain) {
    const std::string module = name.substr(0, name.size() - 7);
    if (!quant.count(module + ".weight_packed")) continue;
    ++checked;
    const auto& [dtype, bytes] = value;
    ASSERT_EQ(dtype, Dtype::BF16) << name;
    EXPECT_FALSE(quant.count(name)) << name;
    const auto& shape = quant.at(module + ".weight_shape").second;
    uint64_t rows, cols;
    std::memcpy(&rows, shape.data(), 8);
    std::memcpy(&cols, shape.data() + 8, 8);
    ASSERT_EQ(rows * cols * 2, bytes.size()) << name;
    std::vector<float> w(rows * cols);
    kernels::ConvertElements(Dtype::BF16, Dtype::F32, bytes.data(), w.data(), w.size());
    std::vector<uint8_t> q(w.size()), scale(rows * (cols / 16) * 2), packed(rows * kernels::PackedWords(cols, 8) * 4);
    ASSERT_TRUE(
        kernels::QuantizeSymmetric(w.data(), rows, cols, 16, QuantType::kInt8, Dtype::BF16, q.data(), scale.data()));
    kernels::PackInt32(reinterpret_cast<const int8_t*>(q.data()), rows, cols, 8, packed.data());
    EXPECT_EQ(quant.at(module + ".weight_packed").second, packed) << name;
    EXPECT_EQ(quant.at(module + ".weight_scale").second, scale) << name;
    std::vector<float> s(rows * (cols / 16));
    kernels::ConvertElements(Dtype::BF16, Dtype::F32, scale.data(), s.data(), s.size());
    for (size_t i = 0; i < w.size(); ++i) {
      const float step = s[(i / cols) * (cols / 16) + (i % cols) / 16];
      const float back = static_cast<float>(static_cast<int8_t>(q[i])) * step;
      ASSERT_LE(std::fabs(back - w[i]), step * 0.5f + std::fabs(w[i]) * 0.02f) << name << " element " << i;
    }
  }
  EXPECT_EQ(checked, 14u);  // every projection of both layers; lm_head kept
  EXPECT_TRUE(quant.count("lm_head.weight"));
  std::ifstream index(dir / "q" / "model.safetensors.index.json");
  const std::string text((std::istreambuf_iterator<char>(index)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"model.layers.0.self_attn.q_proj.weight_scale\""), std::string::npos);
  EXPECT_EQ(text.find("\"model.layers.0.self_attn.q_proj.weight\""), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace pb::e2e
#endif

// The GGUF writer's layout and encodings, against values worked out by hand from gguf-py's rules
// (gguf_writer.py, quants.py) and ggml's reader checks (gguf.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gguf/gguf_encode.h"
#include "gguf/gguf_writer.h"

namespace pb::gguf {
namespace {

template <typename T>
T At(const std::vector<uint8_t>& b, size_t offset) {
  T v;
  std::memcpy(&v, b.data() + offset, sizeof(T));
  return v;
}

float FloatOf(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(GgufWriter, HeaderLayoutAsGgufPyWritesIt) {
  auto layout =
      PlanGguf({KeyValue::String("general.architecture", "llama"), KeyValue::Float32("adapter.lora.alpha", 16)},
               {{"blk.0.attn_q.weight.lora_a", {2, 64}, TensorType::kF32},
                {"blk.0.attn_q.weight.lora_b", {3, 2}, TensorType::kF16}});
  ASSERT_TRUE(layout.ok()) << layout.error().message;
  const std::vector<uint8_t> h = EncodeHeader(layout.value());
  EXPECT_EQ(h.size(), layout->data_start);
  EXPECT_EQ(h.size() % 32, 0u);
  EXPECT_EQ(At<uint32_t>(h, 0), 0x46554747u);  // "GGUF"
  EXPECT_EQ(std::string(h.begin(), h.begin() + 4), "GGUF");
  EXPECT_EQ(At<uint32_t>(h, 4), 3u);
  EXPECT_EQ(At<uint64_t>(h, 8), 2u);   // tensors
  EXPECT_EQ(At<uint64_t>(h, 16), 2u);  // keys
  size_t at = 24;
  EXPECT_EQ(At<uint64_t>(h, at), 20u);  // "general.architecture"
  at += 8 + 20;
  EXPECT_EQ(At<uint32_t>(h, at), static_cast<uint32_t>(ValueType::kString));
  EXPECT_EQ(At<uint64_t>(h, at + 4), 5u);
  at += 4 + 8 + 5;
  at += 8 + 18;  // "adapter.lora.alpha"
  EXPECT_EQ(At<uint32_t>(h, at), static_cast<uint32_t>(ValueType::kFloat32));
  EXPECT_EQ(At<float>(h, at + 4), 16.0f);
  at += 8;
  // First tensor info: name, n_dims, ne reversed, type, offset.
  EXPECT_EQ(At<uint64_t>(h, at), 26u);
  at += 8 + 26;
  EXPECT_EQ(At<uint32_t>(h, at), 2u);
  EXPECT_EQ(At<uint64_t>(h, at + 4), 64u);  // ne[0] = PyTorch's last dim
  EXPECT_EQ(At<uint64_t>(h, at + 12), 2u);
  EXPECT_EQ(At<uint32_t>(h, at + 20), 0u);  // F32
  EXPECT_EQ(At<uint64_t>(h, at + 24), 0u);
  at += 32;
  at += 8 + 26;
  EXPECT_EQ(At<uint32_t>(h, at + 20 - 0), 1u);  // F16
  EXPECT_EQ(At<uint64_t>(h, at + 24), 512u);    // 2*64*4 = 512, already a multiple of 32
  EXPECT_EQ(layout->sizes[1], 12u);
  EXPECT_EQ(layout->file_size, layout->data_start + 512 + 32);  // the last tensor is padded too
  for (size_t i = at + 32; i < h.size(); ++i) EXPECT_EQ(h[i], 0) << i;
}

TEST(GgufWriter, RefusesWhatLlamaCppRefuses) {
  auto plan = [](std::vector<KeyValue> keys, std::vector<TensorSlot> tensors) { return PlanGguf(keys, tensors); };
  EXPECT_FALSE(plan({}, {{std::string(64, 'x'), {4}, TensorType::kF32}}).ok());
  EXPECT_TRUE(plan({}, {{std::string(63, 'x'), {4}, TensorType::kF32}}).ok());
  EXPECT_FALSE(plan({}, {{"a", {4}, TensorType::kF32}, {"a", {4}, TensorType::kF32}}).ok());
  EXPECT_FALSE(plan({KeyValue::Uint32("k", 1), KeyValue::Uint32("k", 2)}, {}).ok());
  EXPECT_FALSE(plan({KeyValue::Uint32("", 1)}, {}).ok());
  EXPECT_FALSE(plan({}, {{"a", {1, 1, 1, 1, 1}, TensorType::kF32}}).ok());
  auto partial = plan({}, {{"blk.0.attn_q.weight.lora_b", {64, 16}, TensorType::kQ8_0}});
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().message.find("not a multiple of Q8_0's block of 32"), std::string::npos)
      << partial.error().message;
  auto q8 = plan({}, {{"a", {2, 64}, TensorType::kQ8_0}});
  ASSERT_TRUE(q8.ok());
  EXPECT_EQ(q8->sizes[0], 4u * 34);
}

TEST(GgufEncode, Q8_0RoundsHalfAwayFromZeroWithAnFp32Scale) {
  // amax 127 -> d = 1, so q = round(x): ties go away from zero (roundf), not to even.
  std::vector<float> x(32, 0.0f);
  x[0] = 127;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -126.5f;
  x[5] = 3.49f;
  std::vector<uint8_t> out;
  EncodeValues(TensorType::kQ8_0, x, out);
  ASSERT_EQ(out.size(), 34u);
  EXPECT_EQ(At<uint16_t>(out, 0), 0x3c00u);  // fp16 1.0
  EXPECT_EQ(static_cast<int8_t>(out[2]), 127);
  EXPECT_EQ(static_cast<int8_t>(out[3]), 3);
  EXPECT_EQ(static_cast<int8_t>(out[4]), -3);
  EXPECT_EQ(static_cast<int8_t>(out[5]), 1);
  EXPECT_EQ(static_cast<int8_t>(out[6]), -127);
  EXPECT_EQ(static_cast<int8_t>(out[7]), 3);
  // A zero block: d = 0 and every q 0 (id is 0, not inf).
  std::vector<float> zeros(32, 0.0f);
  out.clear();
  EncodeValues(TensorType::kQ8_0, zeros, out);
  for (uint8_t b : out) EXPECT_EQ(b, 0);
  // The quants use the fp32 d; only the stored d is fp16: amax 1 -> d = 1/127 (fp16 0x2008), q = round(x * 127).
  std::vector<float> y(32, 0.0f);
  y[0] = 1.0f;
  y[1] = 0.5f;
  out.clear();
  EncodeValues(TensorType::kQ8_0, y, out);
  EXPECT_EQ(At<uint16_t>(out, 0), 0x2008u);
  EXPECT_EQ(static_cast<int8_t>(out[2]), 127);
  EXPECT_EQ(static_cast<int8_t>(out[3]), 64);  // 63.5 -> 64
  std::vector<float> back(32);
  DecodeValues(TensorType::kQ8_0, out, back.data(), 32);
  EXPECT_EQ(back[0], 0.99993896484375f);  // 127 * fp16(0x2008)
  EXPECT_EQ(back[1], 0.50390625f);        // 64 * fp16(0x2008)
}

TEST(GgufEncode, Bf16RoundsToEvenAndQuietsNan) {
  const std::vector<float> x = {FloatOf(0x3f808000u),  // a tie, even below: stays 0x3f80
                                FloatOf(0x3f818000u),  // a tie, odd below: rounds up to 0x3f82
                                FloatOf(0x3f808001u),  // above the tie: 0x3f81
                                FloatOf(0x7f800001u),  // signalling NaN: quiet, top bits kept
                                FloatOf(0xff812345u)};
  std::vector<uint8_t> out;
  EncodeValues(TensorType::kBF16, x, out);
  EXPECT_EQ(At<uint16_t>(out, 0), 0x3f80u);
  EXPECT_EQ(At<uint16_t>(out, 2), 0x3f82u);
  EXPECT_EQ(At<uint16_t>(out, 4), 0x3f81u);
  EXPECT_EQ(At<uint16_t>(out, 6), 0x7fc0u);
  EXPECT_EQ(At<uint16_t>(out, 8), 0xffc1u);
}

TEST(GgufEncode, F16AsNumpyCastsIt) {
  const std::vector<float> x = {1.0f, 65504.0f, 65520.0f /* rounds to inf */, FloatOf(0x7fa00000u), -0.0f};
  std::vector<uint8_t> out;
  EncodeValues(TensorType::kF16, x, out);
  EXPECT_EQ(At<uint16_t>(out, 0), 0x3c00u);
  EXPECT_EQ(At<uint16_t>(out, 2), 0x7bffu);
  EXPECT_EQ(At<uint16_t>(out, 4), 0x7c00u);
  EXPECT_EQ(At<uint16_t>(out, 6), 0x7d00u);  // numpy: 0x7c00 + (mantissa >> 13)
  EXPECT_EQ(At<uint16_t>(out, 8), 0x8000u);
}

}  // namespace
}  // namespace pb::gguf

// Natural layer order of module paths (adapter/natural_order.h): numeric segments compare as numbers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "adapter/natural_order.h"

namespace pb::adapter {
namespace {

TEST(NaturalOrder, NumericSegmentsCompareAsNumbers) {
  EXPECT_TRUE(NaturalPathLess("model.layers.2.q_proj", "model.layers.10.q_proj"));
  EXPECT_FALSE(NaturalPathLess("model.layers.10.q_proj", "model.layers.2.q_proj"));
  EXPECT_TRUE(NaturalPathLess("layers.9", "layers.10"));
  EXPECT_TRUE(NaturalPathLess("layers.99999999999999999999999", "layers.100000000000000000000000"));  // no overflow
  EXPECT_TRUE(NaturalPathLess("a.b", "a.b.c"));
  EXPECT_FALSE(NaturalPathLess("a.b.c", "a.b"));
  EXPECT_TRUE(NaturalPathLess("h.1.attn", "h.1.mlp"));  // text segments byte-wise
  EXPECT_TRUE(NaturalPathLess("layer2x", "layer10x") == (std::string("layer2x") < "layer10x"));  // mixed: bytes
  EXPECT_FALSE(NaturalPathLess("x.1", "x.1"));
  // Equal numbers spelt differently still order (strictly), so sorting is well defined.
  EXPECT_NE(NaturalPathLess("x.01", "x.1"), NaturalPathLess("x.1", "x.01"));
}

TEST(NaturalOrder, OrderOfAList) {
  std::vector<std::string> paths = {"model.layers.10.self_attn.q_proj", "model.layers.2.self_attn.v_proj",
                                    "model.layers.2.self_attn.q_proj", "lm_head", "model.layers.1.mlp.up_proj"};
  std::vector<std::string_view> views(paths.begin(), paths.end());
  std::vector<std::string> sorted;
  for (size_t i : NaturalOrder(views)) sorted.push_back(paths[i]);
  EXPECT_EQ(sorted,
            (std::vector<std::string>{"lm_head", "model.layers.1.mlp.up_proj", "model.layers.2.self_attn.q_proj",
                                      "model.layers.2.self_attn.v_proj", "model.layers.10.self_attn.q_proj"}));
}

}  // namespace
}  // namespace pb::adapter

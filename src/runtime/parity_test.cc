#include "runtime/parity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ocular {
namespace {

TensorView F32(const std::vector<float>& v) {
  return TensorView{v.data(), DType::kF32, {static_cast<int64_t>(v.size())}};
}

TEST(TapBefore, OrdersTapsInForwardOrderWithNumericLayers) {
  std::vector<std::string> names = {"logits",           "decoder.layers.10", "vision.layers.2",
                                    "decoder.layers.2", "projector",         "zzz",
                                    "input_ids",        "vision.embeddings", "decode_logits",
                                    "decoder.norm",     "decoder.layers.x"};
  std::sort(names.begin(), names.end(), TapBefore);
  EXPECT_EQ(names, (std::vector<std::string>{"input_ids", "vision.embeddings", "vision.layers.2",
                                             "projector", "decoder.layers.2", "decoder.layers.10",
                                             "decoder.norm", "logits", "decode_logits",
                                             "decoder.layers.x", "zzz"}));
}

TEST(TapBefore, OrdersMllamaTaps) {
  std::vector<std::string> names = {"decoder.layers.0",
                                    "cross.10.k",
                                    "vision.output",
                                    "cross.3.v",
                                    "vision.global_layers.1",
                                    "cross.3.k",
                                    "vision.layernorm_post",
                                    "vision.layers.0",
                                    "projector",
                                    "vision.layernorm_pre",
                                    "cross.x.k"};
  std::sort(names.begin(), names.end(), TapBefore);
  EXPECT_EQ(names, (std::vector<std::string>{"vision.layernorm_pre", "vision.layers.0",
                                             "vision.layernorm_post", "vision.global_layers.1",
                                             "vision.output", "projector", "cross.3.k", "cross.3.v",
                                             "cross.10.k", "decoder.layers.0", "cross.x.k"}));
}

TEST(CompareTensors, MeasuresMaxAbsRelativeErrorAndCosine) {
  const std::vector<float> b = {1, 2, 4}, a = {1, 2, 3}, neg = {-1, -2, -4};
  TapDiff same = CompareTensors(F32(b), F32(b));
  EXPECT_EQ(same.max_abs, 0.0);
  EXPECT_EQ(same.rel, 0.0);
  EXPECT_NEAR(same.cosine, 1.0, 1e-15);
  TapDiff d = CompareTensors(F32(a), F32(b));
  EXPECT_EQ(d.max_abs, 1.0);
  EXPECT_EQ(d.worst, 2);
  EXPECT_NEAR(d.rel, 1.0 / std::sqrt(21.0), 1e-12);
  EXPECT_NEAR(d.cosine, 17.0 / std::sqrt(14.0 * 21.0), 1e-12);
  EXPECT_NEAR(CompareTensors(F32(neg), F32(b)).cosine, -1.0, 1e-12);
  EXPECT_NEAR(CompareTensors(F32(neg), F32(b)).rel, 2.0, 1e-12);
}

TEST(CompareTensors, TreatsNonFiniteAndZeroReferencesStrictly) {
  const std::vector<float> b = {1, 2, 4}, nan = {1, std::nanf(""), 4};
  TapDiff d = CompareTensors(F32(nan), F32(b));
  EXPECT_TRUE(std::isinf(d.rel));
  EXPECT_TRUE(std::isinf(d.max_abs));
  EXPECT_EQ(d.worst, 1);
  const std::vector<float> zeros = {0, 0, 0}, ones = {1, 1, 1};
  EXPECT_EQ(CompareTensors(F32(zeros), F32(zeros)).rel, 0.0);
  EXPECT_EQ(CompareTensors(F32(zeros), F32(zeros)).cosine, 1.0);
  EXPECT_TRUE(std::isinf(CompareTensors(F32(ones), F32(zeros)).rel));
  EXPECT_EQ(CompareTensors(F32(ones), F32(zeros)).cosine, 0.0);
}

TEST(CompareTensors, CountsDifferingIds) {
  const std::vector<int64_t> a = {5, 6, 7}, b = {5, 9, 7};
  TapDiff d = CompareTensors({a.data(), DType::kI64, {3}}, {b.data(), DType::kI64, {3}});
  EXPECT_EQ(d.mismatches, 1);
}

}  // namespace
}  // namespace ocular

#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"

namespace ocular {
namespace {

TEST(DType, ParsesSafetensorsNames) {
  DType t;
  ASSERT_TRUE(ParseDType("BF16", &t));
  EXPECT_EQ(t, DType::kBF16);
  EXPECT_EQ(DTypeSize(t), 2u);
  EXPECT_FALSE(ParseDType("F8_E4M3X", &t));
}

TEST(Shape, CountsAndPrints) {
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(ShapeString({2, 3}), "[2,3]");
}

TEST(Half, BF16RoundTripsAndRoundsToNearestEven) {
  EXPECT_EQ(BF16ToF32(F32ToBF16(1.5f)), 1.5f);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to even (1.0).
  EXPECT_EQ(BF16ToF32(F32ToBF16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(BF16ToF32(F32ToBF16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
}

TEST(Half, F16DecodesNormalsSubnormalsAndInf) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x0001), 5.9604644775390625e-8f);  // smallest subnormal 2^-24
  EXPECT_TRUE(std::isinf(F16ToF32(0x7c00)));
}

}  // namespace
}  // namespace ocular

#include "core/arena.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "core/function_ref.h"
#include "core/matrix.h"

namespace ocular {
namespace {

TEST(ArenaTest, ScopesAreLifoAndAligned) {
  Arena arena(1000);
  EXPECT_GE(arena.capacity(), 1000u);
  float* a = arena.Floats(3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % Arena::kAlign, 0u);
  const size_t after_a = arena.mark();
  {
    ArenaScope scope(arena);
    double* b = arena.Alloc<double>(5);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % Arena::kAlign, 0u);
    EXPECT_EQ(reinterpret_cast<char*>(b) - reinterpret_cast<char*>(a), 64);
    EXPECT_GT(arena.mark(), after_a);
  }
  EXPECT_EQ(arena.mark(), after_a);
  EXPECT_EQ(arena.high_water(), 128u);
}

TEST(ArenaDeathTest, OverflowIsAPlanningBug) {
  Arena arena(128);
  arena.Floats(16);
  EXPECT_DEATH(arena.Floats(32), "workspace plan too small");
}

TEST(FunctionRefTest, CallsWithoutOwning) {
  int a = 1, b = 2, c = 3, d = 4;
  auto lambda = [&](int x) { return a + b + c + d + x; };
  FunctionRef<int(int)> f = lambda;
  EXPECT_EQ(f(10), 20);
  a = 11;
  EXPECT_EQ(f(10), 30);  // a reference, not a copy
}

TEST(MatrixTest, RowBytesPerFormat) {
  EXPECT_EQ(WFormatRowBytes(WFormat::kBF16, 10), 20);
  EXPECT_EQ(WFormatRowBytes(WFormat::kQ8_0, 64), 68);
  EXPECT_EQ(WFormatRowBytes(WFormat::kQ8_0, 33), -1);
  EXPECT_EQ(WFormatRowBytes(WFormat::kQ4_K, 512), 288);
  std::vector<uint16_t> w(6);
  Matrix m = MatrixFromView(TensorView{w.data(), DType::kBF16, {2, 3}}, 2, 3);
  EXPECT_EQ(m.row_bytes, 6u);
  EXPECT_EQ(m.row(1), reinterpret_cast<const std::byte*>(w.data() + 3));
}

}  // namespace
}  // namespace ocular

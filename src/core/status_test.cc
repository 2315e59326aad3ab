#include "ocular/status.h"

#include <gtest/gtest.h>

namespace ocular {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return Error(StatusCode::kInvalidArgument, "test", x, " is odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  OCULAR_ASSIGN_OR_RETURN(int h, Half(x));
  OCULAR_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(Status, CarriesTagAndFacts) {
  Status s = Error(StatusCode::kDataLoss, "safetensors", "a.safetensors: ", 3, " bytes");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "[safetensors] a.safetensors: 3 bytes");
  EXPECT_EQ(s.ToString(), "DataLoss: [safetensors] a.safetensors: 3 bytes");
}

TEST(StatusOr, PropagatesErrors) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "[test] 3 is odd");
}

}  // namespace
}  // namespace ocular

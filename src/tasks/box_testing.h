// For the tasks tests: a detection's corners checked at once.
#pragma once

#include <gtest/gtest.h>

#include "ocular/detection.h"

namespace ocular {

// d's corners are (x0, y0, x1, y1), each to within 4 ULPs (EXPECT_FLOAT_EQ).
inline void ExpectBox(const Detection& d, float x0, float y0, float x1, float y1) {
  EXPECT_FLOAT_EQ(d.x0, x0);
  EXPECT_FLOAT_EQ(d.y0, y0);
  EXPECT_FLOAT_EQ(d.x1, x1);
  EXPECT_FLOAT_EQ(d.y1, y1);
}

}  // namespace ocular

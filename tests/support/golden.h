// The per-tap comparison every family's golden test makes: ocular's recorded taps against the
// reference's, in the reference's forward order.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/tensor.h"
#include "runtime/parity.h"
#include "runtime/recorder.h"
#include "support/fixture.h"

namespace ocular::testing_support {

// Every F32 tap of `taps` but pixel_values against the one `tracer` recorded: a tap ocular did
// not record or of another size fails; a tap over `tolerance` (relative error) fails, naming
// the first one and listing every tap's error (OCULAR_PRINT_TAPS=1 prints the list anyway).
// Returns how many taps it compared.
inline int ExpectEveryTapWithin(const fixture::GoldenTaps& taps, const RecordingTracer& tracer,
                                double tolerance) {
  std::string table, first_over;
  int compared = 0;
  for (const std::string& name : taps.TapNames()) {
    const TensorView& ref = *taps.file().Find(name);
    if (ref.dtype != DType::kF32 || name == "pixel_values") continue;
    const Tensor* mine = tracer.Find(name);
    if (mine == nullptr) {
      ADD_FAILURE() << "ocular recorded no tap '" << name << "'";
      return compared;
    }
    if (mine->numel() != ref.numel()) {
      ADD_FAILURE() << name << ": ocular " << ShapeString(mine->shape) << " vs reference "
                    << ShapeString(ref.shape);
      return compared;
    }
    const TapDiff d = CompareTensors(mine->view(), ref);
    table +=
        name + ": rel " + std::to_string(d.rel) + " max_abs " + std::to_string(d.max_abs) + "\n";
    if (!(d.rel <= tolerance) && first_over.empty()) first_over = name;
    ++compared;
  }
  if (std::getenv("OCULAR_PRINT_TAPS")) std::printf("%s", table.c_str());
  EXPECT_TRUE(first_over.empty()) << "first diverging tap: " << first_over << "\n" << table;
  return compared;
}

}  // namespace ocular::testing_support

// Comparing activation dumps (the parity debugger behind `ocular diff`).
// Metrics follow the seeds' advice: relative error ‖a−b‖/‖b‖, not sums of absolute errors.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"

namespace ocular {

struct TapDiff {
  double max_abs = 0;  // max |a - b|; +inf if `actual` holds a NaN or Inf
  double rel = 0;  // ‖a − b‖₂ / ‖b‖₂ (0 if both are zero; +inf if only b is, or non-finite)
  double cosine = 1;       // a·b / (‖a‖‖b‖) (1 if both are zero, 0 if exactly one is)
  int64_t worst = -1;      // flat index of the max |a - b| (-1 if no elements)
  int64_t mismatches = 0;  // integer taps (ids): positions that differ
};

// Compares two tensors element-wise after converting to double (any dtype).
// REQUIRES: actual.numel() >= expected.numel().
TapDiff CompareTensors(const TensorView& actual, const TensorView& expected);

// Pipeline order of tap names (input_ids, pixel_values, vision.*, projector, decoder.*,
// logits, generated_ids, decode_logits; layers numerically), so "first divergence" means
// first in the forward pass. Unknown names sort last, alphabetically.
bool TapBefore(const std::string& a, const std::string& b);

struct DiffRow {
  std::string name;
  Shape shape_a, shape_b;
  bool shape_mismatch = false;
  TapDiff diff;
  bool over = false;  // rel > tolerance, ids differ, or shapes differ
};

struct DiffReport {
  std::vector<DiffRow> rows;  // taps present in both, pipeline order
  std::vector<std::string> only_a, only_b;
  int first_over = -1;  // index into rows, -1 if none
};

// A is the dump under test, B the reference.
DiffReport DiffDumps(const SafetensorsFile& a, const SafetensorsFile& b, double rel_tolerance);

// Human-readable table; marks the first tap over tolerance.
std::string FormatDiffReport(const DiffReport& r, double rel_tolerance);

}  // namespace ocular

#include "runtime/parity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/half.h"

namespace ocular {

namespace {

double At(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32:
      return t.as<float>()[i];
    case DType::kF64:
      return t.as<double>()[i];
    case DType::kBF16:
      return BF16ToF32(t.as<uint16_t>()[i]);
    case DType::kF16:
      return F16ToF32(t.as<uint16_t>()[i]);
    case DType::kI64:
      return static_cast<double>(t.as<int64_t>()[i]);
    case DType::kI32:
      return t.as<int32_t>()[i];
    case DType::kI16:
      return t.as<int16_t>()[i];
    case DType::kI8:
      return t.as<int8_t>()[i];
    case DType::kU8:
    case DType::kBool:
      return t.as<uint8_t>()[i];
  }
  return 0;
}

bool IsInteger(DType t) {
  return t == DType::kI64 || t == DType::kI32 || t == DType::kI16 || t == DType::kI8 ||
         t == DType::kU8 || t == DType::kBool;
}

// (stage, layer) rank of a tap name.
std::pair<int, long> Rank(const std::string& name) {
  static const char* kStages[] = {"input_ids",
                                  "pixel_values",
                                  "aspect_ratio_ids",
                                  "vision.embeddings",
                                  "vision.layernorm_pre",
                                  "vision.layers.",
                                  "vision.layernorm_post",
                                  "vision.global_layers.",
                                  "vision.post_layernorm",
                                  "vision.output",
                                  "projector",
                                  "cross.",
                                  "decoder.inputs_embeds",
                                  "decoder.embed_scaled",
                                  "decoder.layers.",
                                  "decoder.norm",
                                  "logits",
                                  "generated_ids",
                                  "decode_logits"};
  // mllama's cross.{layer}.k / cross.{layer}.v: by layer, K before V.
  if (name.rfind("cross.", 0) == 0 && (name.ends_with(".k") || name.ends_with(".v"))) {
    const std::string digits = name.substr(6, name.size() - 8);
    if (!digits.empty() && digits.size() <= 9 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const auto stage = std::find(std::begin(kStages), std::end(kStages), std::string("cross."));
      return {static_cast<int>(stage - std::begin(kStages)),
              2 * std::stol(digits) + (name.back() == 'v')};
    }
  }
  for (int s = 0; s < static_cast<int>(std::size(kStages)); ++s) {
    const std::string stage = kStages[s];
    if (stage.back() == '.') {
      const std::string digits = name.substr(std::min(name.size(), stage.size()));
      if (name.compare(0, stage.size(), stage) == 0 && !digits.empty() && digits.size() <= 9 &&
          std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return {s, std::stol(digits)};
      }
    } else if (name == stage) {
      return {s, 0};
    }
  }
  return {static_cast<int>(std::size(kStages)), 0};
}

}  // namespace

TapDiff CompareTensors(const TensorView& actual, const TensorView& expected) {
  TapDiff d;
  double dot = 0, na = 0, nb = 0, ne = 0;
  const bool ints = IsInteger(actual.dtype) || IsInteger(expected.dtype);
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < expected.numel(); ++i) {
    const double a = At(actual, i), b = At(expected, i);
    // A NaN or Inf in the dump under test is an infinite error, never hidden by max().
    const double e = std::isfinite(a) ? std::fabs(a - b) : inf;
    if (d.worst < 0 || e > d.max_abs) {
      d.max_abs = e;
      d.worst = i;
    }
    dot += a * b;
    na += a * a;
    nb += b * b;
    ne += (a - b) * (a - b);
    if (ints && a != b) ++d.mismatches;
  }
  if (!std::isfinite(d.max_abs)) {
    d.rel = inf;
    d.cosine = 0;
    return d;
  }
  d.rel = nb > 0 ? std::sqrt(ne / nb) : (ne > 0 ? inf : 0);
  d.cosine = (na > 0 && nb > 0) ? dot / std::sqrt(na * nb) : (na == 0 && nb == 0 ? 1 : 0);
  return d;
}

bool TapBefore(const std::string& a, const std::string& b) {
  auto ra = Rank(a), rb = Rank(b);
  return ra != rb ? ra < rb : a < b;
}

DiffReport DiffDumps(const SafetensorsFile& a, const SafetensorsFile& b, double tol) {
  DiffReport r;
  for (const auto& [name, va] : a.tensors()) {
    const TensorView* vb = b.Find(name);
    if (!vb) {
      r.only_a.push_back(name);
      continue;
    }
    DiffRow row;
    row.name = name;
    row.shape_a = va.shape;
    row.shape_b = vb->shape;
    row.shape_mismatch = va.numel() != vb->numel();
    if (!row.shape_mismatch) row.diff = CompareTensors(va, *vb);
    row.over = row.shape_mismatch || row.diff.mismatches > 0 || !(row.diff.rel <= tol);
    r.rows.push_back(std::move(row));
  }
  for (const auto& [name, vb] : b.tensors()) {
    if (!a.Find(name)) r.only_b.push_back(name);
  }
  std::sort(r.rows.begin(), r.rows.end(),
            [](const DiffRow& x, const DiffRow& y) { return TapBefore(x.name, y.name); });
  for (size_t i = 0; i < r.rows.size(); ++i) {
    if (r.rows[i].over) {
      r.first_over = static_cast<int>(i);
      break;
    }
  }
  return r;
}

std::string FormatDiffReport(const DiffReport& r, double tol) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "%-28s %-18s %12s %12s %10s  %s\n", "tap", "shape", "max_abs",
                "rel_err", "cosine", "");
  s += line;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const DiffRow& row = r.rows[i];
    const char* mark = static_cast<int>(i) == r.first_over ? "<-- first over tolerance"
                       : row.over                          ? "over"
                                                           : "";
    if (row.shape_mismatch) {
      std::snprintf(line, sizeof line, "%-28s %s vs %s  shape mismatch  %s\n", row.name.c_str(),
                    ShapeString(row.shape_a).c_str(), ShapeString(row.shape_b).c_str(), mark);
    } else if (row.diff.mismatches > 0) {
      std::snprintf(line, sizeof line, "%-28s %-18s %lld of %lld ids differ  %s\n",
                    row.name.c_str(), ShapeString(row.shape_a).c_str(),
                    static_cast<long long>(row.diff.mismatches),
                    static_cast<long long>(NumElements(row.shape_a)), mark);
    } else {
      std::snprintf(line, sizeof line, "%-28s %-18s %12.3e %12.3e %10.7f  %s\n", row.name.c_str(),
                    ShapeString(row.shape_a).c_str(), row.diff.max_abs, row.diff.rel,
                    row.diff.cosine, mark);
    }
    s += line;
  }
  for (const auto& n : r.only_a) s += "only in A: " + n + "\n";
  for (const auto& n : r.only_b) s += "only in B: " + n + "\n";
  std::snprintf(line, sizeof line, "tolerance: rel_err <= %.1e\n", tol);
  s += line;
  if (r.first_over >= 0) {
    s += "FIRST DIVERGENCE: " + r.rows[r.first_over].name + "\n";
  } else {
    s += "all " + std::to_string(r.rows.size()) + " common taps within tolerance\n";
  }
  return s;
}

}  // namespace ocular

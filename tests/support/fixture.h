// Reader for the golden fixtures written by tools/reference/make_goldens.py (and
// tools/reference/trace_hf.py), plus the tap comparison used by parity tests.
//
// Layout (docs/testing.md):
//   testdata/golden/manifest.json                     checkpoints, cases, tap shapes
//   testdata/golden/<checkpoint>/<case>.safetensors   one case's taps, F32 (ids I64)
//   testdata/golden/inputs/<image>.png                the input images
// Tap names are the contract with the C++ tracer: input_ids, pixel_values,
// vision.embeddings, vision.layers.{i}, vision.post_layernorm, projector,
// decoder.inputs_embeds, decoder.embed_scaled, decoder.layers.{i}, decoder.norm, logits,
// generated_ids, decode_logits.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "ocular/status.h"

namespace ocular::fixture {

// One case of the manifest.
struct GoldenCase {
  std::string checkpoint;  // "pg1"
  std::string name;        // "photo_caption"
  std::string path;        // "testdata/golden/pg1/photo_caption.safetensors"
  std::string image;       // image key: "photo"
  std::string image_path;  // "testdata/golden/inputs/photo.png"
  std::string prompt;      // "caption en" (the processor adds <image>s, <bos>, "\n")
  std::map<std::string, Shape> tap_shapes;  // every tap with its shape
};

// One checkpoint of the manifest.
struct GoldenCheckpoint {
  std::string name;       // "pg2-bf16"
  std::string model_dir;  // "testdata/tiny/pg2-bf16"
  std::string dtype;      // "float32" | "bfloat16"
  int64_t hidden_size = 0;
  int64_t num_image_tokens = 0;
  int64_t image_token_index = 0;
  int64_t vocab_size = 0;
  std::vector<GoldenCase> cases;  // sorted by name
};

class GoldenManifest {
 public:
  // Parses `<golden_dir>/manifest.json`. Errors are tagged [fixture]: missing file,
  // malformed JSON, missing or mistyped fields.
  static StatusOr<GoldenManifest> Load(const std::string& golden_dir = "testdata/golden");

  // Sorted checkpoint names.
  std::vector<std::string> CheckpointNames() const;
  // nullptr if absent.
  const GoldenCheckpoint* Find(const std::string& checkpoint) const;
  const std::string& transformers_version() const { return transformers_version_; }

 private:
  std::map<std::string, GoldenCheckpoint> checkpoints_;
  std::string transformers_version_;
};

// The taps of one case (a validated, memory-mapped safetensors file).
class GoldenTaps {
 public:
  static StatusOr<GoldenTaps> Open(const std::string& path);

  // The F32 tap `name`; NotFound if absent, InvalidArgument if not F32.
  StatusOr<TensorView> Tap(const std::string& name) const;
  // An I64 id tap (input_ids, generated_ids) as int32; errors if absent, not I64, or out of
  // int32 range.
  StatusOr<std::vector<int32_t>> Ids(const std::string& name) const;
  // All tap names in forward order (see TapBefore).
  std::vector<std::string> TapNames() const;
  const SafetensorsFile& file() const { return file_; }

 private:
  explicit GoldenTaps(SafetensorsFile file) : file_(std::move(file)) {}
  SafetensorsFile file_;
};

// Forward order of tap names: inputs, vision (layers numerically), projector, decoder
// (layers numerically), logits, generation. Unknown names sort last, alphabetically.
bool TapBefore(const std::string& a, const std::string& b);

// Difference between an actual tensor and the reference (accumulated in double).
struct TapDiff {
  double max_abs = 0;  // max |a - b|; +inf if `actual` has a non-finite value
  double rel = 0;      // ‖a − b‖₂ / ‖b‖₂ (0 if both are zero, +inf if only b is zero)
  double cosine = 1;   // a·b / (‖a‖‖b‖) (1 if both are zero, 0 if exactly one is)
  int64_t worst = -1;  // flat index of the max |a - b| (-1 if no elements)
};

// REQUIRES: expected.dtype == F32; `actual` holds expected.numel() floats.
TapDiff Compare(const float* actual, const TensorView& expected);
// "rel 1.2e-06, max abs 3e-05 at 17, cosine 0.999999".
std::string ToString(const TapDiff& diff);

}  // namespace ocular::fixture

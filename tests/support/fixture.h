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
  // All tap names in forward order (runtime/parity.h TapBefore).
  std::vector<std::string> TapNames() const;
  const SafetensorsFile& file() const { return file_; }

 private:
  explicit GoldenTaps(SafetensorsFile file) : file_(std::move(file)) {}
  SafetensorsFile file_;
};

// A path for a test's scratch copy, `name` inside this process's own folder under the system
// temporary directory ($TMPDIR, else /tmp); nothing exists there yet (a leftover of that name is
// removed). The process's folder and everything in it are removed when the process exits, so
// repeated test runs leave nothing behind.
std::string ScratchPath(const std::string& name);

}  // namespace ocular::fixture

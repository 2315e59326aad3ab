// Task outputs on top of Engine: segmentation masks from <seg> codes, drawing detection boxes
// and masks (ocular/detection.h), and the held-out evaluation of the shapes-world demo model
// (`ocular eval`).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ocular/detection.h"
#include "ocular/engine.h"
#include "ocular/status.h"

namespace ocular {

// The mask decoder of PaliGemma's segmentation: the VQ-VAE decoder of big_vision
// (evaluators/proj/paligemma/transfers/segmentation.py) that turns an object's 16 <seg> codes
// into a 64×64 mask, which is then resized into the object's box (docs/segmentation.md).
// Immutable after Load; thread-safe.
class MaskDecoder {
 public:
  // Loads the checkpoint users download with PaliGemma, `vae-oid.npz` (big_vision's PyTorch
  // key layout: "_vq_vae._embedding", "decoder.N[.net.M].weight|bias"), or a safetensors file
  // with the same names (.safetensors suffix). Tensors outside "decoder." other than the
  // codebook (the encoder half, VQ state) are ignored; an unknown "decoder." tensor, a missing
  // one or an inconsistent shape is an error:
  // kNotFound / kIoError (file), kDataLoss (corrupt or mis-shaped), kUnimplemented (dtype,
  // unknown tensor).
  static StatusOr<std::unique_ptr<MaskDecoder>> Load(const std::string& path);
  ~MaskDecoder();
  MaskDecoder(const MaskDecoder&) = delete;
  MaskDecoder& operator=(const MaskDecoder&) = delete;

  int codebook_size() const;  // 128 for vae-oid.npz
  int mask_size() const;      // 64 for vae-oid.npz (16 × the 4×4 code grid)

  // The decoder's output for 16 codes: mask_size()² logits, row-major, ≈ [-1, 1]; > 0 is the
  // object. kInvalidArgument unless codes has 16 entries in [0, codebook_size()).
  StatusOr<std::vector<float>> DecodeLogits(const std::vector<int>& codes) const;

  // Sets `mask` on every detection that has 16 seg codes in the codebook and valid loc tokens
  // (a box with y_max > y_min and x_max > x_min after the pixel conversion; others keep no
  // mask), for an image of image_w × image_h pixels. Returns how many detections with seg
  // codes got no mask because a code lies outside the codebook (model output is not trusted).
  int AddMasks(std::vector<Detection>* detections, int image_w, int image_h) const;

  struct Weights;  // src/tasks/mask_decoder.h

 private:
  explicit MaskDecoder(std::unique_ptr<Weights> weights);
  std::unique_ptr<Weights> weights_;
};

// The mask model ocular uses by default: `vae-oid.npz`, else `vae.safetensors`, in
// `model_dir`; "" if neither exists.
std::string FindMaskModel(const std::string& model_dir);

// For a `segment` answer: decodes the masks of `detections` that carry seg codes, with the
// mask model `seg_model` or, when that is empty, FindMaskModel(model_dir). Loads nothing when
// no detection has seg codes. Returns a warning for the user ("" if none) when no mask model
// is found (the detections keep their raw codes) or codes lie outside its codebook; errors
// when the model given or found cannot be loaded (kNotFound, kDataLoss, ...).
StatusOr<std::string> AttachMasks(std::vector<Detection>* detections, const std::string& seg_model,
                                  const std::string& model_dir, int image_w, int image_h);

// Decodes `image_path` (as Engine does, RGB), paints the masks translucently, draws the boxes
// and labels (DejaVu Sans from fonts-dejavu-core; boxes only if the font is missing) and
// writes a PNG to `out_png`.
Status DrawDetectionsToPng(const std::string& image_path, const std::vector<Detection>& boxes,
                           const std::string& out_png);

struct EvalOptions {
  std::string eval_set;     // heldout.jsonl (models/shapes-paligemma/heldout.jsonl)
  std::string images_dir;   // folder with the images the set names
  int limit = 0;            // 0: all examples
  int max_tokens = 40;      // as tools/demo_model/evaluate.py
  std::string predictions;  // if set, one JSON line per example is written here
  // Mask model for "segment" examples (MaskDecoder::Load); empty: FindMaskModel(model dir).
  std::string seg_model;
  std::string model_dir;  // where FindMaskModel looks
};

// Runs every example through `engine` (greedy) and scores it like
// tools/demo_model/metrics.py. `progress(done, total)` is called after each example.
StatusOr<EvalSummary> Evaluate(Engine& engine, const EvalOptions& options,
                               const std::function<void(int, int)>& progress = nullptr);

}  // namespace ocular

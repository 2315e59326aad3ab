// The VQ-VAE mask decoder of PaliGemma's segmentation, ported from big_vision
// (google-research/big_vision, big_vision/evaluators/proj/paligemma/transfers/segmentation.py:
// _get_params, _quantized_values_from_codebook_indices, ResBlock, Decoder, and the mask-IoU
// loop of Evaluator.run for the placement into the box). The public face is
// ocular::MaskDecoder (include/ocular/tasks.h); this header exposes the pieces for tests.
//
// Checkpoint: big_vision's vae-oid.npz holds the PyTorch state dict of the VQ-VAE of
// arXiv:2301.02229 (conv weights [out, in, kh, kw]; ConvTranspose2d weights [in, out, kh, kw]).
// big_vision converts each kernel with np.transpose(k, (2, 3, 1, 0)) for flax; we keep the
// PyTorch layout and compute the PyTorch definitions, which tools/reference/make_seg_fixtures.py
// proves equal to flax's (nn.ConvTranspose(..., padding=2, transpose_kernel=True) on the
// transposed kernel ≡ torch's ConvTranspose2d(..., stride=2, padding=1) on the original).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ocular/detection.h"
#include "ocular/status.h"
#include "ocular/tasks.h"

namespace ocular {

// Upper bounds on what a checkpoint may declare (the real one: 128 codes × 512, 128 channels):
// they keep a crafted file from planning gigabytes of activations.
inline constexpr int kMaxMaskCodebook = 1000;  // <segNNN> has three digits
inline constexpr int kMaxMaskEmbedDim = 8192;
inline constexpr int kMaxMaskChannels = 1024;

// One convolution, weights repacked for the inner loop: w[ky][kx][out][in] (taken from
// PyTorch's [out, in, kh, kw] for Conv2d and [in, out, kh, kw] for ConvTranspose2d).
struct MaskConv {
  int in = 0, out = 0, k = 0;
  std::vector<float> w;  // [k, k, out, in]
  std::vector<float> b;  // [out]
};

// K codes of dimension D; decoder width C (vae-oid.npz: K = 128, D = 512, C = 128).
struct MaskDecoder::Weights {
  int num_codes = 0;  // K
  int embed_dim = 0;  // D
  // [K, D]  _vq_vae._embedding
  std::vector<float> codebook;
  // 1×1, D → C  decoder.0  (flax Conv_0)
  MaskConv conv_in;
  // per block: 3×3, 3×3, 1×1, C → C  decoder.{2,3}.net.{0,2,4}  (flax ResBlock_{0,1})
  std::array<std::array<MaskConv, 3>, 2> res;
  // 4×4 stride 2 transposed: C → C, C/2, C/4, C/8  decoder.{4,6,8,10}  (ConvTranspose_{0..3})
  std::array<MaskConv, 4> up;
  // 1×1, C/8 → 1  decoder.12  (flax Conv_1)
  MaskConv conv_out;
  int mask_size = 64;  // 4 · 2^4
};

// Binds and validates every decoder tensor from `tensors` (name → view, any float dtype;
// converted to f32). Tensors outside "decoder." other than the codebook (the encoder half,
// the VQ layer's state) are ignored; an unused "decoder." tensor is kUnimplemented. Errors are
// tagged [seg] and name `source`, the tensor and the shapes.
StatusOr<std::unique_ptr<MaskDecoder::Weights>> BindMaskDecoder(
    const std::map<std::string, TensorView>& tensors, const std::string& source);

// The decoder (flax Decoder.__call__): codes → mask_size² logits, row-major.
// REQUIRES: 16 codes in [0, num_codes) (checked by MaskDecoder::DecodeLogits).
std::vector<float> DecodeMaskLogits(const MaskDecoder::Weights& w, const int* codes);

// PIL's Image.fromarray(float32 array).resize((out_w, out_h), Image.BILINEAR): Pillow's
// 32-bit float resampling (libImaging/Resample.c precompute_coeffs and
// ImagingResample{Horizontal,Vertical}_32bpc: double weights normalised to sum 1, double
// accumulation, a float32 image between the horizontal and the vertical pass).
// REQUIRES: in_w, in_h, out_w, out_h > 0.
std::vector<float> ResizeBilinearF32(const float* in, int in_w, int in_h, int out_w, int out_h);

// big_vision's placement of a decoded mask (Evaluator.run): box = loc / 1023 in float64,
// pixel edges int(v · size) (truncation), the logits resized to the box with
// ResizeBilinearF32 and thresholded at > 0. No mask (nullopt) when the box is empty
// (x1 <= x0 or y1 <= y0 after truncation) or a loc is outside 0..1023.
std::optional<InstanceMask> PlaceMaskInBox(const float* logits, int size,
                                           const std::array<int, 4>& loc, int image_w, int image_h);

}  // namespace ocular

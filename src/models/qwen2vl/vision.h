// Qwen2-VL's vision tower (Qwen2VisionTransformerPretrainedModel) and Qwen2.5-VL's
// (Qwen2_5_VisionTransformerPretrainedModel):
//   x = patch_embed(pixel_values)            Conv3d(3, D, (tp, p, p)) over each patch row: x·Wᵀ
//   x = blocks(x)                            LayerNorm + attention with the 2-D rotary + LayerNorm
//                                            + QuickGELU MLP; each image's rows attend among
//                                            themselves (cu_seqlens)
//   features = merger(x)                     ln_q, each merge window's rows as one [merge² D]
//                                            row, Linear, GELU, Linear -> [rows / merge², H]
// Qwen2.5-VL: RMSNorm + SwiGLU blocks; the rows (and their rotary positions) permuted into
// window order by merge units before the blocks (get_window_index: windows of window_size px,
// cut short at the grid's right and bottom edges), the blocks but fullatt_block_indexes
// attending within their window, the merger's rows put back in patch order after it.
// Reference: transformers 4.57 models/qwen2_vl/modeling_qwen2_vl.py (PatchEmbed, rot_pos_emb,
// VisionAttention, Qwen2VLVisionBlock, PatchMerger), models/qwen2_5_vl/modeling_qwen2_5_vl.py
// (Qwen2_5_VisionTransformerPretrainedModel.get_window_index / forward, Qwen2_5_VLVisionBlock,
// Qwen2_5_VLPatchMerger).
#pragma once

#include <cstddef>
#include <span>

#include "kernels/exec.h"
#include "models/blocks/encoder_layer.h"
#include "models/blocks/rope.h"
#include "models/model.h"
#include "models/qwen2vl/config.h"
#include "models/qwen2vl/weights.h"
#include "models/tracer.h"

namespace ocular::qwen2vl {

// What both Qwen ViTs (this one and vision3.h's) share.
// The rotary of BlockSpec when only sizes are asked for (WorkspaceBytes): enabled, no tables.
inline constexpr blocks::RopeSpec kSizingRope{1, 1, nullptr, nullptr, 2};
// Arena bytes of a tower over `rows` patch rows: its `buffers`, then the patch embedding or
// merger matmuls (K-wide patches, Dm-wide merge windows) or one `block`.
size_t TowerBytes(size_t buffers, const blocks::EncoderLayerSpec& block, int64_t K, int64_t Dm,
                  int64_t rows, int threads);
// The patch rows of `images`, each checked to be what Qwen2VLProcessor::AddImage makes
// (K floats per patch, a grid of whole merge windows of m x m, feature_rows per window).
int64_t PatchRows(std::span<const VisionInput> images, int64_t K, int m);
// x[rows, D] = patch_embed(pixels) (Conv3d as a matmul, `bias` nullable) at the activation
// precision, via px[rows, K]. Tap: vision.embeddings.
void PatchEmbed(const Exec& ex, const float* pixels, int64_t rows, int64_t K, const Matrix& w,
                const TensorView* bias, float* px, float* x, int64_t D, Tracer* tracer);

// Arena bytes EncodeImages takes for images of `rows` patch rows in all.
size_t EncodeBytes(const Qwen2VLConfig& cfg, int64_t rows, int threads);

// features[sum feature_rows, H] of the images (their VisionInput::grid {t, h, w} in patches;
// pixel values as Patchify makes them, image after image). `rope`: VisionRope2d of the heads.
// Taps (named as the parity report orders stages): vision.embeddings (visual.patch_embed),
// vision.layers.{i} (visual.blocks[i]) [rows, D], projector (visual.merger) [rows / merge², H];
// Qwen2.5-VL's layers and projector in window order, as transformers holds them.
void EncodeImages(const Exec& ex, const Qwen2VLConfig& cfg, const VisionWeights& w,
                  const blocks::RopeSpec& rope, std::span<const VisionInput> images,
                  const float* pixels, float* features, Tracer* tracer);

}  // namespace ocular::qwen2vl

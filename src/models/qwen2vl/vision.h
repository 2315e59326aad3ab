// Qwen2-VL's vision tower (Qwen2VisionTransformerPretrainedModel):
//   x = patch_embed(pixel_values)            Conv3d(3, D, (tp, p, p)) over each patch row: x·Wᵀ
//   x = blocks(x)                            LayerNorm + attention with the 2-D rotary + LayerNorm
//                                            + QuickGELU MLP; each image's rows attend among
//                                            themselves (cu_seqlens)
//   features = merger(x)                     ln_q, each merge window's rows as one [merge² D]
//                                            row, Linear, GELU, Linear -> [rows / merge², H]
// Reference: transformers 4.57 models/qwen2_vl/modeling_qwen2_vl.py (PatchEmbed, rot_pos_emb,
// VisionAttention, Qwen2VLVisionBlock, PatchMerger).
#pragma once

#include <cstddef>
#include <span>

#include "kernels/exec.h"
#include "models/blocks/rope.h"
#include "models/model.h"
#include "models/qwen2vl/config.h"
#include "models/qwen2vl/weights.h"
#include "models/tracer.h"

namespace ocular::qwen2vl {

// Arena bytes EncodeImages takes for images of `rows` patch rows in all.
size_t EncodeBytes(const Qwen2VLConfig& cfg, int64_t rows, int threads);

// features[sum feature_rows, H] of the images (their VisionInput::grid {t, h, w} in patches;
// pixel values as Patchify makes them, image after image). `rope`: VisionRope2d of the heads.
// Taps: vision.patch_embed, vision.blocks.{i} [rows, D], vision.merger [rows / merge², H].
void EncodeImages(const Exec& ex, const Qwen2VLConfig& cfg, const VisionWeights& w,
                  const blocks::RopeSpec& rope, std::span<const VisionInput> images,
                  const float* pixels, float* features, Tracer* tracer);

}  // namespace ocular::qwen2vl

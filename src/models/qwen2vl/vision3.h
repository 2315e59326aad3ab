// Qwen3-VL's vision tower (Qwen3VLVisionModel):
//   x = patch_embed(pixel_values)              Conv3d(3, D, (tp, p, p), bias) over each patch
//                                              row: x·Wᵀ + b
//   x = x + fast_pos_embed_interpolate(grid)   the learned [n x n] position table bilinearly
//                                              interpolated to each image's h x w patches
//   x = blocks(x)                              LayerNorm + attention with Qwen2-VL's 2-D rotary
//                                              + LayerNorm + gelu_tanh MLP; each image frame's
//                                              rows attend among themselves (cu_seqlens)
//   deepstack[k] = deepstack_merger_list[k](x) after block deepstack_visual_indexes[k]
//   features = merger(x)                       norm, each merge window's rows as one
//                                              [merge² D] row, Linear, GELU, Linear -> H
// The DeepStack mergers normalize after the merge-window reshape (use_postshuffle_norm).
// Reference: transformers 4.57.1 models/qwen3_vl/modeling_qwen3_vl.py (Qwen3VLVisionModel
// forward / fast_pos_embed_interpolate / rot_pos_emb, Qwen3VLVisionBlock,
// Qwen3VLVisionPatchMerger).
#pragma once

#include <cstddef>
#include <span>

#include "kernels/exec.h"
#include "models/blocks/rope.h"
#include "models/model.h"
#include "models/qwen2vl/config3.h"
#include "models/qwen2vl/weights3.h"
#include "models/tracer.h"

namespace ocular::qwen2vl {

// torch.linspace(0, end, steps)[i] in float32, as torch 2.9's CPU kernel computes it (the
// interpolation points of fast_pos_embed_interpolate).
float TorchLinspace(float end, int steps, int i);

// Arena bytes Encode3 takes for images of `rows` patch rows in all.
size_t Encode3Bytes(const Qwen3VLConfig& cfg, int64_t rows, int threads);

// features[sum feature_rows, H * (1 + deepstack)]: each feature row holds the merger's output,
// then each DeepStack merger's (the decoder adds block k + 1 after its layer k). Images as
// Patchify makes them (VisionInput::grid {t, h, w} in patches). `rope`: VisionRope2d of the
// heads. Taps: vision.embeddings (visual.patch_embed) and vision.layers.{i} (visual.blocks[i])
// [rows, D], vision.deepstack.{k} (visual.deepstack_merger_list[k]) and projector
// (visual.merger) [rows / merge², H].
void Encode3(const Exec& ex, const Qwen3VLConfig& cfg, const Vision3Weights& w,
             const blocks::RopeSpec& rope, std::span<const VisionInput> images, const float* pixels,
             float* features, Tracer* tracer);

}  // namespace ocular::qwen2vl

// SigLIP vision tower (no pooling head), as used by PaliGemma.
// Reference: transformers/models/siglip/modeling_siglip.py (SiglipVisionTransformer).
#pragma once

#include "core/tensor.h"
#include "models/config.h"
#include "models/layers.h"
#include "models/tracer.h"
#include "models/weights.h"

namespace ocular {

class ThreadPool;

// pixel_values: [n_images, 3, R, R] (channels-first, normalized).
// Returns [n_images, N, D]: post_layernorm output, the projector's input.
// Taps: vision.embeddings, vision.layers.{i}, vision.post_layernorm (all [n_images, N, D]).
Tensor SiglipForward(ThreadPool& pool, const SiglipVisionConfig& cfg, const SiglipWeights& w,
                     const Numerics& nx, const Tensor& pixel_values, Tracer* tracer);

}  // namespace ocular

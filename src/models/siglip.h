// SigLIP vision tower (no pooling head), as used by PaliGemma.
// Reference: transformers/models/siglip/modeling_siglip.py (SiglipVisionTransformer).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/exec.h"
#include "models/config.h"
#include "models/tracer.h"
#include "models/weights.h"

namespace ocular {

// pixels: [n, 3, R, R] (channels-first, normalized). Writes out[n, N, D]: the post_layernorm
// output, the projector's input. Scratch from ex.arena (SiglipBytes).
// Taps: vision.embeddings, vision.layers.{i}, vision.post_layernorm (all [n, N, D]).
void SiglipForward(const Exec& ex, const SiglipVisionConfig& cfg, const SiglipWeights& w,
                   const float* pixels, int64_t n, float* out, Tracer* tracer);

// Arena bytes SiglipForward takes for n images.
size_t SiglipBytes(const SiglipVisionConfig& cfg, int64_t n, int threads);

}  // namespace ocular

// The mllama text decoder over a batch of sequences: Llama 3 self-attention layers (RMSNorm,
// SwiGLU, GQA, llama3-scaled RoPE) and tanh-gated cross-attention layers over the images.
// Reference: transformers 4.57 models/mllama/modeling_mllama.py (MllamaSelfAttentionDecoderLayer,
// MllamaCrossAttentionDecoderLayer, MllamaTextCrossAttention), modeling_rope_utils.py
// (_compute_llama3_parameters), processing_mllama.py (get_cross_attention_token_mask).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "kernels/exec.h"
#include "models/blocks/norm.h"
#include "models/mllama/config.h"
#include "models/mllama/weights.h"
#include "models/model.h"
#include "models/tracer.h"

namespace ocular::mllama {

// inv_freq [head_dim / 2] of MllamaRotaryEmbedding (default, or llama3-scaled), in f32 as HF
// (blocks::RopeInvFreq with the config's rope_scaling).
std::vector<float> RopeInvFreq(const TextConfig& c);

// MllamaTextRMSNorm with weight w (blocks::NormKind::kLlamaRms).
blocks::Norm TextNorm(const TextConfig& c, const TensorView* w);

// Per-row cross-attention key ranges of a prompt, in the key order the cross layers store
// (every image's real tiles first, image by image, then every padding tile):
//   a row sees the images get_cross_attention_token_mask gives it (a contiguous run);
//   a row before the first image token sees no image: HF's mask row is then all zeros, so it
//   attends to every key, and full_text_row_masked_out_mask zeroes its MLP (sees_image = 0).
// tiles[i]: image i's tile count (n images); P: rows per tile; T: max tiles. Scratch from
// `arena` (CrossKeyRangesBytes).
void CrossKeyRanges(Arena& arena, const int32_t* ids, int64_t count, int32_t image_token,
                    const int* tiles, int64_t n, int64_t P, int64_t T, int32_t* begin, int32_t* end,
                    uint8_t* sees_image);
size_t CrossKeyRangesBytes(int64_t images);

// What mllama keeps with a sequence besides its K/V (its SequenceState): how many image keys its
// cross layers hold (0: a text-only request, the layers are skipped) and the key range a decode
// step attends to (the prompt's last row's, as HF extends its mask). Written by the prefill's
// cross layers, read by the decode steps'.
struct CrossState final : SequenceState {
  int64_t keys = 0;
  int32_t decode_begin = 0, decode_end = 0;
  bool decode_sees_image = false;  // false: HF's full_text_row_masked_out_mask is 0
  std::unique_ptr<SequenceState> Clone() const override {
    return std::make_unique<CrossState>(*this);
  }
};

struct DecoderContext {
  const MllamaConfig* cfg;
  const Weights* w;
  const float* inv_freq;              // [d / 2]
  std::atomic<int64_t>* kv_computed;  // counts cross K/V computations (one per image and layer)
  Tracer* tracer;                     // taps cross.{layer}.k / .v [images * T * P, Hkv * d]
};

// Self-attention layer `layer` in place on x[batch.rows, H].
void SelfAttentionLayer(const Exec& ex, const DecoderContext& d, int layer, const Batch& batch,
                        float* x);
// Cross-attention layer `layer` in place on x[batch.rows, H]. A sequence's prefill (features
// set) computes and stores its images' K/V; later passes read them from the cache. Rows of a
// text-only sequence pass through unchanged (HF skips the layer).
void CrossAttentionLayer(const Exec& ex, const DecoderContext& d, int layer, const Batch& batch,
                         float* x);

// Arena bytes one layer takes for `rows` rows, `context` keys and up to `images` images.
size_t LayerBytes(const MllamaConfig& cfg, int64_t rows, int64_t context, int64_t images,
                  int threads);

}  // namespace ocular::mllama

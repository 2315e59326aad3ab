// The attention block every family runs, configured by data (AttentionSpec):
//   q = x·Wqᵀ (+ bq), k = x·Wkᵀ (+ bk), v = x·Wvᵀ (+ bv)      one pass over x (ops::MatMuls)
//   q, k = qk_norm(q), qk_norm(k) per head                  (Gemma 3, mllama cross: optional)
//   q, k = RoPE(q, k) at the rows' positions                (decoders; encoders have none)
//   ctx = softmax(softcap(q·kᵀ * scale) + mask) · v          GQA: query head h reads kv head
//                                                           h / (heads / kv_heads)
//   out = ctx·Woᵀ (+ bo)
// Three ways to get keys: SelfAttention (a decoder: K/V appended to each sequence's cache,
// causal / sliding / bidirectional-span masks), EncoderAttention (one image's rows, no
// cache) and CrossAttention (K/V a family computed and stored, e.g. image features).
// References: modeling_gemma2.py Gemma2Attention, modeling_gemma3.py Gemma3Attention,
// modeling_mllama.py MllamaTextSelfAttention / MllamaTextCrossAttention / MllamaVisionAttention,
// modeling_siglip.py SiglipAttention (eager_attention_forward).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/matrix.h"
#include "core/tensor.h"
#include "kernels/exec.h"
#include "kernels/ops.h"
#include "models/blocks/norm.h"
#include "models/blocks/rope.h"
#include "models/blocks/taps.h"
#include "models/model.h"

namespace ocular::blocks {

// Which cache positions of a sequence attend bidirectionally (the rest is causal).
enum class Bidirectional : uint8_t {
  kNone,
  kPrefix,     // [0, SeqChunk::prefix_len): PaliGemma's image + prompt block
  kImageRuns,  // each run of image tokens in SeqChunk::ids (Gemma 3's token_type_ids mask)
};

struct AttentionSpec {
  int64_t hidden = 0;  // width of x and out
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 1;    // scores = q·k * scale
  float softcap = 0;  // > 0: scores = softcap * tanh(scores / softcap)
  RopeSpec rope;      // disabled: no RoPE
  Norm qk_norm;       // kind and eps of q_norm/k_norm (when the weights have them)
  // Decoder masks (SelfAttention).
  int window = 0;  // sliding window in keys; 0 = global
  Bidirectional bidirectional = Bidirectional::kNone;
  int32_t image_token = -1;  // kImageRuns
  // A prompt's first pass attends to its fresh K/V rather than the cache's copy (a sliding
  // layer's ring may be shorter than a bidirectional span that must see all of itself).
  bool prompt_reads_fresh = false;

  int64_t qdim() const { return heads * head_dim; }
  int64_t kvdim() const { return kv_heads * head_dim; }
};

struct AttentionWeights {
  const Matrix* q = nullptr;  // [heads * d, hidden]
  const Matrix* k = nullptr;  // [kv_heads * d, hidden] (cross: applied by the family)
  const Matrix* v = nullptr;
  const Matrix* o = nullptr;        // [hidden, heads * d]
  const TensorView* q_b = nullptr;  // biases (nullable)
  const TensorView* k_b = nullptr;
  const TensorView* v_b = nullptr;
  const TensorView* o_b = nullptr;
  const TensorView* q_norm = nullptr;  // [d] (nullable: no q/k norm)
  const TensorView* k_norm = nullptr;
};

// Self-attention of a decoder layer on x[batch.rows, hidden] at positions pos: K/V of every
// sequence stored in its cache at `layer`, each query attending to the keys the spec's mask
// gives it. Writes out[batch.rows, hidden]. Taps attn.q/.k/.v (after norm and RoPE) and
// attn.ctx.
void SelfAttention(const Exec& ex, const AttentionSpec& a, const AttentionWeights& w, int layer,
                   const Batch& batch, const Positions& pos, const float* x, float* out,
                   const Taps& taps);
// Arena bytes SelfAttention takes for `rows` rows and `context` keys.
size_t SelfAttentionBytes(const AttentionSpec& a, int64_t rows, int64_t context, int threads);

// Who sees what among an encoder's rows: query i attends to keys [begin[i], end[i]) (null:
// every key), taken in key_order (null: row order) — e.g. mllama's real-tiles-first order.
struct EncoderMask {
  const int32_t* begin = nullptr;
  const int32_t* end = nullptr;
  const int32_t* key_order = nullptr;
};

// Attention among the rows of x[rows, hidden] (one image's patches); no cache. RoPE when the
// spec has one, at `pos` (Qwen2-VL's ViT: apply_rotary_pos_emb_vision on q and k).
void EncoderAttention(const Exec& ex, const AttentionSpec& a, const AttentionWeights& w,
                      const float* x, int64_t rows, const EncoderMask& mask, float* out,
                      const Positions* pos = nullptr);
size_t EncoderAttentionBytes(const AttentionSpec& a, int64_t rows, bool key_order, int threads);

// One sequence's keys for CrossAttention: kv (kv.Tk == 0: no keys, a zero context row) and
// each of its `count` rows' key range.
struct CrossSeq {
  ops::KvRows kv;
  int64_t count = 0;
  const int32_t* begin = nullptr;
  const int32_t* end = nullptr;
};

// Queries from x[rows, hidden] (q_proj, q_norm; no RoPE) against keys the family stored.
void CrossAttention(const Exec& ex, const AttentionSpec& a, const AttentionWeights& w,
                    std::span<const CrossSeq> seqs, const float* x, int64_t rows, float* out);
size_t CrossAttentionBytes(const AttentionSpec& a, int64_t rows, int64_t keys, int threads);

}  // namespace ocular::blocks

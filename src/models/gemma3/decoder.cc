#include "models/gemma3/decoder.h"

#include <algorithm>

#include "core/arena.h"
#include "core/check.h"
#include "kernels/ops.h"
#include "models/kv_cache.h"
#include "models/layers.h"

namespace ocular::gemma3 {

void KeyRanges(const SeqChunk& s, const LayerAttention& a, int32_t* begin, int32_t* end) {
  const int64_t W = a.window;
  int64_t run_begin = -1, run_end = -1;  // the image run containing row t (chunk rows)
  for (int64_t t = 0; t < s.count; ++t) {
    const int64_t i = s.start + t;
    // causal (+ sliding: kv_idx > q_idx - sliding_window, masking_utils.sliding_window_overlay)
    int64_t b = W > 0 ? std::max<int64_t>(0, i - W + 1) : 0;
    int64_t e = i + 1;
    const bool image = s.ids != nullptr && s.ids[t] == a.image_token_id;
    if (image) {
      if (t >= run_end) {  // a new run: find its end
        run_begin = t;
        run_end = t;
        while (run_end < s.count && s.ids[run_end] == a.image_token_id) ++run_end;
      }
      // or_mask: the whole run [bs, be) (modeling_gemma3.py token_type_ids_mask_function).
      b = std::min(b, s.start + run_begin);
      e = s.start + run_end;
    }
    begin[t] = static_cast<int32_t>(b);
    end[t] = static_cast<int32_t>(e);
  }
}

namespace {

// Gemma3Attention.forward: q/k/v projections, q_norm/k_norm per head, RoPE, K/V into the
// cache, eager attention (scale query_pre_attn_scalar^-0.5, optional softcap), o_proj.
void SelfAttention(const Exec& ex, const Gemma3TextConfig& cfg, const Gemma3LayerWeights& w,
                   const LayerAttention& a, int layer, const Batch& batch, const float* x,
                   float* out) {
  const GemmaTextConfig& c = cfg.gemma;
  const GemmaLayerWeights& l = w.gemma;
  const int64_t H = c.hidden_size, d = c.head_dim, hq = c.num_attention_heads;
  const int64_t hkv = c.num_key_value_heads, qdim = hq * d, kvdim = hkv * d;
  const int64_t rows = batch.rows;
  ArenaScope scope(ex.arena);
  float* q = ex.arena.Floats(rows * qdim);
  float* k = ex.arena.Floats(rows * kvdim);
  float* v = ex.arena.Floats(rows * kvdim);
  float* ctx = ex.arena.Floats(rows * qdim);
  int64_t* pos = ex.arena.Alloc<int64_t>(rows);
  int32_t* begin = ex.arena.Alloc<int32_t>(rows);
  int32_t* end = ex.arena.Alloc<int32_t>(rows);
  ops::MatMuls(
      ex, x, rows, H, H,
      {{&l.q_w, nullptr, q, qdim}, {&l.k_w, nullptr, k, kvdim}, {&l.v_w, nullptr, v, kvdim}});
  // query_states = self.q_norm(query_states); key_states = self.k_norm(key_states)
  ops::RmsNorm(ex, q, rows * hq, d, w.q_norm, c.rms_norm_eps, /*add_one=*/true, q);
  ops::RmsNorm(ex, k, rows * hkv, d, w.k_norm, c.rms_norm_eps, /*add_one=*/true, k);
  int64_t r = 0;
  for (const SeqChunk& s : batch.seqs) {
    // position_ids = cache_position (0-indexed; Gemma3TextModel.forward).
    for (int64_t t = 0; t < s.count; ++t) pos[r + t] = s.start + t;
    r += s.count;
  }
  OCULAR_CHECK(r == rows);
  ops::Rope(ex, q, rows, hq, d, qdim, pos, a.rope_theta, a.rope_divisor);
  ops::Rope(ex, k, rows, hkv, d, kvdim, pos, a.rope_theta, a.rope_divisor);
  r = 0;
  for (const SeqChunk& s : batch.seqs) {
    // Ids (image runs) come with a prompt's first pass only, so a run is never split.
    OCULAR_CHECK(s.ids == nullptr || s.start == 0, "HINT: SeqChunk::ids is for a prefill");
    s.cache->Store(layer, s.start, s.count, k + r * kvdim, v + r * kvdim, kvdim);
    KeyRanges(s, a, begin + r, end + r);
    // A prompt attends to its fresh K/V (a sliding layer's ring may be shorter than an image
    // block that must see all of itself); later chunks read the cache.
    const ops::KvRows kv =
        s.start == 0 ? ops::KvRows{k + r * kvdim, v + r * kvdim, false, 0, s.count, kvdim, kvdim}
                     : s.cache->Rows(layer, s.start + s.count);
    ops::Attention(ex, q + r * qdim, s.count, hq, qdim, kv, hkv, d, cfg.attention_scale(),
                   c.attn_logit_softcapping, begin + r, end + r, ctx + r * qdim, qdim);
    r += s.count;
  }
  ops::MatMul(ex, ctx, rows, qdim, qdim, l.o_w, nullptr, out, H);
}

}  // namespace

void Gemma3Layer(const Exec& ex, const Gemma3TextConfig& cfg, const Gemma3LayerWeights& w,
                 const LayerAttention& a, int layer, const Batch& b, float* x) {
  const GemmaTextConfig& c = cfg.gemma;
  const GemmaLayerWeights& l = w.gemma;
  const int64_t H = c.hidden_size, n = b.rows * H;
  const float eps = c.rms_norm_eps;
  ArenaScope scope(ex.arena);
  float* h = ex.arena.Floats(n);
  float* o = ex.arena.Floats(n);
  // x = x + post_attention_layernorm(self_attn(input_layernorm(x)))
  ops::RmsNorm(ex, x, b.rows, H, l.input_norm, eps, /*add_one=*/true, h);
  SelfAttention(ex, cfg, w, a, layer, b, h, o);
  ops::RmsNorm(ex, o, b.rows, H, l.post_attn_norm, eps, true, h);
  ops::Add(ex, x, h, x, n);
  // x = x + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)))
  ops::RmsNorm(ex, x, b.rows, H, l.pre_ffw_norm, eps, true, h);
  GeGluMlp(ex, c, l, h, b.rows, o);
  ops::RmsNorm(ex, o, b.rows, H, l.post_ffw_norm, eps, true, h);
  ops::Add(ex, x, h, x, n);
}

}  // namespace ocular::gemma3

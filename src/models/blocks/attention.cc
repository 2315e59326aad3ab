#include "models/blocks/attention.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "models/blocks/mask.h"
#include "models/blocks/scratch.h"
#include "models/kv_cache.h"

namespace ocular::blocks {

namespace {

// Scratch of one attention call over `rows` queries. kv: K/V projected here (not cross);
// gather: keys re-ordered (EncoderMask::key_order); ranges: key ranges built here.
struct AttentionBuffers {
  AttentionBuffers(Scratch& s, const AttentionSpec& a, int64_t rows, bool kv, bool gather,
                   bool ranges)
      : q(s.Floats(rows * a.qdim())),
        k(kv ? s.Floats(rows * a.kvdim()) : nullptr),
        v(kv ? s.Floats(rows * a.kvdim()) : nullptr),
        ks(gather ? s.Floats(rows * a.kvdim()) : nullptr),
        vs(gather ? s.Floats(rows * a.kvdim()) : nullptr),
        ctx(s.Floats(rows * a.qdim())),
        begin(ranges ? s.Take<int32_t>(rows) : nullptr),
        end(ranges ? s.Take<int32_t>(rows) : nullptr),
        spans(ranges ? s.Take<Span>(rows) : nullptr) {}
  float* q;
  float* k;
  float* v;
  float* ks;  // keys and values in key order
  float* vs;
  float* ctx;
  int32_t* begin;
  int32_t* end;
  Span* spans;  // one sequence's bidirectional spans
};

// The largest scratch of the ops an attention call runs (one at a time, innermost).
size_t OpBytes(const AttentionSpec& a, int64_t rows, int64_t keys, int threads) {
  const int64_t d = a.head_dim;
  return std::max({FloatBytes(ops::MatMulArenaFloats(threads, rows, std::max(a.hidden, a.qdim()))),
                   FloatBytes(ops::AttentionArenaFloats(threads, keys, a.kv_heads, d)),
                   a.rope.enabled() ? FloatBytes(ops::RopeArenaFloats(d)) : 0,
                   NormBytes(a.qk_norm.kind, d)});
}

// Per-head q/k norm (query_states = self.q_norm(query_states), the same for k), in place.
void QkNorm(const Exec& ex, const AttentionSpec& a, const TensorView* w, float* x, int64_t rows,
            int64_t heads) {
  if (w == nullptr) return;
  Norm n = a.qk_norm;
  n.w = w;
  ApplyNorm(ex, n, x, rows * heads, a.head_dim, x);
}

// The bidirectional spans of sequence s (cache positions), into out[s.count].
std::span<const Span> SeqSpans(const AttentionSpec& a, const SeqChunk& s, Span* out) {
  switch (a.bidirectional) {
    case Bidirectional::kNone:
      return {};
    case Bidirectional::kPrefix:
      if (s.prefix_len() <= 0) return {};
      out[0] = {0, s.prefix_len()};
      return {out, 1};
    case Bidirectional::kImageRuns: {
      if (s.ids() == nullptr) return {};  // a decode step: HF passes no or_mask (is_prefill false)
      // Ids (image runs) come with a prompt's first pass only, so a run is never split.
      OCULAR_CHECK(s.start == 0, "HINT: SeqChunk::ids is for a prefill");
      size_t n = 0;
      for (int64_t t = 0; t < s.count; ++t) {
        if (s.ids()[t] != a.image_token) continue;
        if (n > 0 && out[n - 1].end == s.start + t) {
          ++out[n - 1].end;  // the run goes on
        } else {
          out[n++] = {s.start + t, s.start + t + 1};
        }
      }
      return {out, n};
    }
  }
  return {};
}

}  // namespace

void SelfAttention(const Exec& ex, const AttentionSpec& a, const AttentionWeights& w, int layer,
                   const Batch& batch, const Positions& pos, const float* x, float* out,
                   const Taps& taps) {
  const int64_t H = a.hidden, d = a.head_dim, hq = a.heads, hkv = a.kv_heads;
  const int64_t qdim = a.qdim(), kvdim = a.kvdim(), rows = batch.rows;
  Scratch s(ex.arena);
  AttentionBuffers b(s, a, rows, /*kv=*/true, /*gather=*/false, /*ranges=*/true);
  // q, k, v = q_proj(x), k_proj(x), v_proj(x)
  ops::MatMuls(ex, x, rows, H, H,
               {{w.q, w.q_b, b.q, qdim}, {w.k, w.k_b, b.k, kvdim}, {w.v, w.v_b, b.v, kvdim}});
  QkNorm(ex, a, w.q_norm, b.q, rows, hq);   // q = q_norm(q) per head
  QkNorm(ex, a, w.k_norm, b.k, rows, hkv);  // k = k_norm(k) per head
  // q, k = apply_rotary_pos_emb(q, k, cos, sin)
  ApplyRope(ex, a.rope, pos, b.q, rows, hq, d, qdim);
  ApplyRope(ex, a.rope, pos, b.k, rows, hkv, d, kvdim);
  taps("attn.q", b.q, {rows, qdim});
  taps("attn.k", b.k, {rows, kvdim});
  taps("attn.v", b.v, {rows, kvdim});
  int64_t r = 0;
  for (const SeqChunk& sq : batch.seqs) {
    const std::span<const Span> spans = SeqSpans(a, sq, b.spans);
    for (const Span& sp : spans) {
      // A span must be in one pass before any of it attends (no causal chunks inside it).
      const bool inside = sq.start < sp.end && sq.start + sq.count > sp.begin;
      OCULAR_CHECK(!inside || sq.start + sq.count >= sp.end, "HINT: a span split across passes");
    }
    sq.cache->Store(layer, sq.start, sq.count, b.k + r * kvdim, b.v + r * kvdim, kvdim);
    CausalKeyRanges(sq.start, sq.count, a.window, spans, b.begin + r, b.end + r);
    const ops::KvRows kv =
        a.prompt_reads_fresh && sq.start == 0
            ? ops::KvRows{b.k + r * kvdim, b.v + r * kvdim, false, 0, sq.count, kvdim, kvdim}
            : sq.cache->Rows(layer, sq.start + sq.count);
    // attn = softmax(q·kᵀ * scaling [softcapped] + mask) · v
    ops::Attention(ex, b.q + r * qdim, sq.count, hq, qdim, kv, hkv, d, a.scale, a.softcap,
                   b.begin + r, b.end + r, b.ctx + r * qdim, qdim);
    r += sq.count;
  }
  OCULAR_CHECK(r == rows);
  taps("attn.ctx", b.ctx, {rows, qdim});
  ops::MatMul(ex, b.ctx, rows, qdim, qdim, *w.o, w.o_b, out, H);  // o_proj(attn)
}

size_t SelfAttentionBytes(const AttentionSpec& a, int64_t rows, int64_t context, int threads) {
  return BuffersBytes<AttentionBuffers>(a, rows, true, false, true) +
         OpBytes(a, rows, context, threads);
}

void EncoderAttention(const Exec& ex, const AttentionSpec& a, const AttentionWeights& w,
                      const float* x, int64_t rows, const EncoderMask& mask, float* out,
                      const Positions* pos) {
  const int64_t H = a.hidden, qdim = a.qdim(), kvdim = a.kvdim();
  const bool gather = mask.key_order != nullptr, ranges = mask.begin == nullptr;
  Scratch s(ex.arena);
  AttentionBuffers b(s, a, rows, /*kv=*/true, gather, ranges);
  ops::MatMuls(ex, x, rows, H, H,
               {{w.q, w.q_b, b.q, qdim}, {w.k, w.k_b, b.k, kvdim}, {w.v, w.v_b, b.v, kvdim}});
  if (a.rope.enabled()) {  // q, k = apply_rotary_pos_emb_vision(q, k, cos, sin)
    OCULAR_CHECK(pos != nullptr, "HINT: an encoder RoPE needs the rows' positions");
    ApplyRope(ex, a.rope, *pos, b.q, rows, a.heads, a.head_dim, qdim);
    ApplyRope(ex, a.rope, *pos, b.k, rows, a.kv_heads, a.head_dim, kvdim);
  }
  const float* k = b.k;
  const float* v = b.v;
  if (gather) {  // keys and values in key_order
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(b.ks + r * kvdim, b.k + int64_t{mask.key_order[r]} * kvdim, kvdim * 4);
      std::memcpy(b.vs + r * kvdim, b.v + int64_t{mask.key_order[r]} * kvdim, kvdim * 4);
    }
    k = b.ks;
    v = b.vs;
  }
  const int32_t* begin = mask.begin;
  const int32_t* end = mask.end;
  if (ranges) {  // no mask: every row attends to every row
    std::fill_n(b.begin, rows, 0);
    std::fill_n(b.end, rows, static_cast<int32_t>(rows));
    begin = b.begin;
    end = b.end;
  }
  const ops::KvRows kv{k, v, false, 0, rows, kvdim, kvdim};
  ops::Attention(ex, b.q, rows, a.heads, qdim, kv, a.kv_heads, a.head_dim, a.scale, a.softcap,
                 begin, end, b.ctx, qdim);
  ops::MatMul(ex, b.ctx, rows, qdim, qdim, *w.o, w.o_b, out, H);  // out_proj(attn)
}

size_t EncoderAttentionBytes(const AttentionSpec& a, int64_t rows, bool key_order, int threads) {
  return BuffersBytes<AttentionBuffers>(a, rows, true, key_order, true) +
         OpBytes(a, rows, rows, threads);
}

void CrossAttention(const Exec& ex, const AttentionSpec& a, const AttentionWeights& w,
                    std::span<const CrossSeq> seqs, const float* x, int64_t rows, float* out) {
  const int64_t H = a.hidden, qdim = a.qdim();
  Scratch s(ex.arena);
  AttentionBuffers b(s, a, rows, /*kv=*/false, /*gather=*/false, /*ranges=*/false);
  ops::MatMul(ex, x, rows, H, H, *w.q, w.q_b, b.q, qdim);  // q = q_proj(x)
  QkNorm(ex, a, w.q_norm, b.q, rows, a.heads);             // q = q_norm(q) per head
  int64_t r = 0;
  for (const CrossSeq& sq : seqs) {
    if (sq.kv.Tk > 0) {
      ops::Attention(ex, b.q + r * qdim, sq.count, a.heads, qdim, sq.kv, a.kv_heads, a.head_dim,
                     a.scale, a.softcap, sq.begin, sq.end, b.ctx + r * qdim, qdim);
    } else {
      std::fill_n(b.ctx + r * qdim, sq.count * qdim, 0.0f);  // no keys: a zero row
    }
    r += sq.count;
  }
  OCULAR_CHECK(r == rows);
  ops::MatMul(ex, b.ctx, rows, qdim, qdim, *w.o, w.o_b, out, H);  // o_proj(attn)
}

size_t CrossAttentionBytes(const AttentionSpec& a, int64_t rows, int64_t keys, int threads) {
  return BuffersBytes<AttentionBuffers>(a, rows, false, false, false) +
         OpBytes(a, rows, keys, threads);
}

}  // namespace ocular::blocks

#include "models/mllama/decoder.h"

#include <algorithm>
#include <cmath>

#include "core/arena.h"
#include "core/check.h"
#include "core/half.h"
#include "kernels/ops.h"
#include "models/blocks/attention.h"
#include "models/blocks/decoder_layer.h"
#include "models/blocks/mlp.h"
#include "models/blocks/scratch.h"
#include "models/kv_cache.h"
#include "models/mllama/gates.h"
#include "models/mllama/vision.h"

namespace ocular::mllama {

namespace {

using blocks::FloatBytes;
using blocks::Scratch;

// MllamaSelfAttentionDecoderLayer: LlamaDecoderLayer (RMSNorm, SwiGLU, GQA, llama3 RoPE at
// position_ids = cache_position, causal mask, scale head_dim^-0.5).
blocks::DecoderLayerSpec SelfSpec(const TextConfig& c, const float* inv_freq) {
  blocks::DecoderLayerSpec s = blocks::LlamaLayerSpec(c);
  s.attn.rope.inv_freq = inv_freq;
  s.attn.qk_norm = TextNorm(c, nullptr);  // the cross layers' q_norm / k_norm
  return s;
}

blocks::DecoderLayerWeights SelfView(const TextLayerWeights& l) {
  blocks::DecoderLayerWeights w;
  w.attn = {&l.q_w, &l.k_w, &l.v_w, &l.o_w};
  w.mlp = {&l.gate_w, nullptr, &l.up_w, &l.down_w, nullptr};
  w.attn_norm = &l.input_norm;
  w.ffn_norm = &l.post_attn_norm;
  return w;
}

}  // namespace

std::vector<float> RopeInvFreq(const TextConfig& c) {
  return blocks::RopeInvFreq(
      c.head_dim(), c.rope_theta,
      {c.rope_factor, c.low_freq_factor, c.high_freq_factor, c.original_max_position_embeddings});
}

blocks::Norm TextNorm(const TextConfig& c, const TensorView* w) {
  return {blocks::NormKind::kLlamaRms, w, nullptr, c.rms_norm_eps};
}

namespace {

struct CrossRangeBuffers {
  CrossRangeBuffers(Scratch& s, int64_t images)
      : locs(s.Take<int64_t>(images + 1)),
        from(s.Take<int64_t>(images + 1)),
        to(s.Take<int64_t>(images + 1)),
        offset(s.Take<int64_t>(images + 1)) {}
  int64_t* locs;  // the image tokens' rows
  int64_t* from;  // image i covers rows [from[i], to[i])
  int64_t* to;
  int64_t* offset;  // image i's real keys start at offset[i]
};

}  // namespace

size_t CrossKeyRangesBytes(int64_t images) {
  return blocks::BuffersBytes<CrossRangeBuffers>(images);
}

void CrossKeyRanges(Arena& arena, const int32_t* ids, int64_t count, int32_t image_token,
                    const int* tiles, int64_t n, int64_t P, int64_t T, int32_t* begin, int32_t* end,
                    uint8_t* sees_image) {
  Scratch scratch(arena);
  CrossRangeBuffers b(scratch, n);
  int64_t* locs = b.locs;
  int64_t found = 0;
  for (int64_t t = 0; t < count; ++t) {
    if (ids[t] == image_token) {
      OCULAR_CHECK(found < n);
      locs[found++] = t;
    }
  }
  OCULAR_CHECK(found == n);
  // get_cross_attention_token_mask: image i covers [loc_i, loc_{i+1}), the last to the end;
  // a run of consecutive image tokens all cover up to the end of the run's successor's range.
  int64_t* from = b.from;
  int64_t* to = b.to;
  for (int64_t i = 0; i < n; ++i) {
    from[i] = locs[i];
    to[i] = i + 1 < n ? locs[i + 1] : count;
  }
  int64_t last_end = n > 0 ? to[n - 1] : 0;
  for (int64_t i = n - 1; i >= 0; --i) {
    if (from[i] == to[i] - 1) to[i] = last_end;
    last_end = to[i];
  }
  int64_t* offset = b.offset;
  offset[0] = 0;
  for (int64_t i = 0; i < n; ++i) offset[i + 1] = offset[i] + tiles[i] * P;
  for (int64_t t = 0; t < count; ++t) {
    int64_t first = -1, last = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (from[i] <= t && t < to[i]) {
        OCULAR_CHECK(last < 0 || last == i - 1, "HINT: a row's images form one run");
        if (first < 0) first = i;
        last = i;
      }
    }
    sees_image[t] = first >= 0;
    begin[t] = static_cast<int32_t>(first >= 0 ? offset[first] : 0);
    end[t] = static_cast<int32_t>(first >= 0 ? offset[last + 1] : n * T * P);
  }
}

void SelfAttentionLayer(const Exec& ex, const DecoderContext& dc, int layer, const Batch& batch,
                        float* x) {
  blocks::DecoderLayer(ex, SelfSpec(dc.cfg->text, dc.inv_freq), SelfView(dc.w->layers[layer]),
                       layer, batch, x, {dc.tracer, "decoder.layers.", layer});
}

namespace {

// The tile count of each of a prompt's images: its grid {1, tiles high, tiles wide}.
int64_t ImageTiles(const SeqChunk& s, int* tiles) {
  const std::vector<VisionInput>& images = s.prompt->images;
  for (size_t i = 0; i < images.size(); ++i) tiles[i] = images[i].grid[1] * images[i].grid[2];
  return static_cast<int64_t>(images.size());
}

// The image keys of `images` images: T * P rows each.
int64_t ImageKeys(const MllamaConfig& cfg, int64_t images) {
  return images * cfg.vision.max_num_tiles * cfg.vision.patches();
}

int64_t KvDim(const TextConfig& c) { return int64_t{c.num_key_value_heads} * c.head_dim(); }

struct ImageKvBuffers {
  ImageKvBuffers(Scratch& s, const MllamaConfig& cfg, int64_t images, bool traced)
      : f(s.Floats(ImageKeys(cfg, images) * cfg.text.hidden_size)),
        k(s.Floats(ImageKeys(cfg, images) * KvDim(cfg.text))),
        v(s.Floats(ImageKeys(cfg, images) * KvDim(cfg.text))),
        tap(traced ? s.Floats(ImageKeys(cfg, images) * KvDim(cfg.text)) : nullptr) {}
  float* f;    // the features, real tiles first
  float* k;    // k_norm(k_proj(f))
  float* v;    // v_proj(f)
  float* tap;  // K or V in HF's order, for the tracer
};

size_t ImageKvBytes(const MllamaConfig& cfg, int64_t images, int threads) {
  const TextConfig& c = cfg.text;
  return blocks::Nested(
      blocks::BuffersBytes<ImageKvBuffers>(cfg, images, true),
      {FloatBytes(ops::MatMulArenaFloats(threads, ImageKeys(cfg, images), c.hidden_size)),
       blocks::NormBytes(blocks::NormKind::kLlamaRms, c.head_dim())});
}

// Taps cross.{layer}.k / .v in HF's order: image by image, every tile.
void TapImageKv(const DecoderContext& dc, int layer, const ImageKvBuffers& b, const int* tiles,
                int64_t n, int64_t row) {
  const MllamaConfig& cfg = *dc.cfg;
  const int64_t kvdim = KvDim(cfg.text), T = cfg.vision.max_num_tiles, P = cfg.vision.patches();
  for (const auto& [what, src] : {std::pair{"k", b.k}, std::pair{"v", b.v}}) {
    int64_t from = 0;
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t t0 = pass == 0 ? 0 : tiles[i], t1 = pass == 0 ? tiles[i] : T;
        std::copy_n(src + from * kvdim, (t1 - t0) * P * kvdim, b.tap + (i * T + t0) * P * kvdim);
        from += (t1 - t0) * P;
      }
    }
    const std::string name = "cross." + std::to_string(layer) + "." + what;
    Tap(dc.tracer, name.c_str(), b.tap, {row, kvdim});
  }
}

// Computes the cross-attention K/V of a prompt's n images (tile counts `tiles`) for `layer`
// and stores them in the sequence's cache, real tiles first (CrossKeyRanges' order).
void StoreImageKv(const Exec& ex, const DecoderContext& dc, int layer, const SeqChunk& s,
                  const int* tiles, int64_t n) {
  const MllamaConfig& cfg = *dc.cfg;
  const TextLayerWeights& l = dc.w->layers[layer];
  const int64_t H = cfg.text.hidden_size, d = cfg.text.head_dim(), kvdim = KvDim(cfg.text);
  const int64_t T = cfg.vision.max_num_tiles, P = cfg.vision.patches();
  const int64_t per_image = ImageFeatureRows(cfg.vision);
  Scratch scratch(ex.arena);
  ImageKvBuffers b(scratch, cfg, n, dc.tracer != nullptr);
  int64_t row = 0;
  for (int pass = 0; pass < 2; ++pass) {  // real tiles, then padding tiles
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t0 = pass == 0 ? 0 : tiles[i], t1 = pass == 0 ? tiles[i] : T;
      const float* src = s.features + (i * per_image + t0 * P) * H;
      std::copy_n(src, (t1 - t0) * P * H, b.f + row * H);
      row += (t1 - t0) * P;
    }
  }
  // key_states = k_norm(k_proj(cross_attention_states)); value_states = v_proj(...)
  ops::MatMuls(ex, b.f, row, H, H, {{&l.k_w, nullptr, b.k, kvdim}, {&l.v_w, nullptr, b.v, kvdim}});
  blocks::ApplyNorm(ex, TextNorm(cfg.text, &l.k_norm), b.k, row * cfg.text.num_key_value_heads, d,
                    b.k);
  s.cache->Store(layer, 0, row, b.k, b.v, kvdim);
  dc.kv_computed->fetch_add(n, std::memory_order_relaxed);
  if (dc.tracer != nullptr) TapImageKv(dc, layer, b, tiles, n, row);
}

struct CrossBuffers {
  CrossBuffers(Scratch& s, const TextConfig& c, int64_t rows)
      : h(s.Floats(rows * c.hidden_size)),
        o(s.Floats(rows * c.hidden_size)),
        sees(s.Take<uint8_t>(rows)),
        begin(s.Take<int32_t>(rows)),
        end(s.Take<int32_t>(rows)),
        seqs(s.Take<blocks::CrossSeq>(rows)) {}
  float* h;
  float* o;
  uint8_t* sees;  // full_text_row_masked_out_mask
  int32_t* begin;
  int32_t* end;
  blocks::CrossSeq* seqs;  // one per sequence (each has a row at least)
};

// A prompt's images: their K/V computed and stored, the rows' key ranges, the cross state a
// later pass reads.
struct PromptBuffers {
  PromptBuffers(Scratch& s, int64_t images) : tiles(s.Take<int>(images + 1)) {}
  int* tiles;
};

// Key ranges and K/V of sequence s's rows (begin/end/sees at its rows), its keys.
ops::KvRows CrossKeys(const Exec& ex, const DecoderContext& dc, int layer, const SeqChunk& s,
                      int32_t* begin, int32_t* end, uint8_t* sees) {
  const MllamaConfig& cfg = *dc.cfg;
  const int64_t T = cfg.vision.max_num_tiles, P = cfg.vision.patches();
  OCULAR_CHECK(s.state != nullptr, "HINT: an mllama sequence has its NewState()");
  CrossState& st = *static_cast<CrossState*>(s.state);
  if (s.features != nullptr) {
    OCULAR_CHECK(s.prefill(), "HINT: image features come with a prefill");
    Scratch scratch(ex.arena);
    PromptBuffers b(scratch, static_cast<int64_t>(s.prompt->images.size()));
    const int64_t images = ImageTiles(s, b.tiles);
    StoreImageKv(ex, dc, layer, s, b.tiles, images);
    CrossKeyRanges(ex.arena, s.ids(), s.count, cfg.image_token_index, b.tiles, images, P, T, begin,
                   end, sees);
    st.keys = images * T * P;
    st.decode_begin = begin[s.count - 1];
    st.decode_end = end[s.count - 1];
    st.decode_sees_image = sees[s.count - 1] != 0;
  } else {
    // A later pass: the prompt's last row's mask, as generate() extends it. A text-only
    // sequence (no keys) gets an empty range: a zero attention row.
    std::fill_n(begin, s.count, st.keys > 0 ? st.decode_begin : 0);
    std::fill_n(end, s.count, st.keys > 0 ? st.decode_end : 0);
    std::fill_n(sees, s.count, st.keys > 0 && st.decode_sees_image ? 1 : 0);
  }
  return st.keys > 0 ? s.cache->Rows(layer, st.keys) : ops::KvRows{};
}

}  // namespace

void CrossAttentionLayer(const Exec& ex, const DecoderContext& dc, int layer, const Batch& batch,
                         float* x) {
  const TextConfig& c = dc.cfg->text;
  const TextLayerWeights& l = dc.w->layers[layer];
  const int64_t H = c.hidden_size, rows = batch.rows, n = rows * H;
  const blocks::DecoderLayerSpec spec = SelfSpec(c, dc.inv_freq);
  Scratch scratch(ex.arena);
  CrossBuffers b(scratch, c, rows);
  int64_t r = 0, i = 0;
  for (const SeqChunk& s : batch.seqs) {
    const ops::KvRows kv = CrossKeys(ex, dc, layer, s, b.begin + r, b.end + r, b.sees + r);
    b.seqs[i++] = {kv, s.count, b.begin + r, b.end + r};
    r += s.count;
  }
  // x = residual + tanh(cross_attn_attn_gate) * cross_attn(input_layernorm(x), images)
  // (q = q_norm(q_proj(hidden)); a text-only sequence's rows are 0)
  blocks::ApplyNorm(ex, TextNorm(c, &l.input_norm), x, rows, H, b.h);
  const blocks::AttentionWeights aw{&l.q_w,  nullptr, nullptr, &l.o_w,   nullptr,
                                    nullptr, nullptr, nullptr, &l.q_norm};
  blocks::CrossAttention(ex, spec.attn, aw, {b.seqs, static_cast<size_t>(i)}, b.h, rows, b.o);
  ops::Scale(ex, b.o, n, Tanh(ex, l.attn_gate));
  ops::Add(ex, x, b.o, x, n);
  // x = residual + tanh(cross_attn_mlp_gate) * (full_text_row_masked_out_mask * mlp(norm(x)))
  blocks::ApplyNorm(ex, TextNorm(c, &l.post_attn_norm), x, rows, H, b.h);
  blocks::Mlp(ex, spec.mlp, SelfView(l).mlp, b.h, rows, b.o);
  for (int64_t row = 0; row < rows; ++row) {
    if (!b.sees[row]) std::fill_n(b.o + row * H, H, 0.0f);
  }
  ops::Scale(ex, b.o, n, Tanh(ex, l.mlp_gate));
  ops::Add(ex, x, b.o, x, n);
}

size_t LayerBytes(const MllamaConfig& cfg, int64_t rows, int64_t context, int64_t images,
                  int threads) {
  const TextConfig& c = cfg.text;
  const blocks::DecoderLayerSpec spec = SelfSpec(c, nullptr);
  const size_t self = blocks::DecoderLayerBytes(spec, rows, context, threads);
  const size_t prompt =
      blocks::Nested(blocks::BuffersBytes<PromptBuffers>(images),
                     {ImageKvBytes(cfg, images, threads), CrossKeyRangesBytes(images)});
  const size_t cross = blocks::Nested(
      blocks::BuffersBytes<CrossBuffers>(c, rows),
      {prompt, blocks::CrossAttentionBytes(spec.attn, rows, ImageKeys(cfg, images), threads),
       blocks::MlpBytes(spec.mlp, rows, threads), blocks::NormBytes(spec.norm, c.hidden_size)});
  return std::max(self, cross);
}

}  // namespace ocular::mllama

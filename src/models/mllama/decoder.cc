#include "models/mllama/decoder.h"

#include <algorithm>
#include <cmath>

#include "core/arena.h"
#include "core/check.h"
#include "core/half.h"
#include "kernels/ops.h"
#include "models/kv_cache.h"
#include "models/mllama/gates.h"
#include "models/mllama/vision.h"

namespace ocular::mllama {

namespace {

size_t Floats(int64_t n) { return Arena::Rounded(static_cast<size_t>(n) * sizeof(float)); }

// MllamaTextMLP: down(silu(gate(x)) * up(x)); x[rows, H] -> out[rows, H].
// SiLU as torch computes it, x / (1 + exp(-x)), with libm's exp (< 1 ulp): with it the bf16
// taps are bit-identical to torch's; the kernels' Exp (<= 3 ulp) might flip bf16 roundings.
void SwiGlu(const Exec& ex, const TextConfig& c, const TextLayerWeights& l, const float* x,
            int64_t rows, float* out) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  ArenaScope scope(ex.arena);
  float* g = ex.arena.Floats(rows * I);
  float* u = ex.arena.Floats(rows * I);
  ops::MatMuls(ex, x, rows, H, H, {{&l.gate_w, nullptr, g, I}, {&l.up_w, nullptr, u, I}});
  for (int64_t i = 0; i < rows * I; ++i) g[i] = Round(ex, g[i] / (1.0f + std::exp(-g[i])));
  ops::Mul(ex, g, u, g, rows * I);
  ops::MatMul(ex, g, rows, I, I, l.down_w, nullptr, out, H);
}

}  // namespace

void LlamaRmsNorm(const Exec& ex, const TensorView& ones, const float* x, int64_t rows, int64_t dim,
                  const TensorView& w, float eps, float* y) {
  if (!ex.round_bf16()) {
    ops::RmsNorm(ex, x, rows, dim, w, eps, /*add_one=*/false, y);
    return;
  }
  TensorView unit = ones;
  unit.shape = {dim};
  ops::RmsNorm(ex, x, rows, dim, unit, eps, false, y);  // (x * rsqrt(...)).to(bf16)
  ArenaScope scope(ex.arena);
  float* wf = ex.arena.Floats(dim);
  ops::ToF32(ex, w, 0, dim, wf);
  for (int64_t r = 0; r < rows; ++r) ops::Mul(ex, y + r * dim, wf, y + r * dim, dim);
}

std::vector<float> RopeInvFreq(const TextConfig& c) {
  const int64_t d = c.head_dim(), half = d / 2;
  std::vector<float> inv(half);
  for (int64_t k = 0; k < half; ++k) {
    // 1.0 / (base ** (arange(0, dim, 2).float() / dim))   (_compute_default_rope_parameters)
    const float e = static_cast<float>(2 * k) / static_cast<float>(d);
    inv[k] = 1.0f / std::pow(c.rope_theta, e);
  }
  if (c.rope_factor <= 0) return inv;
  // _compute_llama3_parameters, element by element in f32.
  const float factor = c.rope_factor, lo = c.low_freq_factor, hi = c.high_freq_factor;
  const float old_len = static_cast<float>(c.original_max_position_embeddings);
  const float low_wavelen = static_cast<float>(c.original_max_position_embeddings / double{lo});
  const float high_wavelen = static_cast<float>(c.original_max_position_embeddings / double{hi});
  const float two_pi = static_cast<float>(2 * M_PI);
  for (float& f : inv) {
    const float wavelen = two_pi / f;
    const float llama = wavelen > low_wavelen ? f / factor : f;
    const float smooth = (old_len / wavelen - lo) / static_cast<float>(double{hi} - double{lo});
    const float smoothed = (1 - smooth) * llama / factor + smooth * llama;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    f = medium ? smoothed : llama;
  }
  return inv;
}

size_t CrossKeyRangesBytes(int64_t images) {
  return 4 * Arena::Rounded(static_cast<size_t>(images + 1) * sizeof(int64_t));
}

void CrossKeyRanges(Arena& arena, const int32_t* ids, int64_t count, int32_t image_token,
                    const int* tiles, int64_t n, int64_t P, int64_t T, int32_t* begin, int32_t* end,
                    uint8_t* sees_image) {
  ArenaScope scope(arena);
  int64_t* locs = arena.Alloc<int64_t>(n + 1);
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
  int64_t* from = arena.Alloc<int64_t>(n + 1);
  int64_t* to = arena.Alloc<int64_t>(n + 1);
  for (int64_t i = 0; i < n; ++i) {
    from[i] = locs[i];
    to[i] = i + 1 < n ? locs[i + 1] : count;
  }
  int64_t last_end = n > 0 ? to[n - 1] : 0;
  for (int64_t i = n - 1; i >= 0; --i) {
    if (from[i] == to[i] - 1) to[i] = last_end;
    last_end = to[i];
  }
  int64_t* offset = arena.Alloc<int64_t>(n + 1);  // image i's real keys start at offset[i]
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
  const TextConfig& c = dc.cfg->text;
  const TextLayerWeights& l = dc.w->layers[layer];
  const int64_t H = c.hidden_size, d = c.head_dim(), hq = c.num_attention_heads;
  const int64_t hkv = c.num_key_value_heads, qdim = hq * d, kvdim = hkv * d;
  const int64_t rows = batch.rows, n = rows * H;
  const float eps = c.rms_norm_eps;
  ArenaScope scope(ex.arena);
  float* h = ex.arena.Floats(n);
  float* o = ex.arena.Floats(n);
  {
    ArenaScope attention_scope(ex.arena);
    float* q = ex.arena.Floats(rows * qdim);
    float* k = ex.arena.Floats(rows * kvdim);
    float* v = ex.arena.Floats(rows * kvdim);
    float* ctx = ex.arena.Floats(rows * qdim);
    int64_t* pos = ex.arena.Alloc<int64_t>(rows);
    int32_t* begin = ex.arena.Alloc<int32_t>(rows);
    int32_t* end = ex.arena.Alloc<int32_t>(rows);
    // hidden = input_layernorm(x); q/k/v projections; RoPE at position_ids = cache_position
    LlamaRmsNorm(ex, *dc.ones, x, rows, H, l.input_norm, eps, h);
    ops::MatMuls(
        ex, h, rows, H, H,
        {{&l.q_w, nullptr, q, qdim}, {&l.k_w, nullptr, k, kvdim}, {&l.v_w, nullptr, v, kvdim}});
    int64_t r = 0;
    for (const SeqChunk& s : batch.seqs) {
      for (int64_t t = 0; t < s.count; ++t) pos[r + t] = s.start + t;
      r += s.count;
    }
    OCULAR_CHECK(r == rows);
    // apply_rotary_pos_emb with MllamaRotaryEmbedding's (llama3-scaled) inv_freq.
    ops::Rope(ex, q, rows, hq, d, qdim, pos, dc.inv_freq);
    ops::Rope(ex, k, rows, hkv, d, kvdim, pos, dc.inv_freq);
    r = 0;
    for (const SeqChunk& s : batch.seqs) {
      s.cache->Store(layer, s.start, s.count, k + r * kvdim, v + r * kvdim, kvdim);
      for (int64_t t = 0; t < s.count; ++t) {  // causal
        begin[r + t] = 0;
        end[r + t] = static_cast<int32_t>(s.start + t + 1);
      }
      const ops::KvRows kv = s.cache->Rows(layer, s.start + s.count);
      ops::Attention(ex, q + r * qdim, s.count, hq, qdim, kv, hkv, d,
                     1.0f / std::sqrt(static_cast<float>(d)), 0.0f, begin + r, end + r,
                     ctx + r * qdim, qdim);
      r += s.count;
    }
    ops::MatMul(ex, ctx, rows, qdim, qdim, l.o_w, nullptr, o, H);
  }
  ops::Add(ex, x, o, x, n);  // x = residual + self_attn(...)
  // x = x + mlp(post_attention_layernorm(x))
  LlamaRmsNorm(ex, *dc.ones, x, rows, H, l.post_attn_norm, eps, h);
  SwiGlu(ex, c, l, h, rows, o);
  ops::Add(ex, x, o, x, n);
}

namespace {

// The tile count of each of a prompt's images, from their features' tile-count rows.
int64_t ImageTiles(const MllamaConfig& cfg, const SeqChunk& s, int* tiles) {
  const int64_t H = cfg.text.hidden_size, T = cfg.vision.max_num_tiles, P = cfg.vision.patches();
  const int64_t per_image = ImageFeatureRows(cfg.vision), n = s.feature_rows / per_image;
  for (int64_t i = 0; i < n; ++i)
    tiles[i] = static_cast<int>(s.features[(i * per_image + T * P) * H]);
  return n;
}

// Computes the cross-attention K/V of a prompt's n images (tile counts `tiles`) for `layer`
// and stores them in the sequence's cache, real tiles first (CrossKeyRanges' order).
void StoreImageKv(const Exec& ex, const DecoderContext& dc, int layer, const SeqChunk& s,
                  const int* tiles, int64_t n) {
  const MllamaConfig& cfg = *dc.cfg;
  const TextLayerWeights& l = dc.w->layers[layer];
  const int64_t H = cfg.text.hidden_size, d = cfg.text.head_dim();
  const int64_t kvdim = int64_t{cfg.text.num_key_value_heads} * d;
  const int64_t T = cfg.vision.max_num_tiles, P = cfg.vision.patches();
  const int64_t per_image = ImageFeatureRows(cfg.vision);
  ArenaScope scope(ex.arena);
  float* f = ex.arena.Floats(n * T * P * H);
  float* k = ex.arena.Floats(n * T * P * kvdim);
  float* v = ex.arena.Floats(n * T * P * kvdim);
  int64_t row = 0;
  for (int pass = 0; pass < 2; ++pass) {  // real tiles, then padding tiles
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t0 = pass == 0 ? 0 : tiles[i], t1 = pass == 0 ? tiles[i] : T;
      const float* src = s.features + (i * per_image + t0 * P) * H;
      std::copy_n(src, (t1 - t0) * P * H, f + row * H);
      row += (t1 - t0) * P;
    }
  }
  // key_states = k_norm(k_proj(cross_attention_states)); value_states = v_proj(...)
  ops::MatMuls(ex, f, row, H, H, {{&l.k_w, nullptr, k, kvdim}, {&l.v_w, nullptr, v, kvdim}});
  LlamaRmsNorm(ex, *dc.ones, k, row * cfg.text.num_key_value_heads, d, l.k_norm,
               cfg.text.rms_norm_eps, k);
  s.cache->Store(layer, 0, row, k, v, kvdim);
  dc.kv_computed->fetch_add(n, std::memory_order_relaxed);
  if (dc.tracer != nullptr) {  // in HF's order: image by image, every tile
    float* t = ex.arena.Floats(row * kvdim);
    for (const auto& [what, src] : {std::pair{"k", k}, std::pair{"v", v}}) {
      int64_t from = 0;
      for (int pass = 0; pass < 2; ++pass) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t t0 = pass == 0 ? 0 : tiles[i], t1 = pass == 0 ? tiles[i] : T;
          std::copy_n(src + from * kvdim, (t1 - t0) * P * kvdim, t + (i * T + t0) * P * kvdim);
          from += (t1 - t0) * P;
        }
      }
      const std::string name = "cross." + std::to_string(layer) + "." + what;
      Tap(dc.tracer, name.c_str(), t, {row, kvdim});
    }
  }
}

}  // namespace

void CrossAttentionLayer(const Exec& ex, const DecoderContext& dc, int layer, const Batch& batch,
                         float* x) {
  const MllamaConfig& cfg = *dc.cfg;
  const TextConfig& c = cfg.text;
  const TextLayerWeights& l = dc.w->layers[layer];
  const int64_t H = c.hidden_size, d = c.head_dim(), hq = c.num_attention_heads;
  const int64_t hkv = c.num_key_value_heads, qdim = hq * d;
  const int64_t rows = batch.rows, n = rows * H;
  const int64_t T = cfg.vision.max_num_tiles, P = cfg.vision.patches();
  const float eps = c.rms_norm_eps;
  ArenaScope scope(ex.arena);
  float* h = ex.arena.Floats(n);
  float* o = ex.arena.Floats(n);
  uint8_t* sees = ex.arena.Alloc<uint8_t>(rows);
  {
    ArenaScope attention_scope(ex.arena);
    float* q = ex.arena.Floats(rows * qdim);
    float* ctx = ex.arena.Floats(rows * qdim);
    int32_t* begin = ex.arena.Alloc<int32_t>(rows);
    int32_t* end = ex.arena.Alloc<int32_t>(rows);
    // hidden = input_layernorm(x); query = q_norm(q_proj(hidden)) per head
    LlamaRmsNorm(ex, *dc.ones, x, rows, H, l.input_norm, eps, h);
    ops::MatMul(ex, h, rows, H, H, l.q_w, nullptr, q, qdim);
    LlamaRmsNorm(ex, *dc.ones, q, rows * hq, d, l.q_norm, eps, q);
    int64_t r = 0;
    for (const SeqChunk& s : batch.seqs) {
      CrossState& st = s.cache->cross_state();
      if (s.features != nullptr) {
        OCULAR_CHECK(s.start == 0 && s.ids != nullptr, "HINT: image features come with a prefill");
        int* tiles = ex.arena.Alloc<int>(s.feature_rows / ImageFeatureRows(cfg.vision) + 1);
        const int64_t images = ImageTiles(cfg, s, tiles);
        StoreImageKv(ex, dc, layer, s, tiles, images);
        CrossKeyRanges(ex.arena, s.ids, s.count, cfg.image_token_index, tiles, images, P, T,
                       begin + r, end + r, sees + r);
        st.keys = images * T * P;
        st.decode_begin = begin[r + s.count - 1];
        st.decode_end = end[r + s.count - 1];
        st.decode_sees_image = sees[r + s.count - 1] != 0;
      } else {
        // A later pass: the prompt's last row's mask, as generate() extends it. A text-only
        // sequence (no keys) gets an empty range: a zero attention row, skipped below.
        std::fill_n(begin + r, s.count, st.keys > 0 ? st.decode_begin : 0);
        std::fill_n(end + r, s.count, st.keys > 0 ? st.decode_end : 0);
        std::fill_n(sees + r, s.count, st.keys > 0 && st.decode_sees_image ? 1 : 0);
      }
      if (st.keys > 0) {
        const ops::KvRows kv = s.cache->Rows(layer, st.keys);
        ops::Attention(ex, q + r * qdim, s.count, hq, qdim, kv, hkv, d,
                       1.0f / std::sqrt(static_cast<float>(d)), 0.0f, begin + r, end + r,
                       ctx + r * qdim, qdim);
      } else {
        std::fill_n(ctx + r * qdim, s.count * qdim, 0.0f);
      }
      r += s.count;
    }
    ops::MatMul(ex, ctx, rows, qdim, qdim, l.o_w, nullptr, o, H);
  }
  // x = residual + tanh(cross_attn_attn_gate) * attn   (a text-only sequence's o rows are 0)
  ops::Scale(ex, o, n, Tanh(ex, l.attn_gate));
  ops::Add(ex, x, o, x, n);
  // x = residual + tanh(cross_attn_mlp_gate) * (full_text_row_masked_out_mask * mlp(norm(x)))
  LlamaRmsNorm(ex, *dc.ones, x, rows, H, l.post_attn_norm, eps, h);
  SwiGlu(ex, c, l, h, rows, o);
  for (int64_t r = 0; r < rows; ++r) {
    if (!sees[r]) std::fill_n(o + r * H, H, 0.0f);
  }
  ops::Scale(ex, o, n, Tanh(ex, l.mlp_gate));
  ops::Add(ex, x, o, x, n);
}

size_t LayerBytes(const MllamaConfig& cfg, int64_t rows, int64_t context, int64_t images,
                  int threads) {
  const TextConfig& c = cfg.text;
  const int64_t H = c.hidden_size, d = c.head_dim(), I = c.intermediate_size;
  const int64_t qdim = int64_t{c.num_attention_heads} * d,
                kvdim = int64_t{c.num_key_value_heads} * d;
  const int64_t keys = images * cfg.vision.max_num_tiles * cfg.vision.patches();
  const size_t ints = 4 * Arena::Rounded(static_cast<size_t>(rows) * sizeof(int64_t));
  const size_t attention = 2 * Floats(rows * qdim) + 2 * Floats(rows * kvdim) + ints +
                           Floats(keys * H) + 3 * Floats(keys * kvdim);  // + a traced copy
  const size_t mlp = 2 * Floats(rows * I);
  const size_t op = std::max(
      Floats(ops::AttentionArenaFloats(threads, std::max(context, keys), c.num_key_value_heads, d)),
      Floats(ops::MatMulArenaFloats(threads, std::max(rows, keys), std::max({H, I, qdim}))));
  const size_t ranges = Arena::Rounded((images + 1) * sizeof(int)) + CrossKeyRangesBytes(images);
  return 2 * Floats(rows * H) + Arena::Rounded(rows) + std::max(attention + ranges, mlp) + op;
}

}  // namespace ocular::mllama

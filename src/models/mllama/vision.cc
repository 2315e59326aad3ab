#include "models/mllama/vision.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/arena.h"
#include "core/check.h"
#include "core/half.h"
#include "kernels/ops.h"
#include "models/blocks/encoder_layer.h"
#include "models/blocks/scratch.h"
#include "models/mllama/gates.h"
#include "models/mllama/processor.h"

namespace ocular::mllama {

namespace {

// x[i] *= s, each product in the activation dtype (a tensor times a one-element tensor).
void ScaleRounded(const Exec& ex, float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] = Round(ex, x[i] * s);
}

// x[rows, D] += gate * table[row id] (tiles: row t of the table's [T, D] slice), as
// MllamaPrecomputedAspectRatioEmbedding.forward: embeddings * gate.tanh(), then the sum.
void AddTileEmbedding(const Exec& ex, const TensorView& table, int id, float gate, int64_t tiles,
                      int64_t rows_per_tile, int64_t D, float* x, float* scratch) {
  ops::ToF32(ex, table, id * tiles * D, tiles * D, scratch);
  ScaleRounded(ex, scratch, tiles * D, gate);
  for (int64_t t = 0; t < tiles; ++t) {
    for (int64_t r = 0; r < rows_per_tile; ++r) {
      float* row = x + (t * rows_per_tile + r) * D;
      ops::Add(ex, row, scratch + t * D, row, D);
    }
  }
}

// What one image's rows may attend to (_prepare_aspect_ratio_attention_mask): a row is padding
// if its tile is past the image's tiles or its patch is a padding patch; a real query sees
// every key, a padding query only the real keys. Keys are gathered real-first so both are one
// range: real queries [0, rows), padding queries [0, real).
struct VisionMask {
  int32_t* order;  // [rows] key rows, real first
  int32_t* begin;  // [rows]
  int32_t* end;    // [rows]
  int64_t real = 0;
};

VisionMask BuildMask(Arena& arena, const VisionConfig& c, int tiles) {
  const int64_t T = c.max_num_tiles, Pp = c.padded_patches(), rows = T * Pp;
  VisionMask m{arena.Alloc<int32_t>(rows), arena.Alloc<int32_t>(rows), arena.Alloc<int32_t>(rows)};
  auto is_real = [&](int64_t r) { return r / Pp < tiles && r % Pp < c.patches(); };
  int64_t k = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t r = 0; r < rows; ++r) {
      if (is_real(r) == (pass == 0)) m.order[k++] = static_cast<int32_t>(r);
    }
    if (pass == 0) m.real = k;
  }
  for (int64_t r = 0; r < rows; ++r) {
    m.begin[r] = 0;
    m.end[r] = static_cast<int32_t>(is_real(r) ? rows : m.real);
  }
  return m;
}

// MllamaVisionEncoderLayer on one image's rows x[rows, D] in place:
//   x = x + [tanh(gate_attn) *] o_proj(attn(input_layernorm(x)))
//   x = x + [tanh(gate_ffn) *] fc2(gelu(fc1(post_attention_layernorm(x))))
// with head_dim ** -0.5, no biases in the attention, keys as the image's mask orders them.
blocks::EncoderLayerSpec EncoderSpec(const VisionConfig& c) {
  return blocks::VitLayerSpec(c.hidden_size, c.num_attention_heads, c.intermediate_size,
                              blocks::ToMlpAct(c.hidden_act), c.norm_eps);
}

blocks::EncoderLayerWeights LayerView(const Exec& ex, const VisionLayerWeights& l, bool gated) {
  blocks::EncoderLayerWeights w = blocks::VitLayerView(
      {&l.ln1_w, &l.ln1_b, &l.ln2_w, &l.ln2_b, &l.q_w, &l.k_w, &l.v_w, &l.o_w, nullptr, nullptr,
       nullptr, nullptr, &l.fc1_w, &l.fc1_b, &l.fc2_w, &l.fc2_b});
  w.gated = gated;
  if (gated) {  // tanh(gate) of the global layers
    w.attn_gate = Tanh(ex, l.gate_attn);
    w.ffn_gate = Tanh(ex, l.gate_ffn);
  }
  return w;
}

void EncoderLayer(const Exec& ex, const VisionConfig& c, const VisionLayerWeights& l, bool gated,
                  const VisionMask& mask, float* x, int64_t rows) {
  blocks::EncoderLayer(ex, EncoderSpec(c), LayerView(ex, l, gated), x, rows,
                       {mask.begin, mask.end, mask.order});
}

// Patch conv + class token + gated position / tile embeddings + layernorm_pre for one image,
// into x[T, Pp, D] (padding patch rows zero, as F.pad).
void Embed(const Exec& ex, const VisionConfig& c, const VisionWeights& w, const float* pixels,
           int aspect_id, float* x) {
  const int64_t T = c.max_num_tiles, G = c.grid(), p = c.patch_size, R = c.image_size;
  const int64_t P = c.patches(), Pp = c.padded_patches(), D = c.hidden_size, K = 3 * p * p;
  ArenaScope scope(ex.arena);
  float* patches = ex.arena.Floats(T * G * G * K);
  for (int64_t t = 0; t < T; ++t) {
    const float* tile = pixels + t * 3 * R * R;
    for (int64_t py = 0; py < G; ++py) {
      for (int64_t px = 0; px < G; ++px) {
        float* dst = patches + ((t * G + py) * G + px) * K;
        for (int64_t ch = 0; ch < 3; ++ch)
          for (int64_t ky = 0; ky < p; ++ky)
            for (int64_t kx = 0; kx < p; ++kx)
              *dst++ = tile[(ch * R + py * p + ky) * R + px * p + kx];
      }
    }
  }
  ops::CastToActivation(ex, patches, T * G * G * K);
  float* emb = ex.arena.Floats(T * G * G * D);
  ops::MatMul(ex, patches, T * G * G, K, K, w.patch_w, nullptr, emb, D);
  float* scratch = ex.arena.Floats(std::max(T * D, P * D));
  // hidden_state = pre_tile_positional_embedding(hidden_state, aspect_ratio_ids)
  AddTileEmbedding(ex, w.pre_tile_embedding, aspect_id, Tanh(ex, w.pre_tile_gate), T, G * G, D, emb,
                   scratch);
  // apply_class_embedding: [class, patches...] per tile
  std::fill_n(x, T * Pp * D, 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    ops::ToF32(ex, w.class_embedding, 0, D, x + t * Pp * D);
    std::copy_n(emb + t * G * G * D, G * G * D, x + (t * Pp + 1) * D);
  }
  // gated_positional_embedding: + (1 - tanh(gate)) * embedding, then + tanh(gate) * tile_embedding
  const float gate = Tanh(ex, w.pos_gate);
  ops::ToF32(ex, w.pos_embedding, 0, P * D, scratch);
  const float keep = Round(ex, 1.0f - gate);
  ScaleRounded(ex, scratch, P * D, keep);
  for (int64_t t = 0; t < T; ++t) ops::Add(ex, x + t * Pp * D, scratch, x + t * Pp * D, P * D);
  for (int64_t t = 0; t < T; ++t) {
    ops::ToF32(ex, w.tile_pos_embedding, (int64_t{aspect_id} * T + t) * P * D, P * D, scratch);
    ScaleRounded(ex, scratch, P * D, gate);
    ops::Add(ex, x + t * Pp * D, scratch, x + t * Pp * D, P * D);
  }
  // layernorm_pre (nn.LayerNorm default eps 1e-5), on the real patch rows of every tile
  for (int64_t t = 0; t < T; ++t) {
    ops::LayerNorm(ex, x + t * Pp * D, P, D, w.ln_pre_w, w.ln_pre_b, 1e-5f, x + t * Pp * D);
  }
}

}  // namespace

int64_t ImageFeatureRows(const VisionConfig& v) { return int64_t{v.max_num_tiles} * v.patches(); }

size_t EncodeBytes(const MllamaConfig& cfg, int64_t n, int threads) {
  const VisionConfig& c = cfg.vision;
  const int64_t T = c.max_num_tiles, G = c.grid(), p = c.patch_size, P = c.patches();
  const int64_t rows = T * c.padded_patches(), D = c.hidden_size;
  const int64_t k = static_cast<int64_t>(c.intermediate_layers_indices.size());
  const int64_t Dv = c.vision_output_dim, H = cfg.text.hidden_size, K = 3 * p * p;
  const size_t held = blocks::FloatBytes(n * rows * D) * (1 + k) +
                      3 * Arena::Rounded(rows * sizeof(int32_t)) +
                      2 * Arena::Rounded(n * sizeof(int)) + blocks::FloatBytes(n * T * P * Dv) +
                      blocks::FloatBytes(n * T * P * H) + blocks::FloatBytes(n * T * P * D);
  const size_t embed = blocks::FloatBytes(T * G * G * K) + blocks::FloatBytes(T * G * G * D) +
                       blocks::FloatBytes(std::max(T, P) * D);
  const size_t layer = blocks::EncoderLayerBytes(EncoderSpec(c), rows, /*key_order=*/true, threads);
  const int64_t M = std::max({T * G * G, n * T * P});  // rows of the embedding / projector matmul
  const size_t op = blocks::FloatBytes(ops::MatMulArenaFloats(threads, M, std::max({K, D, Dv})));
  return held + std::max(embed + op, layer);
}

void EncodeImages(const Exec& ex, const MllamaConfig& cfg, const Weights& w,
                  std::span<const VisionInput> images, const float* pixels, float* features,
                  Tracer* tracer) {
  const int64_t n = static_cast<int64_t>(images.size());
  const VisionConfig& c = cfg.vision;
  const int64_t T = c.max_num_tiles, P = c.patches(), Pp = c.padded_patches(), rows = T * Pp;
  const int64_t D = c.hidden_size, Dv = c.vision_output_dim, H = cfg.text.hidden_size;
  const std::vector<int>& picks = c.intermediate_layers_indices;
  const int64_t k = static_cast<int64_t>(picks.size()), plane = PixelFloats(c);
  ArenaScope scope(ex.arena);
  float* x = ex.arena.Floats(n * rows * D);
  float* inter = ex.arena.Floats(n * rows * D * k);  // [k][n][rows, D]
  int* ids = ex.arena.Alloc<int>(n);
  int* tiles = ex.arena.Alloc<int>(n);
  for (int64_t i = 0; i < n; ++i) {
    // aspect_ratio_ids: 1 + the index of the image's (tiles high, tiles wide).
    const std::pair<int, int> shape{images[i].grid[1], images[i].grid[2]};
    const auto& ratios = c.supported_aspect_ratios;
    ids[i] = static_cast<int>(std::find(ratios.begin(), ratios.end(), shape) - ratios.begin()) + 1;
    OCULAR_CHECK(ids[i] <= c.max_aspect_ratio_id() && images[i].pixel_count == plane,
                 "HINT: images must come from MllamaProcessor::AddImage");
    tiles[i] = shape.first * shape.second;  // build_aspect_ratio_mask: the first w * h tiles
    Embed(ex, c, w.vision, pixels + i * plane, ids[i], x + i * rows * D);
  }
  if (tracer) {  // the real patch rows only: [n, T, P, D]
    ArenaScope tap_scope(ex.arena);
    float* t = ex.arena.Floats(n * T * P * D);
    for (int64_t r = 0; r < n * T; ++r) std::copy_n(x + r * Pp * D, P * D, t + r * P * D);
    Tap(tracer, "vision.layernorm_pre", t, {n, T, P, D});
  }
  // Local encoder; feature j is the input of layer picks[j] (Meta's definition).
  for (int li = 0; li < c.num_hidden_layers; ++li) {
    for (int64_t j = 0; j < k; ++j) {
      if (picks[j] == li) std::copy_n(x, n * rows * D, inter + j * n * rows * D);
    }
    for (int64_t i = 0; i < n; ++i) {
      ArenaScope mask_scope(ex.arena);
      const VisionMask mask = BuildMask(ex.arena, c, tiles[i]);
      EncoderLayer(ex, c, w.vision.layers[li], false, mask, x + i * rows * D, rows);
    }
    TapIndexed(tracer, "vision.layers.", li, x, {n, rows, D});
  }
  ops::LayerNorm(ex, x, n * rows, D, w.vision.ln_post_w, w.vision.ln_post_b, 1e-5f, x);
  Tap(tracer, "vision.layernorm_post", x, {n, rows, D});
  for (int64_t i = 0; i < n; ++i) {
    ArenaScope s(ex.arena);
    float* scratch = ex.arena.Floats(T * D);
    AddTileEmbedding(ex, w.vision.post_tile_embedding, ids[i], Tanh(ex, w.vision.post_tile_gate), T,
                     Pp, D, x + i * rows * D, scratch);
  }
  for (int li = 0; li < c.num_global_layers; ++li) {
    for (int64_t i = 0; i < n; ++i) {
      ArenaScope mask_scope(ex.arena);
      const VisionMask mask = BuildMask(ex.arena, c, tiles[i]);
      EncoderLayer(ex, c, w.vision.global_layers[li], true, mask, x + i * rows * D, rows);
    }
    TapIndexed(tracer, "vision.global_layers.", li, x, {n, rows, D});
  }
  // Drop the padding patches; concatenate [final, stack(intermediates, dim=-1)]: the
  // intermediate value of feature j at channel d lands at D + d * k + j.
  float* out = ex.arena.Floats(n * T * P * Dv);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t q = 0; q < P; ++q) {
        const int64_t src = (i * rows + t * Pp + q) * D;
        float* dst = out + ((i * T + t) * P + q) * Dv;
        std::copy_n(x + src, D, dst);
        for (int64_t j = 0; j < k; ++j) {
          const float* f = inter + j * n * rows * D + src;
          for (int64_t d = 0; d < D; ++d) dst[D + d * k + j] = f[d];
        }
      }
    }
  }
  Tap(tracer, "vision.output", out, {n, T, P, Dv});
  ops::MatMul(ex, out, n * T * P, Dv, Dv, w.proj_w, &w.proj_b, features, H);
  Tap(tracer, "projector", features, {n, T, P, H});
}

}  // namespace ocular::mllama

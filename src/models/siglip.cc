#include "models/siglip.h"

#include <algorithm>
#include <cmath>

#include "core/arena.h"
#include "core/check.h"
#include "kernels/ops.h"

namespace ocular {

namespace {

size_t Floats(int64_t n) { return Arena::Rounded(static_cast<size_t>(n) * sizeof(float)); }

int64_t PatchValues(const SiglipVisionConfig& c) {
  return int64_t{c.num_channels} * c.patch_size * c.patch_size;
}

// SiglipVisionEmbeddings: Conv2d(3, D, k=P, s=P) == matmul over flattened (c, ky, kx)
// patches in row-major patch order; then + position_embedding (one row per patch, no CLS).
void Embed(const Exec& ex, const SiglipVisionConfig& c, const SiglipWeights& w, const float* pixels,
           float* out /*[N, D]*/) {
  const int P = c.patch_size, R = c.image_size, G = R / P, C = c.num_channels;
  const int64_t K = PatchValues(c), N = int64_t{G} * G, D = c.hidden_size;
  ArenaScope scope(ex.arena);
  float* patches = ex.arena.Floats(N * K);
  for (int py = 0; py < G; ++py) {
    for (int px = 0; px < G; ++px) {
      float* dst = patches + (int64_t{py} * G + px) * K;
      for (int ch = 0; ch < C; ++ch)
        for (int ky = 0; ky < P; ++ky)
          for (int kx = 0; kx < P; ++kx)
            *dst++ = pixels[(int64_t{ch} * R + py * P + ky) * R + px * P + kx];
    }
  }
  ops::CastToActivation(ex, patches, N * K);  // pixel_values.to(dtype=target_dtype)
  ops::MatMul(ex, patches, N, K, K, w.patch_w, &w.patch_b, out, D);
  float* pos = ex.arena.Floats(N * D);
  ops::ToF32(ex, w.pos, 0, N * D, pos);
  ops::Add(ex, out, pos, out, N * D);
}

// SiglipEncoderLayer: x += out_proj(MHA(LN1(x))); x += fc2(act(fc1(LN2(x)))).
void EncoderLayer(const Exec& ex, const SiglipVisionConfig& c, const SiglipLayerWeights& l,
                  float* x, int64_t N) {
  const int64_t D = c.hidden_size, Iv = c.intermediate_size, nh = c.num_attention_heads;
  const int64_t hd = c.head_dim(), n = N * D;
  ArenaScope scope(ex.arena);
  float* h = ex.arena.Floats(n);
  float* o = ex.arena.Floats(n);
  {
    ArenaScope attention_scope(ex.arena);
    float* q = ex.arena.Floats(n);
    float* k = ex.arena.Floats(n);
    float* v = ex.arena.Floats(n);
    float* ctx = ex.arena.Floats(n);
    int32_t* begin = ex.arena.Alloc<int32_t>(N);
    int32_t* end = ex.arena.Alloc<int32_t>(N);
    ops::LayerNorm(ex, x, N, D, l.ln1_w, l.ln1_b, c.layer_norm_eps, h);
    ops::MatMuls(ex, h, N, D, D,
                 {{&l.q_w, &l.q_b, q, D}, {&l.k_w, &l.k_b, k, D}, {&l.v_w, &l.v_b, v, D}});
    // No mask: every patch attends to every patch of its image. Scale head_dim^-0.5.
    std::fill_n(begin, N, 0);
    std::fill_n(end, N, static_cast<int32_t>(N));
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const ops::KvRows kv{k, v, false, 0, N, D, D};
    ops::Attention(ex, q, N, nh, D, kv, nh, hd, scale, /*softcap=*/0.0f, begin, end, ctx, D);
    ops::MatMul(ex, ctx, N, D, D, l.o_w, &l.o_b, o, D);
    ops::Add(ex, x, o, x, n);
  }
  float* f = ex.arena.Floats(N * Iv);
  ops::LayerNorm(ex, x, N, D, l.ln2_w, l.ln2_b, c.layer_norm_eps, h);
  ops::MatMul(ex, h, N, D, D, l.fc1_w, &l.fc1_b, f, Iv);
  if (c.hidden_act == Activation::kGeluTanh) {
    ops::GeluTanh(ex, f, N * Iv);
  } else {
    ops::GeluErf(ex, f, N * Iv);
  }
  ops::MatMul(ex, f, N, Iv, Iv, l.fc2_w, &l.fc2_b, o, D);
  ops::Add(ex, x, o, x, n);
}

}  // namespace

size_t SiglipBytes(const SiglipVisionConfig& c, int64_t n, int threads) {
  const int64_t N = c.num_patches(), D = c.hidden_size, Iv = c.intermediate_size;
  const size_t embed = Floats(N * PatchValues(c)) + Floats(N * D);
  const size_t attention = 4 * Floats(N * D) + 2 * Arena::Rounded(N * sizeof(int32_t));
  const size_t layer = 2 * Floats(N * D) + std::max(attention, Floats(N * Iv));
  // The scratch of the op running innermost (never two at once).
  const size_t op =
      std::max(Floats(ops::AttentionArenaFloats(threads, N, c.num_attention_heads, c.head_dim())),
               Floats(ops::MatMulArenaFloats(threads, N, std::max({PatchValues(c), D, Iv}))));
  return Floats(n * N * D) + std::max(embed, layer) + op;
}

void SiglipForward(const Exec& ex, const SiglipVisionConfig& c, const SiglipWeights& w,
                   const float* pixels, int64_t n, float* out, Tracer* tracer) {
  const int64_t N = c.num_patches(), D = c.hidden_size;
  const int64_t plane = int64_t{c.num_channels} * c.image_size * c.image_size;
  ArenaScope scope(ex.arena);
  float* x = ex.arena.Floats(n * N * D);
  for (int64_t i = 0; i < n; ++i) Embed(ex, c, w, pixels + i * plane, x + i * N * D);
  Tap(tracer, "vision.embeddings", x, {n, N, D});
  for (int li = 0; li < c.num_hidden_layers; ++li) {
    for (int64_t i = 0; i < n; ++i) EncoderLayer(ex, c, w.layers[li], x + i * N * D, N);
    TapIndexed(tracer, "vision.layers.", li, x, {n, N, D});
  }
  ops::LayerNorm(ex, x, n * N, D, w.post_ln_w, w.post_ln_b, c.layer_norm_eps, out);
  Tap(tracer, "vision.post_layernorm", out, {n, N, D});
}

}  // namespace ocular

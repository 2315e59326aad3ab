#include "models/siglip.h"

#include <algorithm>
#include <cmath>

#include "core/arena.h"
#include "core/check.h"
#include "kernels/ops.h"
#include "models/blocks/encoder_layer.h"
#include "models/blocks/scratch.h"

namespace ocular {

namespace {

using blocks::FloatBytes;
using blocks::Scratch;

int64_t PatchValues(const SiglipVisionConfig& c) {
  return int64_t{c.num_channels} * c.patch_size * c.patch_size;
}

struct EmbedBuffers {
  EmbedBuffers(Scratch& s, const SiglipVisionConfig& c)
      : patches(s.Floats(c.num_patches() * PatchValues(c))),
        pos(s.Floats(c.num_patches() * int64_t{c.hidden_size})) {}
  float* patches;  // [N, C*P*P]
  float* pos;      // [N, D] position_embedding in f32
};

// SiglipVisionEmbeddings: Conv2d(3, D, k=P, s=P) == matmul over flattened (c, ky, kx)
// patches in row-major patch order; then + position_embedding (one row per patch, no CLS).
void Embed(const Exec& ex, const SiglipVisionConfig& c, const SiglipWeights& w, const float* pixels,
           float* out /*[N, D]*/) {
  const int P = c.patch_size, R = c.image_size, G = R / P, C = c.num_channels;
  const int64_t K = PatchValues(c), N = int64_t{G} * G, D = c.hidden_size;
  Scratch s(ex.arena);
  EmbedBuffers b(s, c);
  for (int py = 0; py < G; ++py) {
    for (int px = 0; px < G; ++px) {
      float* dst = b.patches + (int64_t{py} * G + px) * K;
      for (int ch = 0; ch < C; ++ch)
        for (int ky = 0; ky < P; ++ky)
          for (int kx = 0; kx < P; ++kx)
            *dst++ = pixels[(int64_t{ch} * R + py * P + ky) * R + px * P + kx];
    }
  }
  ops::CastToActivation(ex, b.patches, N * K);  // pixel_values.to(dtype=target_dtype)
  ops::MatMul(ex, b.patches, N, K, K, w.patch_w, &w.patch_b, out, D);
  ops::ToF32(ex, w.pos, 0, N * D, b.pos);
  ops::Add(ex, out, b.pos, out, N * D);
}

// SiglipEncoderLayer: x += out_proj(MHA(LN1(x))); x += fc2(act(fc1(LN2(x)))); no mask
// (every patch attends to every patch of its image), scale head_dim^-0.5.
blocks::EncoderLayerSpec EncoderSpec(const SiglipVisionConfig& c) {
  return blocks::VitLayerSpec(c.hidden_size, c.num_attention_heads, c.intermediate_size,
                              blocks::ToMlpAct(c.hidden_act), c.layer_norm_eps);
}

blocks::EncoderLayerWeights LayerView(const SiglipLayerWeights& l) {
  return blocks::VitLayerView({&l.ln1_w, &l.ln1_b, &l.ln2_w, &l.ln2_b, &l.q_w, &l.k_w, &l.v_w,
                               &l.o_w, &l.q_b, &l.k_b, &l.v_b, &l.o_b, &l.fc1_w, &l.fc1_b, &l.fc2_w,
                               &l.fc2_b});
}

}  // namespace

size_t SiglipBytes(const SiglipVisionConfig& c, int64_t n, int threads) {
  const int64_t N = c.num_patches(), D = c.hidden_size;
  const size_t embed =
      blocks::Nested(blocks::BuffersBytes<EmbedBuffers>(c),
                     {FloatBytes(ops::MatMulArenaFloats(threads, N, PatchValues(c)))});
  const size_t layer = blocks::EncoderLayerBytes(EncoderSpec(c), N, false, threads);
  return blocks::Nested(FloatBytes(n * N * D), {embed, layer});
}

void SiglipForward(const Exec& ex, const SiglipVisionConfig& c, const SiglipWeights& w,
                   const float* pixels, int64_t n, float* out, Tracer* tracer) {
  const int64_t N = c.num_patches(), D = c.hidden_size;
  const int64_t plane = int64_t{c.num_channels} * c.image_size * c.image_size;
  const blocks::EncoderLayerSpec spec = EncoderSpec(c);
  ArenaScope scope(ex.arena);
  float* x = ex.arena.Floats(n * N * D);
  for (int64_t i = 0; i < n; ++i) Embed(ex, c, w, pixels + i * plane, x + i * N * D);
  Tap(tracer, "vision.embeddings", x, {n, N, D});
  for (int li = 0; li < c.num_hidden_layers; ++li) {
    const blocks::EncoderLayerWeights lw = LayerView(w.layers[li]);
    for (int64_t i = 0; i < n; ++i) blocks::EncoderLayer(ex, spec, lw, x + i * N * D, N, {});
    TapIndexed(tracer, "vision.layers.", li, x, {n, N, D});
  }
  ops::LayerNorm(ex, x, n * N, D, w.post_ln_w, w.post_ln_b, c.layer_norm_eps, out);
  Tap(tracer, "vision.post_layernorm", out, {n, N, D});
}

}  // namespace ocular

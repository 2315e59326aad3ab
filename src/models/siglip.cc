#include "models/siglip.h"

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/bf16_emulation.h"
#include "kernels/ops.h"

namespace ocular {

namespace {

// SiglipVisionEmbeddings: Conv2d(3, D, k=P, s=P) == matmul over flattened (c, ky, kx)
// patches in row-major patch order; then + position_embedding (one row per patch, no CLS).
void Embed(ThreadPool& pool, const SiglipVisionConfig& c, const SiglipWeights& w,
           const Numerics& nx, const float* pixels, float* out /*[N, D]*/) {
  const int P = c.patch_size, R = c.image_size, G = R / P, C = c.num_channels;
  const int64_t K = int64_t{C} * P * P, N = int64_t{G} * G, D = c.hidden_size;
  std::vector<float> patches(N * K);
  for (int py = 0; py < G; ++py) {
    for (int px = 0; px < G; ++px) {
      float* dst = patches.data() + (int64_t{py} * G + px) * K;
      for (int ch = 0; ch < C; ++ch)
        for (int ky = 0; ky < P; ++ky)
          for (int kx = 0; kx < P; ++kx)
            *dst++ = pixels[(int64_t{ch} * R + py * P + ky) * R + px * P + kx];
    }
  }
  nx.Round(patches.data(), N * K);  // pixel_values.to(dtype=target_dtype)
  TensorView wk = w.patch_w;
  wk.shape = {D, K};
  ops::MatMulBias(pool, patches.data(), N, K, K, wk, &w.patch_b, out, D);
  nx.Round(out, N * D);
  std::vector<float> pos(D);
  for (int64_t i = 0; i < N; ++i) {
    ops::ToF32(w.pos, i * D, D, pos.data());
    ops::Add(out + i * D, pos.data(), out + i * D, D);
  }
  nx.Round(out, N * D);
}

// SiglipEncoderLayer: x += out_proj(MHA(LN1(x))); x += fc2(act(fc1(LN2(x)))).
void EncoderLayer(ThreadPool& pool, const SiglipVisionConfig& c, const SiglipLayerWeights& l,
                  const Numerics& nx, float* x, int64_t N) {
  const int64_t D = c.hidden_size, Iv = c.intermediate_size, nh = c.num_attention_heads;
  const int64_t hd = c.head_dim();
  std::vector<float> h(N * D), q(N * D), k(N * D), v(N * D), ctx(N * D), o(N * D);
  const int64_t n = N * D;
  ops::LayerNorm(x, N, D, l.ln1_w, l.ln1_b, c.layer_norm_eps, h.data());
  nx.Round(h.data(), n);
  ops::MatMulBias(pool, h.data(), N, D, D, l.q_w, &l.q_b, q.data(), D);
  ops::MatMulBias(pool, h.data(), N, D, D, l.k_w, &l.k_b, k.data(), D);
  ops::MatMulBias(pool, h.data(), N, D, D, l.v_w, &l.v_b, v.data(), D);
  nx.Round(q.data(), n);
  nx.Round(k.data(), n);
  nx.Round(v.data(), n);
  // No mask: every patch attends to every patch of its image. Scale head_dim^-0.5.
  std::vector<int32_t> begin(N, 0), end(N, static_cast<int32_t>(N));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  auto attention = nx.bf16 ? ops::AttentionBF16 : ops::Attention;
  attention(pool, q.data(), N, nh, D, k.data(), v.data(), N, nh, D, D, hd, scale,
            /*softcap=*/0.0f, begin.data(), end.data(), ctx.data(), D);
  ops::MatMulBias(pool, ctx.data(), N, D, D, l.o_w, &l.o_b, o.data(), D);
  nx.Round(o.data(), n);
  ops::Add(x, o.data(), x, n);
  nx.Round(x, n);

  std::vector<float> f(N * Iv);
  ops::LayerNorm(x, N, D, l.ln2_w, l.ln2_b, c.layer_norm_eps, h.data());
  nx.Round(h.data(), n);
  ops::MatMulBias(pool, h.data(), N, D, D, l.fc1_w, &l.fc1_b, f.data(), Iv);
  nx.Round(f.data(), N * Iv);
  if (c.hidden_act == Activation::kGeluTanh) {
    ops::GeluTanh(f.data(), N * Iv);
  } else {
    ops::GeluErf(f.data(), N * Iv);
  }
  nx.Round(f.data(), N * Iv);
  ops::MatMulBias(pool, f.data(), N, Iv, Iv, l.fc2_w, &l.fc2_b, o.data(), D);
  nx.Round(o.data(), n);
  ops::Add(x, o.data(), x, n);
  nx.Round(x, n);
}

}  // namespace

Tensor SiglipForward(ThreadPool& pool, const SiglipVisionConfig& c, const SiglipWeights& w,
                     const Numerics& nx, const Tensor& pixel_values, Tracer* tracer) {
  OCULAR_CHECK(pixel_values.shape.size() == 4 && pixel_values.shape[1] == c.num_channels &&
               pixel_values.shape[2] == c.image_size && pixel_values.shape[3] == c.image_size);
  const int64_t n = pixel_values.shape[0], N = c.num_patches(), D = c.hidden_size;
  const int64_t plane = int64_t{c.num_channels} * c.image_size * c.image_size;
  Tensor x({n, N, D});
  for (int64_t i = 0; i < n; ++i) {
    Embed(pool, c, w, nx, pixel_values.data.data() + i * plane, x.data.data() + i * N * D);
  }
  TapIf(tracer, "vision.embeddings", x.data.data(), x.shape);
  for (int li = 0; li < c.num_hidden_layers; ++li) {
    for (int64_t i = 0; i < n; ++i) EncoderLayer(pool, c, w.layers[li], nx, x.data.data() + i * N * D, N);
    TapIf(tracer, "vision.layers." + std::to_string(li), x.data.data(), x.shape);
  }
  Tensor out({n, N, D});
  ops::LayerNorm(x.data.data(), n * N, D, w.post_ln_w, w.post_ln_b, c.layer_norm_eps, out.data.data());
  nx.Round(out.data.data(), out.numel());
  TapIf(tracer, "vision.post_layernorm", out.data.data(), out.shape);
  return out;
}

}  // namespace ocular

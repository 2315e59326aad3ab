#include "models/blocks/encoder_layer.h"

#include <cmath>

#include "kernels/ops.h"
#include "models/blocks/scratch.h"

namespace ocular::blocks {

namespace {

struct LayerBuffers {
  LayerBuffers(Scratch& s, const EncoderLayerSpec& spec, int64_t rows)
      : h(s.Floats(rows * spec.attn.hidden)), o(s.Floats(rows * spec.attn.hidden)) {}
  float* h;  // a normed input
  float* o;  // a branch's output
};

}  // namespace

EncoderLayerSpec VitLayerSpec(int64_t hidden, int64_t heads, int64_t inner, MlpAct act, float eps) {
  EncoderLayerSpec s;
  s.norm = NormKind::kLayer;
  s.eps = eps;
  s.attn.hidden = hidden;
  s.attn.heads = s.attn.kv_heads = heads;
  s.attn.head_dim = hidden / heads;
  s.attn.scale = 1.0f / std::sqrt(static_cast<float>(hidden / heads));  // head_dim ** -0.5
  s.mlp = {hidden, inner, act, /*gated=*/false};
  return s;
}

EncoderLayerWeights VitLayerView(const VitLayerNames& n) {
  EncoderLayerWeights w;
  w.attn = {n.q, n.k, n.v, n.o, n.q_b, n.k_b, n.v_b, n.o_b};
  w.mlp = {n.fc1, n.fc1_b, nullptr, n.fc2, n.fc2_b};
  w.norm1_w = n.ln1_w;
  w.norm1_b = n.ln1_b;
  w.norm2_w = n.ln2_w;
  w.norm2_b = n.ln2_b;
  return w;
}

void EncoderLayer(const Exec& ex, const EncoderLayerSpec& s, const EncoderLayerWeights& w, float* x,
                  int64_t rows, const EncoderMask& mask, const Positions* pos) {
  const int64_t D = s.attn.hidden, n = rows * D;
  Scratch scratch(ex.arena);
  LayerBuffers b(scratch, s, rows);
  // x = x + [tanh(gate_attn) *] attn(norm1(x))
  ApplyNorm(ex, {s.norm, w.norm1_w, w.norm1_b, s.eps}, x, rows, D, b.h);
  EncoderAttention(ex, s.attn, w.attn, b.h, rows, mask, b.o, pos);
  if (w.gated) ops::Scale(ex, b.o, n, w.attn_gate);
  ops::Add(ex, x, b.o, x, n);
  // x = x + [tanh(gate_ffn) *] mlp(norm2(x))
  ApplyNorm(ex, {s.norm, w.norm2_w, w.norm2_b, s.eps}, x, rows, D, b.h);
  Mlp(ex, s.mlp, w.mlp, b.h, rows, b.o);
  if (w.gated) ops::Scale(ex, b.o, n, w.ffn_gate);
  ops::Add(ex, x, b.o, x, n);
}

size_t EncoderLayerBytes(const EncoderLayerSpec& s, int64_t rows, bool key_order, int threads) {
  return Nested(BuffersBytes<LayerBuffers>(s, rows),
                {EncoderAttentionBytes(s.attn, rows, key_order, threads),
                 MlpBytes(s.mlp, rows, threads), NormBytes(s.norm, s.attn.hidden)});
}

}  // namespace ocular::blocks

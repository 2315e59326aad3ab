#include "models/blocks/decoder_layer.h"

#include "kernels/ops.h"
#include "models/blocks/scratch.h"

namespace ocular::blocks {

namespace {

struct LayerBuffers {
  LayerBuffers(Scratch& s, const DecoderLayerSpec& spec, int64_t rows)
      : h(s.Floats(rows * spec.attn.hidden)),
        o(s.Floats(rows * spec.attn.hidden)),
        pos(s.Take<int64_t>(rows)) {}
  float* h;      // a normed input / output
  float* o;      // a block's output
  int64_t* pos;  // the rows' positions
};

Norm LayerNorm(const DecoderLayerSpec& s, const TensorView* w) {
  return {s.norm, w, nullptr, s.eps};
}

// x = x + branch, the branch (in b.o) through its post-norm first in a sandwich layer.
void AddBranch(const Exec& ex, const DecoderLayerSpec& s, const TensorView* post_norm,
               const char* post_tap, const LayerBuffers& b, int64_t rows, float* x,
               const Taps& taps) {
  const int64_t H = s.attn.hidden;
  const float* branch = b.o;
  if (s.sandwich) {
    ApplyNorm(ex, LayerNorm(s, post_norm), b.o, rows, H, b.h);
    taps(post_tap, b.h, {rows, H});
    branch = b.h;
  }
  ops::Add(ex, x, branch, x, rows * H);
}

}  // namespace

void DecoderLayer(const Exec& ex, const DecoderLayerSpec& s, const DecoderLayerWeights& w,
                  int layer, const Batch& batch, float* x, const Taps& taps) {
  const int64_t H = s.attn.hidden, rows = batch.rows;
  Scratch scratch(ex.arena);
  LayerBuffers b(scratch, s, rows);
  int64_t r = 0;
  for (const SeqChunk& sq : batch.seqs) {
    for (int64_t t = 0; t < sq.count; ++t) b.pos[r++] = sq.start + t + s.position_offset;
  }
  const Positions pos{b.pos, rows, 1};
  // x = x + [attn_post_norm](self_attn(attn_norm(x)))
  ApplyNorm(ex, LayerNorm(s, w.attn_norm), x, rows, H, b.h);
  taps("attn_norm", b.h, {rows, H});
  SelfAttention(ex, s.attn, w.attn, layer, batch, pos, b.h, b.o, taps);
  taps("attn_out", b.o, {rows, H});
  AddBranch(ex, s, w.attn_post_norm, "attn_post_norm", b, rows, x, taps);
  // x = x + [ffn_post_norm](mlp(ffn_norm(x)))
  ApplyNorm(ex, LayerNorm(s, w.ffn_norm), x, rows, H, b.h);
  taps("ffn_norm", b.h, {rows, H});
  Mlp(ex, s.mlp, w.mlp, b.h, rows, b.o);
  taps("ffn_out", b.o, {rows, H});
  AddBranch(ex, s, w.ffn_post_norm, "ffn_post_norm", b, rows, x, taps);
}

size_t DecoderLayerBytes(const DecoderLayerSpec& s, int64_t rows, int64_t context, int threads) {
  return Nested(BuffersBytes<LayerBuffers>(s, rows),
                {SelfAttentionBytes(s.attn, rows, context, threads), MlpBytes(s.mlp, rows, threads),
                 NormBytes(s.norm, s.attn.hidden)});
}

}  // namespace ocular::blocks

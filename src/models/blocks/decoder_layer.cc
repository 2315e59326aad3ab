#include "models/blocks/decoder_layer.h"

#include "core/check.h"
#include "kernels/ops.h"
#include "models/blocks/scratch.h"

namespace ocular::blocks {

namespace {

struct LayerBuffers {
  LayerBuffers(Scratch& s, const DecoderLayerSpec& spec, int64_t rows)
      : h(s.Floats(rows * spec.attn.hidden)),
        o(s.Floats(rows * spec.attn.hidden)),
        pos(s.Take<int64_t>(rows * spec.attn.rope.axes)) {}
  float* h;      // a normed input / output
  float* o;      // a block's output
  int64_t* pos;  // the rows' positions [axes, rows]
};

// The rows' positions, axis after axis: cache row i at i + offset (1-D), or on each axis the
// prompt's (Prompt::positions: a prompt row's given position, a decode row at i + decode_offset).
void RowPositions(const DecoderLayerSpec& s, const Batch& batch, int64_t* pos) {
  const int axes = s.attn.rope.axes;
  const int64_t rows = batch.rows;
  int64_t r = 0;
  for (const SeqChunk& sq : batch.seqs) {
    for (int64_t t = 0; t < sq.count; ++t, ++r) {
      const int64_t i = sq.start + t;
      if (axes == 1 || sq.prompt == nullptr) {
        for (int a = 0; a < axes; ++a) pos[a * rows + r] = i + s.position_offset;
        continue;
      }
      const ocular::Positions& p = sq.prompt->positions;
      OCULAR_CHECK(p.ids.empty() || p.axes == axes, "HINT: a prompt of other RoPE axes");
      for (int a = 0; a < axes; ++a) {
        pos[a * rows + r] = p.At(p.ids.empty() ? 0 : a, i, sq.prompt->size()) + s.position_offset;
      }
    }
  }
}

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
  RowPositions(s, batch, b.pos);
  const blocks::Positions pos{b.pos, rows, s.attn.rope.axes};
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

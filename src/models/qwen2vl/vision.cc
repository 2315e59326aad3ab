#include "models/qwen2vl/vision.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/ops.h"
#include "models/blocks/encoder_layer.h"
#include "models/blocks/mlp.h"
#include "models/blocks/scratch.h"

namespace ocular::qwen2vl {

namespace {

using blocks::FloatBytes;
using blocks::Scratch;

// Qwen2VLVisionBlock: norm1/norm2 LayerNorm(eps 1e-6), VisionAttention (heads of D / heads,
// scale head_dim^-0.5, q/k/v/proj biases, apply_rotary_pos_emb_vision), VisionMlp
// fc2(quick_gelu(fc1(x))).
blocks::EncoderLayerSpec BlockSpec(const VisionConfig& c, const blocks::RopeSpec& rope) {
  blocks::EncoderLayerSpec s = blocks::VitLayerSpec(c.embed_dim, c.num_heads, c.mlp_dim(),
                                                    blocks::MlpAct::kQuickGelu, 1e-6f);
  s.attn.rope = rope;
  return s;
}

blocks::EncoderLayerWeights BlockView(const VisionBlockWeights& b) {
  return blocks::VitLayerView({&b.norm1_w, &b.norm1_b, &b.norm2_w, &b.norm2_b, &b.q_w, &b.k_w,
                               &b.v_w, &b.proj_w, &b.q_b, &b.k_b, &b.v_b, &b.proj_b, &b.fc1_w,
                               &b.fc1_b, &b.fc2_w, &b.fc2_b});
}

struct EncodeBuffers {
  EncodeBuffers(Scratch& s, const Qwen2VLConfig& c, int64_t rows)
      : x(s.Floats(rows * c.vision.embed_dim)),
        ln(s.Floats(rows * c.vision.embed_dim)),
        pos(s.Take<int64_t>(2 * rows)),
        begin(s.Take<int32_t>(rows)),
        end(s.Take<int32_t>(rows)) {}
  float* x;        // [rows, D]
  float* ln;       // merger.ln_q(x)
  int64_t* pos;    // [2, rows]: patch row, patch column (rot_pos_emb)
  int32_t* begin;  // each row's keys: its image's rows (cu_seqlens)
  int32_t* end;
};

}  // namespace

size_t EncodeBytes(const Qwen2VLConfig& cfg, int64_t rows, int threads) {
  const VisionConfig& v = cfg.vision;
  const blocks::RopeSpec rope{0, 1, nullptr, nullptr, 2};  // sizes only
  blocks::EncoderLayerSpec spec = BlockSpec(v, rope);
  spec.attn.rope.theta = 1;  // enabled: counts RoPE's scratch
  const int64_t K = v.patch_floats(), Dm = int64_t{v.embed_dim} * v.merge_rows();
  return blocks::Nested(
      blocks::BuffersBytes<EncodeBuffers>(cfg, rows),
      {FloatBytes(ops::MatMulArenaFloats(threads, rows, std::max<int64_t>(K, Dm))),
       blocks::EncoderLayerBytes(spec, rows, /*key_order=*/false, threads)});
}

void EncodeImages(const Exec& ex, const Qwen2VLConfig& cfg, const VisionWeights& w,
                  const blocks::RopeSpec& rope, std::span<const VisionInput> images,
                  const float* pixels, float* features, Tracer* tracer) {
  const VisionConfig& v = cfg.vision;
  const int64_t D = v.embed_dim, K = v.patch_floats(), H = cfg.text.hidden_size;
  const int m = v.spatial_merge_size;
  int64_t rows = 0;
  for (const VisionInput& in : images) {
    const int64_t n = int64_t{in.grid[0]} * in.grid[1] * in.grid[2];
    OCULAR_CHECK(in.pixel_count == n * K && in.grid[1] % m == 0 && in.grid[2] % m == 0 &&
                     in.feature_rows * v.merge_rows() == n,
                 "HINT: images must come from Qwen2VLProcessor::AddImage");
    rows += n;
  }
  Scratch scratch(ex.arena);
  EncodeBuffers b(scratch, cfg, rows);
  // hidden_states = self.proj(pixel_values.view(-1, C, tp, p, p)): one row per patch.
  ops::MatMul(ex, pixels, rows, K, K, w.patch_w, nullptr, b.x, D);
  Tap(tracer, "vision.patch_embed", b.x, {rows, D});
  // rot_pos_emb: each image's patch rows in (block row, block column, row, column) order, t
  // times; cu_seqlens: the rows of one frame attend among themselves.
  int64_t r = 0;
  for (const VisionInput& in : images) {
    const int64_t frame = int64_t{in.grid[1]} * in.grid[2];
    for (int t = 0; t < in.grid[0]; ++t) {
      const int32_t first = static_cast<int32_t>(r);
      for (int bh = 0; bh < in.grid[1] / m; ++bh) {
        for (int bw = 0; bw < in.grid[2] / m; ++bw) {
          for (int ih = 0; ih < m; ++ih) {
            for (int iw = 0; iw < m; ++iw, ++r) {
              b.pos[r] = bh * m + ih;
              b.pos[rows + r] = bw * m + iw;
              b.begin[r] = first;
              b.end[r] = static_cast<int32_t>(first + frame);
            }
          }
        }
      }
    }
  }
  OCULAR_CHECK(r == rows);
  const blocks::EncoderLayerSpec spec = BlockSpec(v, rope);
  const blocks::Positions pos{b.pos, rows, 2};
  const blocks::EncoderMask mask{b.begin, b.end, nullptr};
  for (int i = 0; i < v.depth; ++i) {
    // x = x + attn(norm1(x)); x = x + mlp(norm2(x))
    blocks::EncoderLayer(ex, spec, BlockView(w.blocks[i]), b.x, rows, mask, &pos);
    TapIndexed(tracer, "vision.blocks.", i, b.x, {rows, D});
  }
  // merger: mlp(ln_q(x).view(-1, merge² D)) — a merge window's rows are consecutive.
  ops::LayerNorm(ex, b.x, rows, D, w.ln_q_w, w.ln_q_b, 1e-6f, b.ln);
  const int64_t merged = rows / v.merge_rows(), Dm = D * v.merge_rows();
  float* h = b.x;  // x is spent: [merged, Dm] in its place
  ops::MatMul(ex, b.ln, merged, Dm, Dm, w.mlp0_w, &w.mlp0_b, h, Dm);     // mlp.0
  blocks::Activate(ex, blocks::MlpAct::kGeluErf, h, merged * Dm);        // mlp.1: nn.GELU()
  ops::MatMul(ex, h, merged, Dm, Dm, w.mlp2_w, &w.mlp2_b, features, H);  // mlp.2
  Tap(tracer, "vision.merger", features, {merged, H});
}

}  // namespace ocular::qwen2vl

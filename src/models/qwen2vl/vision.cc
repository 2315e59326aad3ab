#include "models/qwen2vl/vision.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "core/check.h"
#include "kernels/ops.h"
#include "models/blocks/encoder_layer.h"
#include "models/blocks/mlp.h"
#include "models/blocks/norm.h"
#include "models/blocks/scratch.h"

namespace ocular::qwen2vl {

namespace {

using blocks::FloatBytes;
using blocks::Scratch;

// Qwen2VLVisionBlock: norm1/norm2 LayerNorm(eps 1e-6), VisionAttention (heads of D / heads,
// scale head_dim^-0.5, q/k/v/proj biases, apply_rotary_pos_emb_vision), VisionMlp
// fc2(quick_gelu(fc1(x))). Qwen2_5_VLVisionBlock: the same attention between Qwen2RMSNorm
// norms (eps 1e-6) and Qwen2_5_VLMLP down(silu(gate(x)) * up(x)) with biases.
blocks::EncoderLayerSpec BlockSpec(const VisionConfig& c, const blocks::RopeSpec& rope) {
  blocks::EncoderLayerSpec s = blocks::VitLayerSpec(c.embed_dim, c.num_heads, c.mlp_dim(),
                                                    blocks::MlpAct::kQuickGelu, 1e-6f);
  if (c.qwen25) {
    s.norm = blocks::NormKind::kLlamaRms;
    s.mlp = {c.embed_dim, c.mlp_dim(), blocks::MlpAct::kSilu, /*gated=*/true};
  }
  s.attn.rope = rope;
  s.attn.rope.f32_rotation = true;  // apply_rotary_pos_emb_vision: q.float(), cos.float()
  return s;
}

blocks::EncoderLayerWeights BlockView(const VisionConfig& c, const VisionBlockWeights& b) {
  blocks::EncoderLayerWeights w = blocks::VitLayerView(
      {&b.norm1_w, &b.norm1_b, &b.norm2_w, &b.norm2_b, &b.q_w, &b.k_w, &b.v_w, &b.proj_w, &b.q_b,
       &b.k_b, &b.v_b, &b.proj_b, &b.fc1_w, &b.fc1_b, &b.fc2_w, &b.fc2_b});
  if (c.qwen25) {
    w.norm1_b = w.norm2_b = nullptr;
    w.mlp = {&b.fc1_w, &b.fc1_b, &b.up_w, &b.fc2_w, &b.fc2_b, &b.up_b};
  }
  return w;
}

struct EncodeBuffers {
  EncodeBuffers(Scratch& s, const Qwen2VLConfig& c, int64_t rows)
      : px(s.Floats(rows * c.vision.patch_floats())),
        x(s.Floats(rows * c.vision.embed_dim)),
        ln(s.Floats(rows * c.vision.embed_dim)),
        pos(s.Take<int64_t>(2 * rows)),
        begin(s.Take<int32_t>(rows)),
        end(s.Take<int32_t>(rows)),
        wbegin(c.qwen25() ? s.Take<int32_t>(rows) : nullptr),
        wend(c.qwen25() ? s.Take<int32_t>(rows) : nullptr),
        windex(c.qwen25() ? s.Take<int32_t>(rows / c.vision.merge_rows()) : nullptr),
        wpos(c.qwen25() ? s.Take<int64_t>(2 * rows) : nullptr),
        merged(c.qwen25() ? s.Floats(rows / c.vision.merge_rows() * c.text.hidden_size) : nullptr) {
  }
  float* px;       // the pixel values in the activation dtype (pixel_values.type(visual.dtype))
  float* x;        // [rows, D]
  float* ln;       // merger.ln_q(x); the window permutation's scratch
  int64_t* pos;    // [2, rows]: patch row, patch column (rot_pos_emb)
  int32_t* begin;  // each row's keys: its image frame's rows (cu_seqlens)
  int32_t* end;
  int32_t* wbegin;  // Qwen2.5-VL: each row's keys in the window layers (cu_window_seqlens)
  int32_t* wend;
  int32_t* windex;  // Qwen2.5-VL: window_index, merge units in window order
  int64_t* wpos;    // the positions in window order
  float* merged;    // Qwen2.5-VL: the merger's output in window order
};

// get_window_index (modeling_qwen2_5_vl.py): the merge units of each image frame by window
// (windows of vws x vws units, row-major; those at the right and bottom edges cut short, empty
// ones skipped as unique_consecutive drops them), each window's units row-major; and each
// row's window as a key range. Returns the units placed.
int64_t WindowIndex(const VisionConfig& c, std::span<const VisionInput> images, int32_t* windex,
                    int32_t* wbegin, int32_t* wend) {
  const int m = c.spatial_merge_size, unit = c.merge_rows(), vws = c.window_merged();
  int64_t placed = 0, first_unit = 0;
  for (const VisionInput& in : images) {
    const int lh = in.grid[1] / m, lw = in.grid[2] / m;
    for (int t = 0; t < in.grid[0]; ++t) {
      for (int wh = 0; wh < (lh + vws - 1) / vws; ++wh) {
        for (int ww = 0; ww < (lw + vws - 1) / vws; ++ww) {
          const int64_t start = placed;
          for (int r = wh * vws; r < std::min(lh, (wh + 1) * vws); ++r) {
            for (int col = ww * vws; col < std::min(lw, (ww + 1) * vws); ++col) {
              windex[placed++] =
                  static_cast<int32_t>(first_unit + (int64_t{t} * lh + r) * lw + col);
            }
          }
          for (int64_t row = start * unit; row < placed * unit; ++row) {
            wbegin[row] = static_cast<int32_t>(start * unit);
            wend[row] = static_cast<int32_t>(placed * unit);
          }
        }
      }
    }
    first_unit += int64_t{in.grid[0]} * lh * lw;
  }
  return placed;
}

// dst[i-th unit] = src[windex[i]-th unit] (hidden_states[window_index, :, :]) for rows of
// `width` values, units of `unit` rows.
template <typename T>
void GatherUnits(const T* src, const int32_t* windex, int64_t units, int64_t unit, int64_t width,
                 T* dst) {
  for (int64_t i = 0; i < units; ++i) {
    std::copy_n(src + int64_t{windex[i]} * unit * width, unit * width, dst + i * unit * width);
  }
}

}  // namespace

size_t TowerBytes(size_t buffers, const blocks::EncoderLayerSpec& block, int64_t K, int64_t Dm,
                  int64_t rows, int threads) {
  return blocks::Nested(buffers,
                        {FloatBytes(ops::MatMulArenaFloats(threads, rows, std::max(K, Dm))),
                         blocks::EncoderLayerBytes(block, rows, /*key_order=*/false, threads)});
}

int64_t PatchRows(std::span<const VisionInput> images, int64_t K, int m) {
  int64_t rows = 0;
  for (const VisionInput& in : images) {
    const int64_t n = int64_t{in.grid[0]} * in.grid[1] * in.grid[2];
    OCULAR_CHECK(in.pixel_count == n * K && in.grid[1] % m == 0 && in.grid[2] % m == 0 &&
                     in.feature_rows * m * m == n,
                 "HINT: images must come from Qwen2VLProcessor::AddImage");
    rows += n;
  }
  return rows;
}

void PatchEmbed(const Exec& ex, const float* pixels, int64_t rows, int64_t K, const Matrix& w,
                const TensorView* bias, float* px, float* x, int64_t D, Tracer* tracer) {
  // hidden_states = self.proj(pixel_values.view(-1, C, tp, p, p).to(proj.weight.dtype)): one
  // row per patch.
  std::copy_n(pixels, rows * K, px);
  ops::CastToActivation(ex, px, rows * K);
  ops::MatMul(ex, px, rows, K, K, w, bias, x, D);
  Tap(tracer, "vision.embeddings", x, {rows, D});
}

size_t EncodeBytes(const Qwen2VLConfig& cfg, int64_t rows, int threads) {
  const VisionConfig& v = cfg.vision;
  return TowerBytes(blocks::BuffersBytes<EncodeBuffers>(cfg, rows), BlockSpec(v, kSizingRope),
                    v.patch_floats(), int64_t{v.embed_dim} * v.merge_rows(), rows, threads);
}

void EncodeImages(const Exec& ex, const Qwen2VLConfig& cfg, const VisionWeights& w,
                  const blocks::RopeSpec& rope, std::span<const VisionInput> images,
                  const float* pixels, float* features, Tracer* tracer) {
  const VisionConfig& v = cfg.vision;
  const int64_t D = v.embed_dim, K = v.patch_floats(), H = cfg.text.hidden_size;
  const int m = v.spatial_merge_size;
  const int64_t rows = PatchRows(images, K, m);
  Scratch scratch(ex.arena);
  EncodeBuffers b(scratch, cfg, rows);
  PatchEmbed(ex, pixels, rows, K, w.patch_w, nullptr, b.px, b.x, D, tracer);
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
  int64_t units = 0;
  if (v.qwen25) {  // rows and positions in window order
    units = WindowIndex(v, images, b.windex, b.wbegin, b.wend);
    OCULAR_CHECK(units * v.merge_rows() == rows);
    GatherUnits(b.x, b.windex, units, v.merge_rows(), D, b.ln);
    std::copy_n(b.ln, rows * D, b.x);
    GatherUnits(b.pos, b.windex, units, v.merge_rows(), 1, b.wpos);
    GatherUnits(b.pos + rows, b.windex, units, v.merge_rows(), 1, b.wpos + rows);
  }
  const blocks::EncoderLayerSpec spec = BlockSpec(v, rope);
  const blocks::Positions pos{v.qwen25 ? b.wpos : b.pos, rows, 2};
  const blocks::EncoderMask full{b.begin, b.end, nullptr};
  const blocks::EncoderMask window{b.wbegin, b.wend, nullptr};
  for (int i = 0; i < v.depth; ++i) {
    // x = x + attn(norm1(x)); x = x + mlp(norm2(x)), over cu_seqlens or cu_window_seqlens
    blocks::EncoderLayer(ex, spec, BlockView(v, w.blocks[i]), b.x, rows,
                         v.full_attention(i) ? full : window, &pos);
    TapIndexed(tracer, "vision.layers.", i, b.x, {rows, D});
  }
  // merger: mlp(ln_q(x).view(-1, merge² D)) — a merge window's rows are consecutive.
  if (v.qwen25) {
    blocks::ApplyNorm(ex, {blocks::NormKind::kLlamaRms, &w.ln_q_w, nullptr, 1e-6f}, b.x, rows, D,
                      b.ln);
  } else {
    ops::LayerNorm(ex, b.x, rows, D, w.ln_q_w, w.ln_q_b, 1e-6f, b.ln);
  }
  const int64_t merged = rows / v.merge_rows(), Dm = D * v.merge_rows();
  float* h = b.x;  // x is spent: [merged, Dm] in its place
  ops::MatMul(ex, b.ln, merged, Dm, Dm, w.mlp0_w, &w.mlp0_b, h, Dm);  // mlp.0
  blocks::Activate(ex, blocks::MlpAct::kGeluErf, h, merged * Dm);     // mlp.1: nn.GELU()
  float* out = v.qwen25 ? b.merged : features;  // window order first (Qwen2.5-VL)
  ops::MatMul(ex, h, merged, Dm, Dm, w.mlp2_w, &w.mlp2_b, out, H);  // mlp.2
  Tap(tracer, "projector", out, {merged, H});
  if (v.qwen25) {
    // hidden_states[argsort(window_index)]: unit i goes back to row window_index[i].
    for (int64_t i = 0; i < units; ++i) {
      std::copy_n(out + i * H, H, features + int64_t{b.windex[i]} * H);
    }
  }
}

}  // namespace ocular::qwen2vl

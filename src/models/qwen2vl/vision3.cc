#include "models/qwen2vl/vision3.h"

#include <algorithm>
#include <array>
#include <span>

#include "core/check.h"
#include "kernels/ops.h"
#include "models/blocks/encoder_layer.h"
#include "models/blocks/mlp.h"
#include "models/blocks/norm.h"
#include "models/blocks/scratch.h"
#include "models/qwen2vl/vision.h"

namespace ocular::qwen2vl {

namespace {

using blocks::FloatBytes;
using blocks::Scratch;

// Qwen3VLVisionBlock: norm1/norm2 LayerNorm(eps 1e-6), Qwen3VLVisionAttention (as Qwen2-VL's:
// fused qkv with bias, proj with bias, apply_rotary_pos_emb_vision in f32), Qwen3VLVisionMLP
// linear_fc2(gelu_tanh(linear_fc1(x))) with biases.
blocks::EncoderLayerSpec BlockSpec(const Vision3Config& c, const blocks::RopeSpec& rope) {
  blocks::EncoderLayerSpec s = blocks::VitLayerSpec(c.hidden_size, c.num_heads, c.intermediate_size,
                                                    blocks::MlpAct::kGeluTanh, 1e-6f);
  s.attn.rope = rope;
  s.attn.rope.f32_rotation = true;  // apply_rotary_pos_emb_vision: q.float(), cos.float()
  return s;
}

blocks::EncoderLayerWeights BlockView(const VisionBlockWeights& b) {
  return blocks::VitLayerView({&b.norm1_w, &b.norm1_b, &b.norm2_w, &b.norm2_b, &b.q_w, &b.k_w,
                               &b.v_w, &b.proj_w, &b.q_b, &b.k_b, &b.v_b, &b.proj_b, &b.fc1_w,
                               &b.fc1_b, &b.fc2_w, &b.fc2_b});
}

struct Encode3Buffers {
  Encode3Buffers(Scratch& s, const Qwen3VLConfig& c, int64_t rows)
      : px(s.Floats(rows * c.vision.patch_floats())),
        x(s.Floats(rows * c.vision.hidden_size)),
        ln(s.Floats(rows * c.vision.hidden_size)),
        h(s.Floats(rows * c.vision.hidden_size)),
        out(s.Floats(rows / c.vision.merge_rows() * c.text.hidden_size)),
        pos(s.Take<int64_t>(2 * rows)),
        idx(s.Take<int32_t>(4 * rows)),
        wt(s.Floats(4 * rows)),
        begin(s.Take<int32_t>(rows)),
        end(s.Take<int32_t>(rows)) {}
  float* px;       // the pixel values in the activation dtype
  float* x;        // [rows, D]
  float* ln;       // a merger's norm; the interpolated position embeddings
  float* h;        // a merger's hidden [rows / merge², Dm]; a corner's weighted table rows
  float* out;      // a merger's output [rows / merge², H]
  int64_t* pos;    // [2, rows]: patch row, patch column (rot_pos_emb)
  int32_t* idx;    // [4, h * w] of one image: the table rows of the 4 corners
  float* wt;       // [4, h * w]: their bilinear weights
  int32_t* begin;  // each row's keys: its image frame's rows (cu_seqlens)
  int32_t* end;
};

// torch.linspace(0, end, steps) in float32 as torch 2.9 computes it on the CPU: a float32 step
// end / (steps - 1); the first half step * i, the second end - step * (steps - 1 - i), each
// formed in double and rounded to float32 once. (Checked against torch.linspace for end < 100
// and steps up to 2047, every value equal; a float32 product and difference are not.)
}  // namespace

float TorchLinspace(float end, int steps, int i) {
  if (steps == 1) return 0.0f;
  const double step = end / static_cast<float>(steps - 1);
  const double at = i < steps / 2 ? step * i : static_cast<double>(end) - step * (steps - 1 - i);
  return static_cast<float>(at);
}

namespace {

// fast_pos_embed_interpolate for one h x w image into pe[h * w, D] (row-major patches):
// the 4 corners' table rows weighted by (1-dh)(1-dw), (1-dh)dw, dh(1-dw), dh·dw (weights in the
// table's dtype), the products and the sum p0 + p1 + p2 + p3 each rounded as torch computes them.
void InterpolatePositions(const Exec& ex, const Vision3Config& c, const Matrix& table, int h, int w,
                          Encode3Buffers& b, float* pe) {
  const int n = c.grid_per_side();
  const int64_t hw = int64_t{h} * w, D = c.hidden_size;
  for (int r = 0; r < h; ++r) {
    const float hi = TorchLinspace(static_cast<float>(n - 1), h, r);
    const int h0 = static_cast<int>(hi), h1 = std::min(h0 + 1, n - 1);  // .int(), clip
    const float dh = hi - static_cast<float>(h0);
    for (int col = 0; col < w; ++col) {
      const float wi = TorchLinspace(static_cast<float>(n - 1), w, col);
      const int w0 = static_cast<int>(wi), w1 = std::min(w0 + 1, n - 1);
      const float dw = wi - static_cast<float>(w0);
      const int64_t p = int64_t{r} * w + col;
      const std::array<int32_t, 4> idx = {h0 * n + w0, h0 * n + w1, h1 * n + w0, h1 * n + w1};
      const std::array<float, 4> wt = {(1.0f - dh) * (1.0f - dw), (1.0f - dh) * dw,
                                       dh * (1.0f - dw), dh * dw};
      for (int k = 0; k < 4; ++k) {
        b.idx[k * hw + p] = idx[k];
        b.wt[k * hw + p] = wt[k];
      }
    }
  }
  ops::CastToActivation(ex, b.wt, 4 * hw);  // torch.tensor(weight_list, dtype=table dtype)
  for (int k = 0; k < 4; ++k) {
    float* dst = k == 0 ? pe : b.h;
    ops::EmbedRows(ex, table, b.idx + k * hw, hw, dst, D);  // pos_embed(idx_tensor)
    for (int64_t p = 0; p < hw; ++p) {
      const float s = b.wt[k * hw + p];
      for (int64_t j = 0; j < D; ++j) dst[p * D + j] *= s;
    }
    ops::CastToActivation(ex, dst, hw * D);
    if (k > 0) ops::Add(ex, pe, b.h, pe, hw * D);  // pos_embeds[0] + [1] + [2] + [3]
  }
}

// x += each image's interpolated table, repeated over its frames and permuted to the patch rows'
// (block row, block column, row, column) order; positions and key ranges as Qwen2-VL's.
void AddPositions(const Exec& ex, const Qwen3VLConfig& cfg, const Matrix& table,
                  std::span<const VisionInput> images, int64_t rows, Encode3Buffers& b) {
  const Vision3Config& v = cfg.vision;
  const int m = v.spatial_merge_size;
  const int64_t D = v.hidden_size;
  int64_t r = 0;
  for (const VisionInput& in : images) {
    const int h = in.grid[1], w = in.grid[2];
    const int64_t frame = int64_t{h} * w;
    InterpolatePositions(ex, v, table, h, w, b, b.ln);
    for (int t = 0; t < in.grid[0]; ++t) {
      const int32_t first = static_cast<int32_t>(r);
      for (int bh = 0; bh < h / m; ++bh) {
        for (int bw = 0; bw < w / m; ++bw) {
          for (int ih = 0; ih < m; ++ih) {
            for (int iw = 0; iw < m; ++iw, ++r) {
              const int64_t row = bh * m + ih, col = bw * m + iw;
              ops::Add(ex, b.x + r * D, b.ln + (row * w + col) * D, b.x + r * D, D);
              b.pos[r] = row;
              b.pos[rows + r] = col;
              b.begin[r] = first;
              b.end[r] = static_cast<int32_t>(first + frame);
            }
          }
        }
      }
    }
  }
  OCULAR_CHECK(r == rows);
}

// Qwen3VLVisionPatchMerger on x[rows, D] into b.out[rows / merge², H], then into `features`
// (row stride ld) at column `column`.
void Merge(const Exec& ex, const Vision3Config& v, const Merger3Weights& w, bool postshuffle,
           int64_t rows, int64_t H, Encode3Buffers& b, float* features, int64_t ld,
           int64_t column) {
  const int64_t D = v.hidden_size, merged = rows / v.merge_rows(), Dm = D * v.merge_rows();
  if (postshuffle) {  // norm(x.view(-1, Dm))
    ops::LayerNorm(ex, b.x, merged, Dm, w.norm_w, w.norm_b, 1e-6f, b.ln);
  } else {  // norm(x).view(-1, Dm)
    ops::LayerNorm(ex, b.x, rows, D, w.norm_w, w.norm_b, 1e-6f, b.ln);
  }
  ops::MatMul(ex, b.ln, merged, Dm, Dm, w.fc1_w, &w.fc1_b, b.h, Dm);  // linear_fc1
  blocks::Activate(ex, blocks::MlpAct::kGeluErf, b.h, merged * Dm);   // nn.GELU()
  ops::MatMul(ex, b.h, merged, Dm, Dm, w.fc2_w, &w.fc2_b, b.out, H);  // linear_fc2
  for (int64_t i = 0; i < merged; ++i) {
    std::copy_n(b.out + i * H, H, features + i * ld + column);
  }
}

}  // namespace

size_t Encode3Bytes(const Qwen3VLConfig& cfg, int64_t rows, int threads) {
  const Vision3Config& v = cfg.vision;
  return TowerBytes(blocks::BuffersBytes<Encode3Buffers>(cfg, rows), BlockSpec(v, kSizingRope),
                    v.patch_floats(), int64_t{v.hidden_size} * v.merge_rows(), rows, threads);
}

void Encode3(const Exec& ex, const Qwen3VLConfig& cfg, const Vision3Weights& w,
             const blocks::RopeSpec& rope, std::span<const VisionInput> images, const float* pixels,
             float* features, Tracer* tracer) {
  const Vision3Config& v = cfg.vision;
  const int64_t D = v.hidden_size, K = v.patch_floats(), H = cfg.text.hidden_size;
  const int64_t W = H * (1 + v.deepstack());  // floats per feature row
  const int64_t rows = PatchRows(images, K, v.spatial_merge_size);
  Scratch scratch(ex.arena);
  Encode3Buffers b(scratch, cfg, rows);
  PatchEmbed(ex, pixels, rows, K, w.patch_w, &w.patch_b, b.px, b.x, D, tracer);
  // hidden_states = hidden_states + fast_pos_embed_interpolate(grid_thw)
  AddPositions(ex, cfg, w.pos_embed, images, rows, b);
  const blocks::EncoderLayerSpec spec = BlockSpec(v, rope);
  const blocks::Positions pos{b.pos, rows, 2};
  const blocks::EncoderMask full{b.begin, b.end, nullptr};
  const int64_t merged = rows / v.merge_rows();
  for (int i = 0; i < v.depth; ++i) {
    blocks::EncoderLayer(ex, spec, BlockView(w.blocks[i]), b.x, rows, full, &pos);
    TapIndexed(tracer, "vision.layers.", i, b.x, {rows, D});
    for (int k = 0; k < v.deepstack(); ++k) {
      if (v.deepstack_visual_indexes[k] != i) continue;
      Merge(ex, v, w.deepstack[k], /*postshuffle=*/true, rows, H, b, features, W, H * (1 + k));
      TapIndexed(tracer, "vision.deepstack.", k, b.out, {merged, H});
    }
  }
  Merge(ex, v, w.merger, /*postshuffle=*/false, rows, H, b, features, W, 0);
  Tap(tracer, "projector", b.out, {merged, H});
}

}  // namespace ocular::qwen2vl

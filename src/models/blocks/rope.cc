#include "models/blocks/rope.h"

#include <cmath>

#include "core/check.h"
#include "kernels/ops.h"

namespace ocular::blocks {

std::vector<float> RopeInvFreq(int64_t head_dim, float theta, const Llama3RopeScaling& s) {
  const int64_t d = head_dim, half = d / 2;
  std::vector<float> inv(half);
  for (int64_t k = 0; k < half; ++k) {
    // 1.0 / (base ** (arange(0, dim, 2).float() / dim))   (_compute_default_rope_parameters)
    const float e = static_cast<float>(2 * k) / static_cast<float>(d);
    inv[k] = 1.0f / std::pow(theta, e);
  }
  if (s.factor <= 0) return inv;
  // _compute_llama3_parameters, element by element in f32.
  const float factor = s.factor, lo = s.low_freq_factor, hi = s.high_freq_factor;
  const float old_len = static_cast<float>(s.original_max_position_embeddings);
  const float low_wavelen = static_cast<float>(s.original_max_position_embeddings / double{lo});
  const float high_wavelen = static_cast<float>(s.original_max_position_embeddings / double{hi});
  const float two_pi = static_cast<float>(2 * M_PI);
  for (float& f : inv) {
    const float wavelen = two_pi / f;                            // 2π / inv_freq
    const float llama = wavelen > low_wavelen ? f / factor : f;  // low freqs / factor
    const float smooth = (old_len / wavelen - lo) / static_cast<float>(double{hi} - double{lo});
    const float smoothed = (1 - smooth) * llama / factor + smooth * llama;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    f = medium ? smoothed : llama;
  }
  return inv;
}

AxesRope MultimodalRope(int64_t head_dim, float theta, std::span<const int> mrope_section) {
  AxesRope out;
  out.inv_freq = RopeInvFreq(head_dim, theta, {});
  out.axes = static_cast<int>(mrope_section.size());
  for (size_t a = 0; a < mrope_section.size(); ++a) {
    out.axis_of.insert(out.axis_of.end(), mrope_section[a], static_cast<uint8_t>(a));
  }
  OCULAR_CHECK(static_cast<int64_t>(out.axis_of.size()) == head_dim / 2,
               "HINT: mrope_section must sum to head_dim / 2");
  return out;
}

AxesRope VisionRope2d(int64_t head_dim, float theta) {
  OCULAR_CHECK(head_dim % 4 == 0, "HINT: the 2-D rotary needs head_dim % 4 == 0");
  // rotary_pos_emb = cat(freqs[h], freqs[w]) over VisionRotaryEmbedding(head_dim / 2).
  const std::vector<float> base = RopeInvFreq(head_dim / 2, theta, {});
  AxesRope out;
  out.axes = 2;
  for (int a = 0; a < 2; ++a) {
    out.inv_freq.insert(out.inv_freq.end(), base.begin(), base.end());
    out.axis_of.insert(out.axis_of.end(), base.size(), static_cast<uint8_t>(a));
  }
  return out;
}

void ApplyRope(const Exec& ex, const RopeSpec& r, const Positions& p, float* x, int64_t rows,
               int64_t heads, int64_t head_dim, int64_t ld) {
  OCULAR_CHECK(p.axes == r.axes && p.rows == rows, "HINT: positions of another RoPE");
  if (r.axes > 1) {
    OCULAR_CHECK(r.inv_freq != nullptr && r.axis_of != nullptr);
    ops::RopeAxes(ex, x, rows, heads, head_dim, ld, p.pos, r.inv_freq, r.axis_of, r.f32_rotation);
  } else if (r.inv_freq != nullptr) {
    ops::Rope(ex, x, rows, heads, head_dim, ld, p.pos, r.inv_freq);
  } else {
    ops::Rope(ex, x, rows, heads, head_dim, ld, p.pos, r.theta, r.divisor);
  }
}

}  // namespace ocular::blocks

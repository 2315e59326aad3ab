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

void ApplyRope(const Exec& ex, const RopeSpec& r, const Positions& p, float* x, int64_t rows,
               int64_t heads, int64_t head_dim, int64_t ld) {
  OCULAR_CHECK(p.axes == 1 && p.rows == rows, "HINT: multi-axis RoPE is not implemented");
  if (r.inv_freq != nullptr) {
    ops::Rope(ex, x, rows, heads, head_dim, ld, p.pos, r.inv_freq);
  } else {
    ops::Rope(ex, x, rows, heads, head_dim, ld, p.pos, r.theta, r.divisor);
  }
}

}  // namespace ocular::blocks

// The typed multimodal prompt: what a family's Processor makes of a request (text and images)
// and what the runtime carries to the family's VlModel without looking inside.
//
//   Prompt
//   ├─ ids          token ids, image tokens included
//   ├─ positions    RoPE positions: 1-D (0..T-1 unless given) or multi-axis (M-RoPE: [3, T]),
//   │               and the offset of the positions a decode step continues with
//   ├─ bidirectional  spans of prompt positions that attend to each other in both directions
//   │               (PaliGemma's image + prompt prefix, Gemma 3's image runs); every other row is
//   │               causal. Cross-attention (mllama) reads the images' features, not token rows:
//   │               which rows see which image is the family's (from ids and images).
//   └─ images       per image the model encodes (a pan-and-scan crop is one too): where its pixel
//                   values are in `pixels`, its grid, the feature rows its encode yields (variable
//                   per image) and the prompt tokens that stand for it.
//
// The runtime uses only the sizes: pixels to encode, images[i].feature_rows × feature_width
// floats of features per image (ModelSpec::feature_width), ids.size() rows to prefill.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace ocular {

// RoPE positions of a prompt's rows. axes == 1 with `ids` empty: row t has position t (every
// family today). Multi-axis (Qwen2-VL's M-RoPE, get_rope_index): ids holds axes × T positions,
// axis-major (ids[a * T + t]); a decode step at cache index i has position i + decode_offset on
// every axis (HF's rope_deltas).
struct Positions {
  int axes = 1;
  std::vector<int32_t> ids;   // [axes, T] axis-major, or empty (0..T-1)
  int64_t decode_offset = 0;  // position of cache index i >= T: i + decode_offset
  // Position of row t (a prompt row, or a decode step's cache index) on `axis`.
  int64_t At(int axis, int64_t t, int64_t prompt_len) const {
    if (t >= prompt_len) return t + decode_offset;
    if (ids.empty()) return t;
    return ids[static_cast<size_t>(axis * prompt_len + t)];
  }
};

// Prompt positions [begin, end) that attend bidirectionally among themselves.
struct TokenSpan {
  int64_t begin = 0, end = 0;
};

// One image as the vision encoder takes it.
struct VisionInput {
  int64_t pixel_offset = 0;  // its pixel values: Prompt::pixels[pixel_offset, + pixel_count)
  int64_t pixel_count = 0;   // in the family's layout ([3, R, R]; mllama [max_tiles, 3, t, t])
  // Its grid in the family's units: {1, 1, 1} for one fixed-size crop; mllama {1, tiles high,
  // tiles wide} (the aspect ratio id is its index); Qwen2-VL {t, h, w} in patches (image_grid_thw).
  std::array<int32_t, 3> grid = {1, 1, 1};
  int64_t feature_rows = 0;  // rows EncodeImages writes for it (ModelSpec::feature_width wide)
  int64_t tokens = 0;        // prompt ids that stand for it (PaliGemma 256; mllama 1)
  int32_t source = 0;        // index of the request's image it comes from (a crop shares it)
};

struct Prompt {
  std::vector<int32_t> ids;
  Positions positions;
  std::vector<TokenSpan> bidirectional;
  std::vector<VisionInput> images;
  std::vector<float> pixels;  // every image's pixel values, image after image

  int64_t size() const { return static_cast<int64_t>(ids.size()); }
  // End of a bidirectional span that starts the prompt (a prefix-LM block), else 0.
  int64_t prefix_len() const {
    return !bidirectional.empty() && bidirectional[0].begin == 0 ? bidirectional[0].end : 0;
  }
  const float* image_pixels(size_t i) const { return pixels.data() + images[i].pixel_offset; }
  // Feature rows of images [begin, end).
  int64_t FeatureRows(size_t begin, size_t end) const {
    int64_t rows = 0;
    for (size_t i = begin; i < end; ++i) rows += images[i].feature_rows;
    return rows;
  }
  int64_t feature_rows() const { return FeatureRows(0, images.size()); }

  // Appends one image: its pixel values and what the family says of it (offsets are set here).
  void AddImage(const float* values, int64_t count, VisionInput input) {
    input.pixel_offset = static_cast<int64_t>(pixels.size());
    input.pixel_count = count;
    pixels.insert(pixels.end(), values, values + count);
    images.push_back(input);
  }
};

// A prompt of `ids` whose positions [0, prefix_len) form one bidirectional block (0: causal).
inline Prompt TextPrompt(std::vector<int32_t> ids, int64_t prefix_len = 0) {
  Prompt p;
  p.ids = std::move(ids);
  if (prefix_len > 0) p.bidirectional.push_back({0, prefix_len});
  return p;
}

}  // namespace ocular

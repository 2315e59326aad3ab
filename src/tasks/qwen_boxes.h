// Grounding answers of Qwen2.5-VL and Qwen3-VL: a JSON list of objects
//   [{"bbox_2d": [x1, y1, x2, y2], "label": "cat"}, ...]
// usually inside a ```json fence, in a frame the model saw (docs/models.md §12):
//   Qwen2.5-VL: pixels of the image as the processor resized it (smart_resize: grid * patch),
//               QwenLM/Qwen2.5-VL cookbooks/spatial_understanding.ipynb (input_width =
//               image_grid_thw[2] * 14, abs_x = x / input_width * width)
//   Qwen3-VL:   a 0-1000 grid over the image, QwenLM/Qwen3-VL cookbooks/spatial_understanding.ipynb
//               (abs_x = x / 1000 * width)
// ParseQwenBoxes maps them to the ORIGINAL image's pixels: x * image_w / frame_w.
#pragma once

#include <string_view>
#include <vector>

#include "ocular/detection.h"

namespace ocular {

// Boxes of `text` in image_w x image_h pixels from coordinates in a frame_w x frame_h frame
// (1000 x 1000 for Qwen3-VL). Tolerant, never failing: a ```json fence (closed or not) is
// unwrapped; a list, a single object, or an object holding a list of objects is read; when the
// JSON is cut short or malformed, every complete {...} object in it is still read. An object
// without a bbox_2d of 4 finite numbers is skipped; a missing or non-string label is empty.
// Corners are ordered (x0 <= x1, y0 <= y1) and clamped to the image. Empty when frame or image
// sizes are not positive.
std::vector<Detection> ParseQwenBoxes(std::string_view text, double frame_w, double frame_h,
                                      int image_w, int image_h);

}  // namespace ocular

// libFuzzer target: ParseDetections on arbitrary decoded text (loc/seg tokens, labels,
// separators) for an image size taken from the first 4 bytes; boxes must be finite, and
// FormatDetections must accept whatever was parsed. Seeds: written by scripts/fuzz.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ocular/detection.h"
#include "tasks/detection.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const int w = 1 + (data[0] | (data[1] << 8));  // 1..65536
  const int h = 1 + (data[2] | (data[3] << 8));
  const std::string_view text(reinterpret_cast<const char*>(data + 4), size - 4);
  const std::vector<ocular::Detection> boxes = ocular::ParseDetections(text, w, h);
  for (const ocular::Detection& d : boxes) {
    for (float v : {d.x0, d.y0, d.x1, d.y1}) {
      if (!std::isfinite(v)) std::abort();
    }
    // The header's contract: corners ordered and inside the original image.
    if (d.x0 < 0 || d.x0 > d.x1 || d.x1 > w || d.y0 < 0 || d.y0 > d.y1 || d.y1 > h) std::abort();
  }
  (void)ocular::FormatDetections(boxes, w, h);
  (void)ocular::DetectionsJson(boxes);
  return 0;
}

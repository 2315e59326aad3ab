#include "tasks/detection.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <vector>

namespace ocular {
namespace {

constexpr int kLocCount = 1024;
constexpr int kSegPerObject = 16;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// If text[pos..] starts with "<" prefix + exactly `digits` decimal digits + ">",
// returns the value and advances pos past it.
std::optional<int> ReadToken(std::string_view text, size_t* pos, std::string_view prefix,
                             int digits) {
  size_t p = *pos;
  if (p >= text.size() || text[p] != '<') return std::nullopt;
  ++p;
  if (text.substr(p, prefix.size()) != prefix) return std::nullopt;
  p += prefix.size();
  int value = 0;
  for (int i = 0; i < digits; ++i, ++p) {
    if (p >= text.size() || text[p] < '0' || text[p] > '9') return std::nullopt;
    value = value * 10 + (text[p] - '0');
  }
  if (p >= text.size() || text[p] != '>') return std::nullopt;
  *pos = p + 1;
  return value;
}

std::optional<int> ReadLoc(std::string_view text, size_t* pos) {
  size_t p = *pos;
  std::optional<int> v = ReadToken(text, &p, "loc", 4);
  if (!v || *v >= kLocCount) return std::nullopt;
  *pos = p;
  return v;
}

void SkipSpaces(std::string_view text, size_t* pos) {
  while (*pos < text.size() && IsSpace(text[*pos])) ++*pos;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<Detection> ParseDetections(std::string_view text, int image_w, int image_h) {
  const float w = image_w > 0 ? static_cast<float>(image_w) : 1.0f;
  const float h = image_h > 0 ? static_cast<float>(image_h) : 1.0f;
  std::vector<Detection> out;
  size_t pos = 0;
  while (pos < text.size()) {
    // Like the reference regex's leading (.*?): skip anything until 4 locs in a row.
    size_t p = pos;
    int locs[4];
    int n = 0;
    while (n < 4) {
      std::optional<int> v = ReadLoc(text, &p);
      if (!v) break;
      locs[n++] = *v;
    }
    if (n < 4) {
      pos = (p == pos) ? pos + 1 : p;  // drop a short loc run, keep scanning
      continue;
    }
    SkipSpaces(text, &p);
    // Optional 16 segmentation codes, kept for the mask decoder (tasks/mask_decoder.h).
    size_t q = p;
    std::vector<int> seg;
    while (static_cast<int>(seg.size()) < kSegPerObject) {
      std::optional<int> v = ReadToken(text, &q, "seg", 3);
      if (!v) break;
      seg.push_back(*v);
    }
    if (static_cast<int>(seg.size()) == kSegPerObject) {
      p = q;
    } else {
      seg.clear();
    }
    // Label: up to the next ';' or '<' (a following object or special token).
    size_t end = p;
    while (end < text.size() && text[end] != ';' && text[end] != '<') ++end;
    Detection d;
    d.label = std::string(Trim(text.substr(p, end - p)));
    d.loc = {locs[0], locs[1], locs[2], locs[3]};
    d.seg = std::move(seg);
    const float y0 = locs[0] / 1023.0f * h, x0 = locs[1] / 1023.0f * w;
    const float y1 = locs[2] / 1023.0f * h, x1 = locs[3] / 1023.0f * w;
    d.x0 = std::min(x0, x1);
    d.x1 = std::max(x0, x1);
    d.y0 = std::min(y0, y1);
    d.y1 = std::max(y0, y1);
    out.push_back(std::move(d));
    pos = (end < text.size() && text[end] == ';') ? end + 1 : end;
  }
  return out;
}

bool HasSegCodes(const std::vector<Detection>& detections) {
  return std::any_of(detections.begin(), detections.end(),
                     [](const Detection& d) { return !d.seg.empty(); });
}

int64_t InstanceMask::area() const {
  int64_t n = 0;
  for (uint8_t b : bits) n += b != 0;
  return n;
}

std::vector<int64_t> MaskToCocoRle(const InstanceMask& m) {
  // Runs alternate 0, 1, 0, ...: appending a value equal to the current run's extends it.
  std::vector<int64_t> counts = {0};
  auto append = [&counts](int value, int64_t n) {
    if (n <= 0) return;
    const int current = static_cast<int>((counts.size() - 1) % 2);
    if (current == value) {
      counts.back() += n;
    } else {
      counts.push_back(n);
    }
  };
  const int W = std::max(m.image_width, 0), H = std::max(m.image_height, 0);
  // The mask box clipped to the image (a valid mask lies inside it; this keeps bad input safe).
  const int bx0 = std::clamp(m.x0, 0, W), bx1 = std::clamp(m.x0 + m.width, 0, W);
  const int by0 = std::clamp(m.y0, 0, H), by1 = std::clamp(m.y0 + m.height, 0, H);
  const bool has_bits = m.bits.size() == static_cast<size_t>(m.width) * m.height;
  for (int x = 0; x < W; ++x) {  // column-major: x outer, y inner
    if (x < bx0 || x >= bx1 || !has_bits) {
      append(0, H);
      continue;
    }
    append(0, by0);
    for (int y = by0; y < by1; ++y) {
      append(m.bits[static_cast<size_t>(y - m.y0) * m.width + (x - m.x0)] != 0 ? 1 : 0, 1);
    }
    append(0, H - by1);
  }
  return counts;
}

StatusOr<InstanceMask> MaskFromCocoRle(const std::vector<int64_t>& counts, int image_w,
                                       int image_h) {
  if (image_w <= 0 || image_h <= 0) {
    return Error(StatusCode::kDataLoss, "mask", "image size ", image_w, "x", image_h,
                 " is not positive");
  }
  const int64_t total = int64_t{image_w} * image_h;
  int64_t sum = 0;
  for (int64_t c : counts) {
    if (c < 0 || c > total - sum) {
      return Error(StatusCode::kDataLoss, "mask", "RLE counts are negative or exceed the ", image_w,
                   "x", image_h, " image");
    }
    sum += c;
  }
  if (sum != total) {
    return Error(StatusCode::kDataLoss, "mask", "RLE counts sum to ", sum, ", the ", image_w, "x",
                 image_h, " image has ", total, " pixels");
  }
  InstanceMask m;
  m.image_width = m.width = image_w;
  m.image_height = m.height = image_h;
  m.bits.assign(static_cast<size_t>(total), 0);
  int64_t i = 0;  // column-major pixel index
  for (size_t r = 0; r < counts.size(); ++r) {
    for (int64_t k = 0; k < counts[r]; ++k, ++i) {
      if (r % 2 == 1) m.bits[static_cast<size_t>((i % image_h) * image_w + i / image_h)] = 1;
    }
  }
  return m;
}

std::string FormatDetections(const std::vector<Detection>& detections, int image_w, int image_h) {
  const float w = image_w > 0 ? static_cast<float>(image_w) : 1.0f;
  const float h = image_h > 0 ? static_cast<float>(image_h) : 1.0f;
  auto loc = [](float v) {
    const int i = std::clamp(static_cast<int>(std::lround(v * 1023.0f)), 0, 1023);
    char buf[16];
    std::snprintf(buf, sizeof(buf), "<loc%04d>", i);
    return std::string(buf);
  };
  std::string out;
  for (size_t i = 0; i < detections.size(); ++i) {
    const Detection& d = detections[i];
    if (i > 0) out += " ; ";
    out += loc(d.y0 / h) + loc(d.x0 / w) + loc(d.y1 / h) + loc(d.x1 / w);
    if (!d.label.empty()) out += " " + d.label;
  }
  return out;
}

}  // namespace ocular

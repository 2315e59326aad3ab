#include "tasks/detection.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <optional>

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
    // Optional 16 segmentation codes (ignored here; masks are decoded elsewhere).
    size_t q = p;
    int segs = 0;
    while (segs < kSegPerObject && ReadToken(text, &q, "seg", 3)) ++segs;
    if (segs == kSegPerObject) p = q;
    // Label: up to the next ';' or '<' (a following object or special token).
    size_t end = p;
    while (end < text.size() && text[end] != ';' && text[end] != '<') ++end;
    Detection d;
    d.label = std::string(Trim(text.substr(p, end - p)));
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

#include "tasks/draw.h"

#include <ft2build.h>
#include FT_FREETYPE_H

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace ocular {
namespace {

// Tableau-10-like palette: distinct hues, all dark or saturated enough to read
// white text on.
constexpr Rgb kPalette[] = {{31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                            {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127},
                            {188, 189, 34},  {23, 190, 207}};

// Decodes one UTF-8 code point at s[*i]; returns -1 (and skips a byte) if invalid.
int32_t NextCodePoint(std::string_view s, size_t* i) {
  const auto c = static_cast<unsigned char>(s[*i]);
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || *i + len > s.size()) {
    ++*i;
    return -1;
  }
  int32_t cp = len == 1 ? c : c & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[*i + k]);
    if ((cc >> 6) != 2) {
      ++*i;
      return -1;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  *i += len;
  return cp;
}

bool Luminous(Rgb c) { return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b > 150; }

}  // namespace

Rgb PaletteColor(int index) {
  constexpr int n = sizeof(kPalette) / sizeof(kPalette[0]);
  return kPalette[((index % n) + n) % n];
}

struct Font::Impl {
  FT_Library library = nullptr;
  FT_Face face = nullptr;
};

StatusOr<std::unique_ptr<Font>> Font::Load(const std::string& path, int pixel_height) {
  if (pixel_height <= 0 || pixel_height > 512) {
    return Error(StatusCode::kInvalidArgument, "font", "pixel height ", pixel_height,
                 " outside 1..512");
  }
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
  } else {
    return Error(StatusCode::kNotFound, "font", path, ": cannot open");
  }
  std::unique_ptr<Font> font(new Font());
  font->impl_ = new Impl();
  if (FT_Init_FreeType(&font->impl_->library) != 0) {
    return Error(StatusCode::kInternal, "font", "FreeType initialisation failed");
  }
  if (FT_New_Face(font->impl_->library, path.c_str(), 0, &font->impl_->face) != 0) {
    return Error(StatusCode::kDataLoss, "font", path, ": not a font FreeType can read");
  }
  if (FT_Set_Pixel_Sizes(font->impl_->face, 0, pixel_height) != 0) {
    return Error(StatusCode::kUnimplemented, "font", path, ": cannot scale to ", pixel_height,
                 " px");
  }
  font->pixel_height_ = pixel_height;
  font->ascender_ = static_cast<int>(font->impl_->face->size->metrics.ascender >> 6);
  return font;
}

Font::~Font() {
  if (impl_ == nullptr) return;
  if (impl_->face) FT_Done_Face(impl_->face);
  if (impl_->library) FT_Done_FreeType(impl_->library);
  delete impl_;
}

int Font::MeasureWidth(std::string_view utf8) {
  int width = 0;
  for (size_t i = 0; i < utf8.size();) {
    const int32_t cp = NextCodePoint(utf8, &i);
    if (cp < 0) continue;
    if (FT_Load_Char(impl_->face, static_cast<FT_ULong>(cp), FT_LOAD_DEFAULT) != 0) continue;
    width += static_cast<int>(impl_->face->glyph->advance.x >> 6);
  }
  return width;
}

void Font::DrawText(uint8_t* rgb, int width, int height, int x, int y, std::string_view utf8,
                    Rgb color) {
  int pen_x = x;
  const int baseline = y + ascender_;
  for (size_t i = 0; i < utf8.size();) {
    const int32_t cp = NextCodePoint(utf8, &i);
    if (cp < 0) continue;
    if (FT_Load_Char(impl_->face, static_cast<FT_ULong>(cp), FT_LOAD_RENDER) != 0) continue;
    const FT_GlyphSlot g = impl_->face->glyph;
    const FT_Bitmap& bm = g->bitmap;
    if (bm.pixel_mode == FT_PIXEL_MODE_GRAY) {
      for (unsigned row = 0; row < bm.rows; ++row) {
        const int py = baseline - g->bitmap_top + static_cast<int>(row);
        if (py < 0 || py >= height) continue;
        for (unsigned col = 0; col < bm.width; ++col) {
          const int px = pen_x + g->bitmap_left + static_cast<int>(col);
          if (px < 0 || px >= width) continue;
          const int a = bm.buffer[row * bm.pitch + col];
          if (a == 0) continue;
          uint8_t* p = rgb + (static_cast<size_t>(py) * width + px) * 3;
          p[0] = static_cast<uint8_t>((color.r * a + p[0] * (255 - a) + 127) / 255);
          p[1] = static_cast<uint8_t>((color.g * a + p[1] * (255 - a) + 127) / 255);
          p[2] = static_cast<uint8_t>((color.b * a + p[2] * (255 - a) + 127) / 255);
        }
      }
    }
    pen_x += static_cast<int>(g->advance.x >> 6);
  }
}

void FillRect(uint8_t* rgb, int width, int height, int x0, int y0, int x1, int y1, Rgb color) {
  x0 = std::max(x0, 0);
  y0 = std::max(y0, 0);
  x1 = std::min(x1, width);
  y1 = std::min(y1, height);
  for (int y = y0; y < y1; ++y) {
    uint8_t* p = rgb + (static_cast<size_t>(y) * width + x0) * 3;
    for (int x = x0; x < x1; ++x, p += 3) {
      p[0] = color.r;
      p[1] = color.g;
      p[2] = color.b;
    }
  }
}

void PaintMask(uint8_t* rgb, int width, int height, const InstanceMask& mask, Rgb color,
               float alpha) {
  if (mask.bits.size() != static_cast<size_t>(mask.width) * mask.height) return;
  const int a = static_cast<int>(std::lround(std::clamp(alpha, 0.0f, 1.0f) * 256.0f));
  const int x0 = std::max(mask.x0, 0), x1 = std::min(mask.x0 + mask.width, width);
  const int y0 = std::max(mask.y0, 0), y1 = std::min(mask.y0 + mask.height, height);
  for (int y = y0; y < y1; ++y) {
    const uint8_t* m = &mask.bits[static_cast<size_t>(y - mask.y0) * mask.width];
    uint8_t* p = rgb + (static_cast<size_t>(y) * width + x0) * 3;
    for (int x = x0; x < x1; ++x, p += 3) {
      if (m[x - mask.x0] == 0) continue;
      p[0] = static_cast<uint8_t>((color.r * a + p[0] * (256 - a) + 128) >> 8);
      p[1] = static_cast<uint8_t>((color.g * a + p[1] * (256 - a) + 128) >> 8);
      p[2] = static_cast<uint8_t>((color.b * a + p[2] * (256 - a) + 128) >> 8);
    }
  }
}

void DrawDetections(uint8_t* rgb, int width, int height, const std::vector<Detection>& detections,
                    const DrawOptions& options) {
  if (rgb == nullptr || width <= 0 || height <= 0) return;
  const int t =
      options.thickness > 0 ? options.thickness : (std::min(width, height) >= 400 ? 3 : 2);
  std::map<std::string, int> label_index;
  for (const Detection& d : detections) {
    if (!(std::isfinite(d.x0) && std::isfinite(d.y0) && std::isfinite(d.x1) &&
          std::isfinite(d.y1))) {
      continue;
    }
    // Integer pixel edges, clamped well outside the image so huge values cannot overflow.
    auto clamp_edge = [](float v, int size) {
      return static_cast<int>(std::lround(std::clamp(v, -4.0f * size, 5.0f * size)));
    };
    const int x0 = clamp_edge(std::min(d.x0, d.x1), width);
    const int x1 = clamp_edge(std::max(d.x0, d.x1), width);
    const int y0 = clamp_edge(std::min(d.y0, d.y1), height);
    const int y1 = clamp_edge(std::max(d.y0, d.y1), height);
    if (x1 <= 0 || y1 <= 0 || x0 >= width || y0 >= height) continue;
    const auto [it, inserted] = label_index.emplace(d.label, static_cast<int>(label_index.size()));
    const Rgb color = PaletteColor(it->second);
    if (d.mask) PaintMask(rgb, width, height, *d.mask, color, options.mask_alpha);
    // The outline lies inside the box: [x0, x0+t) etc. (at least 1 px wide boxes).
    const int bx1 = std::max(x1, x0 + 1), by1 = std::max(y1, y0 + 1);
    FillRect(rgb, width, height, x0, y0, bx1, std::min(y0 + t, by1), color);
    FillRect(rgb, width, height, x0, std::max(by1 - t, y0), bx1, by1, color);
    FillRect(rgb, width, height, x0, y0, std::min(x0 + t, bx1), by1, color);
    FillRect(rgb, width, height, std::max(bx1 - t, x0), y0, bx1, by1, color);
    if (d.label.empty()) continue;
    // Label: a filled strip above the box (inside its top edge if no room), text in
    // white or black for contrast.
    const int text_h = options.font ? options.font->pixel_height() : 10;
    const int pad = 2;
    const int strip_h = text_h + 2 * pad;
    const int text_w = options.font ? options.font->MeasureWidth(d.label)
                                    : static_cast<int>(d.label.size()) * text_h / 2;
    const int sx0 = std::clamp(x0, 0, std::max(0, width - (text_w + 2 * pad)));
    const int sy0 = y0 - strip_h >= 0 ? y0 - strip_h : std::max(0, y0);
    FillRect(rgb, width, height, sx0, sy0, sx0 + text_w + 2 * pad, sy0 + strip_h, color);
    if (options.font) {
      const Rgb ink = Luminous(color) ? Rgb{0, 0, 0} : Rgb{255, 255, 255};
      options.font->DrawText(rgb, width, height, sx0 + pad, sy0 + pad - 1, d.label, ink);
    }
  }
}

}  // namespace ocular

// Draws detection boxes and their labels onto an interleaved 8-bit RGB buffer.
//
// Text is rendered with FreeType from a TrueType font (default: Debian's
// fonts-dejavu-core DejaVuSans.ttf). A missing or unreadable font is not an error
// for drawing: boxes and label backgrounds are still drawn, just without glyphs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ocular/status.h"
#include "tasks/detection.h"

namespace ocular {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

// The colour of the i-th distinct label (cycles through a 10-colour palette).
Rgb PaletteColor(int index);

// A TrueType font at one pixel size. Thread-compatible (not thread-safe).
class Font {
 public:
  static constexpr const char* kDefaultPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

  // kNotFound / kDataLoss when the file is missing or not a font.
  static StatusOr<std::unique_ptr<Font>> Load(const std::string& path, int pixel_height);
  ~Font();
  Font(const Font&) = delete;
  Font& operator=(const Font&) = delete;

  int pixel_height() const { return pixel_height_; }
  int ascender() const { return ascender_; }  // pixels above the baseline
  // Width in pixels of the rendered UTF-8 text (advance sum; invalid bytes skipped).
  int MeasureWidth(std::string_view utf8);
  // Blends the text in `color` with its top-left corner at (x, y); clips to the image.
  void DrawText(uint8_t* rgb, int width, int height, int x, int y, std::string_view utf8,
                Rgb color);

 private:
  Font() = default;
  struct Impl;
  Impl* impl_ = nullptr;
  int pixel_height_ = 0;
  int ascender_ = 0;
};

struct DrawOptions {
  int thickness = 0;         // outline width in pixels; 0 = 2 or 3 by image size
  Font* font = nullptr;      // nullptr: labels get their background strip but no text
  float mask_alpha = 0.45f;  // opacity of the mask colour over the image
};

// REQUIRES: rgb holds width*height*3 bytes (row-major RGB). Boxes are clipped to the
// image; boxes entirely outside are skipped; NaN coordinates are skipped.
// Each distinct label gets its own palette colour, in order of first appearance; a detection's
// mask is painted in that colour (translucent, under its box and label).
void DrawDetections(uint8_t* rgb, int width, int height, const std::vector<Detection>& detections,
                    const DrawOptions& options);

// Blends `color` at opacity `alpha` (0..1) over the pixels of `mask` (clipped to the image);
// an inconsistent mask (bits not width × height) paints nothing.
void PaintMask(uint8_t* rgb, int width, int height, const InstanceMask& mask, Rgb color,
               float alpha);

// Fills the rectangle [x0, x1) × [y0, y1) clipped to the image.
void FillRect(uint8_t* rgb, int width, int height, int x0, int y0, int x1, int y1, Rgb color);

}  // namespace ocular

#include "tasks/draw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ocular {
namespace {

struct Canvas {
  int w, h;
  std::vector<uint8_t> rgb;
  Canvas(int w_, int h_, uint8_t fill = 200) : w(w_), h(h_), rgb(size_t(w_) * h_ * 3, fill) {}
  Rgb at(int x, int y) const {
    const uint8_t* p = &rgb[(size_t(y) * w + x) * 3];
    return {p[0], p[1], p[2]};
  }
  void Draw(const std::vector<Detection>& detections, const DrawOptions& options) {
    DrawDetections(rgb.data(), w, h, detections, options);
  }
};

TEST(DrawDetections, OutlineHasTheLabelColourAndInteriorIsUntouched) {
  Canvas c(100, 80);
  c.Draw({{20, 30, 60, 70, ""}}, {.thickness = 2});
  const Rgb color = PaletteColor(0);
  EXPECT_EQ(c.at(20, 50), color);  // left edge
  EXPECT_EQ(c.at(21, 50), color);
  EXPECT_EQ(c.at(59, 50), color);                 // right edge (x1 exclusive)
  EXPECT_EQ(c.at(40, 30), color);                 // top
  EXPECT_EQ(c.at(40, 69), color);                 // bottom
  EXPECT_EQ(c.at(40, 50), (Rgb{200, 200, 200}));  // interior
  EXPECT_EQ(c.at(22, 50), (Rgb{200, 200, 200}));  // just inside the 2 px outline
  EXPECT_EQ(c.at(19, 50), (Rgb{200, 200, 200}));  // just outside
}

TEST(DrawDetections, DistinctLabelsGetDistinctColours) {
  Canvas c(100, 100);
  c.Draw({{5, 40, 30, 60, ""}, {50, 40, 90, 60, ""}, {5, 70, 30, 95, ""}}, {.thickness = 2});
  EXPECT_EQ(c.at(5, 50), PaletteColor(0));
  EXPECT_EQ(c.at(50, 50), PaletteColor(0));  // same (empty) label, same colour
  Canvas d(100, 100);
  DrawDetections(d.rgb.data(), d.w, d.h, {{5, 40, 30, 60, "a"}, {50, 40, 90, 60, "b"}},
                 {.thickness = 2});
  EXPECT_EQ(d.at(5, 50), PaletteColor(0));
  EXPECT_EQ(d.at(50, 50), PaletteColor(1));
  EXPECT_NE(PaletteColor(0), PaletteColor(1));
}

TEST(DrawDetections, ClipsAtBordersAndSkipsOutsideOrNan) {
  Canvas c(50, 40);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  c.Draw({{-20, -10, 30, 25, ""},       // crosses top-left corner
          {40, 30, 1e9f, 1e9f, ""},     // runs off bottom-right, huge values
          {60, 50, 90, 80, "outside"},  // fully outside: skipped
          {nan, 0, 10, 10, "nan"}},
         {.thickness = 2});
  EXPECT_EQ(c.at(28, 10), PaletteColor(0));       // right edge of the first box
  EXPECT_EQ(c.at(10, 23), PaletteColor(0));       // bottom edge of the first box
  EXPECT_EQ(c.at(40, 35), PaletteColor(0));       // left edge of the second box
  EXPECT_EQ(c.at(45, 30), PaletteColor(0));       // top edge of the second box
  EXPECT_EQ(c.at(49, 39), (Rgb{200, 200, 200}));  // its clipped-away far corner
}

TEST(DrawDetections, LabelTextIsRenderedWithTheFont) {
  auto font = Font::Load(Font::kDefaultPath, 14);
  if (!font.ok()) GTEST_SKIP() << font.status().ToString();
  Canvas c(200, 120);
  c.Draw({{40, 60, 160, 110, "circle"}}, {.thickness = 2, .font = font->get()});
  // The label strip sits above the box: y in [60 - strip, 60). It is filled with the
  // label colour and the glyphs are white on it, so both colours appear there.
  const Rgb color = PaletteColor(0);
  const int text_w = (*font)->MeasureWidth("circle");
  EXPECT_GT(text_w, 20);
  int strip = 0, ink = 0, other = 0;
  for (int y = 40; y < 60; ++y) {
    for (int x = 40; x < 40 + text_w + 4; ++x) {
      const Rgb p = c.at(x, y);
      if (p == color)
        ++strip;
      else if (p.r > 240 && p.g > 240 && p.b > 240)
        ++ink;
      else if (!(p == Rgb{200, 200, 200}))
        ++other;  // anti-aliased edges
    }
  }
  EXPECT_GT(strip, 50);
  EXPECT_GT(ink, 15);
  // Nothing is written right of the label strip.
  EXPECT_EQ(c.at(40 + text_w + 10, 50), (Rgb{200, 200, 200}));
}

TEST(DrawDetections, LabelAtTopBorderGoesInsideTheBox) {
  auto font = Font::Load(Font::kDefaultPath, 12);
  if (!font.ok()) GTEST_SKIP() << font.status().ToString();
  Canvas c(120, 80);
  c.Draw({{10, 0, 110, 70, "star"}}, {.thickness = 2, .font = font->get()});
  EXPECT_EQ(c.at(12, 5), PaletteColor(0));  // strip drawn inside, at the top
}

TEST(Font, MissingOrBadFontIsAnErrorNotACrash) {
  auto missing = Font::Load("/nonexistent/font.ttf", 12);
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto not_font = Font::Load("CMakeLists.txt", 12);
  EXPECT_FALSE(not_font.ok());
  EXPECT_EQ(not_font.status().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(Font::Load(Font::kDefaultPath, 0).ok());
  // Drawing without a font still draws the box.
  Canvas c(30, 30);
  c.Draw({{5, 15, 25, 25, "label"}}, {});
  EXPECT_EQ(c.at(5, 20), PaletteColor(0));
}

TEST(DrawDetections, PaintsMasksTranslucentlyInTheLabelColour) {
  Canvas c(40, 30);
  Detection d{5, 5, 25, 25, ""};  // no label strip over the mask
  InstanceMask m;
  m.image_width = 40;
  m.image_height = 30;
  m.x0 = 10;
  m.y0 = 10;
  m.width = 4;
  m.height = 2;
  m.bits = {1, 1, 0, 1, 0, 0, 0, 1};
  d.mask = m;
  c.Draw({d}, {.thickness = 1});
  const Rgb color = PaletteColor(0);
  const Rgb painted = c.at(10, 10);
  // 0.45 of the colour over the grey 200 background.
  auto blend = [](int fg) { return static_cast<uint8_t>((fg * 115 + 200 * 141 + 128) >> 8); };
  EXPECT_EQ(painted, (Rgb{blend(color.r), blend(color.g), blend(color.b)}));
  EXPECT_EQ(c.at(12, 10), (Rgb{200, 200, 200}));  // a 0 bit
  EXPECT_EQ(c.at(13, 11), painted);
  EXPECT_EQ(c.at(14, 10), (Rgb{200, 200, 200}));  // right of the mask
  // A mask reaching past the image is clipped, an inconsistent one paints nothing.
  m.x0 = 38;
  PaintMask(c.rgb.data(), c.w, c.h, m, color, 1.0f);
  EXPECT_EQ(c.at(39, 10), color);
  m.bits.resize(3);
  m.x0 = 0;
  PaintMask(c.rgb.data(), c.w, c.h, m, color, 1.0f);
  EXPECT_EQ(c.at(0, 10), (Rgb{200, 200, 200}));
}

}  // namespace
}  // namespace ocular

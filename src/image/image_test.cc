// Decoding: every fixture input must decode to exactly PIL's Image.open(f).convert("RGB"),
// and every kind of broken input must come back as a clear [image] error.
#include "image/image.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "image/test_util.h"

namespace ocular {
namespace {

using testing_image::Expected;
using testing_image::kFixtureDir;
using testing_image::SameImage;
using testing_image::TensorsWithPrefix;

std::string InputPath(const std::string& file) {
  return std::string(kFixtureDir) + "inputs/" + file;
}

std::vector<uint8_t> ReadInput(const std::string& file) {
  auto text = ReadFileToString(InputPath(file));
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? std::vector<uint8_t>(text->begin(), text->end()) : std::vector<uint8_t>{};
}

// testdata/images/edge: decoder edge cases (16-bit and RLE BMPs, indices past the palette,
// EXIF in PNG and WebP), each with Pillow's decoding stored as <file>.rgb.png (and, for exif*,
// ImageOps.exif_transpose's as <file>.exif.png). PNG decoding itself is checked above.
TEST(DecodeTest, EdgeCasesMatchPil) {
  namespace fs = std::filesystem;
  const std::string dir = std::string(kFixtureDir) + "edge/";
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.ends_with(".rgb.png") || file.ends_with(".exif.png")) continue;
    SCOPED_TRACE(file);
    for (const bool rotate : {false, true}) {
      const std::string want_path = dir + file + (rotate ? ".exif.png" : ".rgb.png");
      if (!fs::exists(want_path)) continue;
      DecodeOptions options;
      options.exif_rotate = rotate;
      auto got = LoadImage(dir + file, options);
      auto want = LoadImage(want_path);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      ASSERT_EQ(got->width, want->width);
      ASSERT_EQ(got->height, want->height);
      size_t first = got->rgb.size();
      for (size_t i = 0; i < got->rgb.size() && first == got->rgb.size(); ++i) {
        if (got->rgb[i] != want->rgb[i]) first = i;
      }
      EXPECT_EQ(first, got->rgb.size())
          << (rotate ? "exif_rotate: " : "") << "first difference at pixel " << first / 3
          << " channel " << first % 3 << ": " << int(got->rgb[first]) << " vs Pillow "
          << int(want->rgb[first]);
      ++checked;
    }
  }
  EXPECT_GE(checked, 26);  // the fixture set is there (20 files, 6 with EXIF)
}

TEST(DecodeTest, PngAndWebpExifOrientation) {
  const std::string dir = std::string(kFixtureDir) + "edge/";
  for (const int o : {3, 6, 8}) {
    for (const char* ext : {".png", ".webp"}) {
      auto text = ReadFileToString(dir + "exif" + std::to_string(o) + ext);
      ASSERT_TRUE(text.ok());
      const std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(text->data()),
                                          text->size());
      EXPECT_EQ(std::string(ext) == ".png" ? PngExifOrientation(data) : WebpExifOrientation(data),
                o)
          << ext;
      for (size_t n = 0; n < data.size(); n += 7) {  // truncations never read out of bounds
        (void)PngExifOrientation(data.first(n));
        (void)WebpExifOrientation(data.first(n));
      }
    }
  }
  EXPECT_EQ(PngExifOrientation(ReadInput("chelsea.png")), 1);
  EXPECT_EQ(WebpExifOrientation(ReadInput("coffee_lossless.webp")), 1);
}

TEST(DecodeTest, EveryFixtureMatchesPil) {
  const auto names = TensorsWithPrefix(Expected(), "decode/");
  ASSERT_GE(names.size(), 40u) << "fixtures missing: run make_image_fixtures";
  for (const std::string& name : names) {
    const std::string file = name.substr(std::strlen("decode/"));
    SCOPED_TRACE(file);
    auto image = LoadImage(InputPath(file));
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    EXPECT_TRUE(SameImage(*image, *Expected().Find(name)));
  }
}

TEST(DecodeTest, ExifRotateMatchesPilExifTranspose) {
  const auto names = TensorsWithPrefix(Expected(), "decode_exif/");
  ASSERT_EQ(names.size(), 8u);
  DecodeOptions rotate;
  rotate.exif_rotate = true;
  for (const std::string& name : names) {
    const std::string file = name.substr(std::strlen("decode_exif/"));
    SCOPED_TRACE(file);
    const std::vector<uint8_t> data = ReadInput(file);
    // chelsea_exif<N>.jpg carries orientation N.
    EXPECT_EQ(JpegExifOrientation(data), file[std::strlen("chelsea_exif")] - '0');
    auto image = DecodeImage(data, rotate);
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    EXPECT_TRUE(SameImage(*image, *Expected().Find(name)));
    // Off by default: transformers ignores EXIF.
    auto plain = DecodeImage(data);
    ASSERT_TRUE(plain.ok());
    EXPECT_TRUE(SameImage(*plain, *Expected().Find("decode/" + file)));
  }
}

TEST(DecodeTest, DetectsFormatsByMagic) {
  EXPECT_EQ(DetectImageFormat(ReadInput("coffee.jpg")), ImageFormat::kJpeg);
  EXPECT_EQ(DetectImageFormat(ReadInput("chelsea.png")), ImageFormat::kPng);
  EXPECT_EQ(DetectImageFormat(ReadInput("astronaut_lossy.webp")), ImageFormat::kWebp);
  EXPECT_EQ(DetectImageFormat(ReadInput("chelsea.gif")), ImageFormat::kGif);
  EXPECT_EQ(DetectImageFormat(ReadInput("astronaut.bmp")), ImageFormat::kBmp);
  const std::vector<uint8_t> riff_not_webp = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'A', 'V', 'I', ' '};
  EXPECT_EQ(DetectImageFormat(riff_not_webp), ImageFormat::kUnknown);
}

// One valid file per decoder.
const char* const kOnePerFormat[] = {"coffee.jpg",         "coffee_progressive.jpg",
                                     "chelsea.png",        "astronaut_lossy.webp",
                                     "logo_lossless.webp", "chelsea.gif",
                                     "astronaut.bmp",      "rgb16.png"};

TEST(DecodeErrorTest, EmptyAndUnknownInput) {
  auto empty = DecodeImage({});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  const std::string text = "hello, not an image";
  auto unknown = DecodeImage({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("[image] unrecognized image format"), std::string::npos)
      << unknown.status().message();
}

TEST(DecodeErrorTest, TruncatedDataIsAnErrorNotGray) {
  for (const char* file : kOnePerFormat) {
    const std::vector<uint8_t> data = ReadInput(file);
    for (double fraction : {0.0, 0.1, 0.5, 0.75, 0.95}) {
      const size_t n = std::max<size_t>(1, static_cast<size_t>(data.size() * fraction));
      SCOPED_TRACE(StrCat(file, " cut to ", n, " of ", data.size(), " bytes"));
      auto image = DecodeImage(std::span(data.data(), n));
      ASSERT_FALSE(image.ok());
      EXPECT_EQ(image.status().message().rfind("[image] ", 0), 0u) << image.status().message();
    }
  }
}

TEST(DecodeErrorTest, PixelBudgetIsCheckedFromTheHeader) {
  for (const char* file : kOnePerFormat) {
    SCOPED_TRACE(file);
    const std::vector<uint8_t> data = ReadInput(file);
    auto full = DecodeImage(data);
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    DecodeOptions options;
    options.max_pixels = int64_t{full->width} * full->height;
    EXPECT_TRUE(DecodeImage(data, options).ok());
    options.max_pixels -= 1;
    auto over = DecodeImage(data, options);
    ASSERT_FALSE(over.ok());
    EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted) << over.status().ToString();
  }
}

uint32_t Crc32(const uint8_t* p, size_t n) {  // PNG's CRC (ISO 3309), bitwise
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
  }
  return ~crc;
}

void PutBE32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

// A PNG whose IHDR claims width x height (with a valid CRC), followed by the original data.
std::vector<uint8_t> PngWithSize(uint32_t width, uint32_t height) {
  std::vector<uint8_t> png = ReadInput("chelsea.png");
  PutBE32(&png[16], width);
  PutBE32(&png[20], height);
  PutBE32(&png[29], Crc32(&png[12], 17));  // over "IHDR" + 13 data bytes
  return png;
}

// A JPEG whose SOF claims width x height.
std::vector<uint8_t> JpegWithSize(uint16_t width, uint16_t height) {
  std::vector<uint8_t> jpg = ReadInput("coffee.jpg");
  for (size_t i = 2; i + 9 < jpg.size(); ++i) {
    if (jpg[i] == 0xFF && (jpg[i + 1] == 0xC0 || jpg[i + 1] == 0xC2)) {
      jpg[i + 5] = height >> 8, jpg[i + 6] = height & 0xFF;
      jpg[i + 7] = width >> 8, jpg[i + 8] = width & 0xFF;
      return jpg;
    }
  }
  ADD_FAILURE() << "no SOF marker";
  return jpg;
}

std::vector<uint8_t> GifWithSize(uint16_t width, uint16_t height) {
  std::vector<uint8_t> gif = ReadInput("chelsea.gif");
  gif[6] = width & 0xFF, gif[7] = width >> 8, gif[8] = height & 0xFF, gif[9] = height >> 8;
  return gif;
}

std::vector<uint8_t> BmpWithSize(int32_t width, int32_t height) {
  std::vector<uint8_t> bmp = ReadInput("astronaut.bmp");
  for (int i = 0; i < 4; ++i) {
    bmp[18 + i] = static_cast<uint8_t>(static_cast<uint32_t>(width) >> (8 * i));
    bmp[22 + i] = static_cast<uint8_t>(static_cast<uint32_t>(height) >> (8 * i));
  }
  return bmp;
}

TEST(DecodeErrorTest, ZeroSizeHeaders) {
  for (const auto& data :
       {PngWithSize(0, 10), PngWithSize(10, 0), JpegWithSize(0, 10), GifWithSize(0, 5),
        GifWithSize(5, 0), BmpWithSize(0, 7), BmpWithSize(7, 0)}) {
    auto image = DecodeImage(data);
    ASSERT_FALSE(image.ok());
    EXPECT_EQ(image.status().message().rfind("[image] ", 0), 0u) << image.status().message();
  }
}

TEST(DecodeErrorTest, HugeHeadersAreRejectedBeforeAllocating) {
  // 60000 x 60000 = 3.6e9 pixels (10.8 GB of RGB): must fail fast on the default budget.
  for (const auto& data : {PngWithSize(60000, 60000), JpegWithSize(60000, 60000),
                           GifWithSize(60000, 60000), BmpWithSize(60000, -60000)}) {
    auto image = DecodeImage(data);
    ASSERT_FALSE(image.ok());
    EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted) << image.status().ToString();
    EXPECT_NE(image.status().message().find("60000x60000"), std::string::npos);
  }
}

TEST(DecodeErrorTest, HugeUnsignedBmpSidesDoNotOverflow) {
  // BMP sizes are unsigned 32-bit: 3211001867 x 4069221632 must be refused, not multiplied.
  auto image = DecodeImage(
      BmpWithSize(static_cast<int32_t>(3211001867u), static_cast<int32_t>(4069221632u)));
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted) << image.status().ToString();
  EXPECT_NE(image.status().message().find("a side over"), std::string::npos);
}

TEST(DecodeErrorTest, NegativeBmpHeightIsNamedAsWritten) {
  // -2147483647 has no 0xFF top byte: not top-down for Pillow, which reads 2147483649 rows.
  auto image = DecodeImage(BmpWithSize(2, -2147483647));
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted) << image.status().ToString();
  EXPECT_NE(image.status().message().find("height of -2147483647"), std::string::npos)
      << image.status().message();
  EXPECT_NE(image.status().message().find("2147483649 rows"), std::string::npos);
}

// A bottom-up BMP with a 40-byte header and a BGRX palette; `rows` are the padded pixel rows
// as stored (bottom row first).
std::vector<uint8_t> PaletteBmp(int bits, int width, int height,
                                const std::vector<std::array<uint8_t, 3>>& palette,
                                const std::vector<uint8_t>& rows) {
  std::vector<uint8_t> b = {'B', 'M'};
  auto u16 = [&](uint32_t v) { b.push_back(v & 255), b.push_back(v >> 8); };
  auto u32 = [&](uint32_t v) { u16(v & 0xFFFF), u16(v >> 16); };
  u32(0), u32(0), u32(54 + 4 * static_cast<uint32_t>(palette.size()));
  u32(40), u32(width), u32(height), u16(1), u16(bits), u32(0), u32(rows.size()), u32(0), u32(0);
  u32(palette.size()), u32(0);
  for (const auto& c : palette) b.insert(b.end(), {c[2], c[1], c[0], 0});
  b.insert(b.end(), rows.begin(), rows.end());
  return b;
}

TEST(BmpTest, GreyPaletteShortcutsFollowPillow) {
  // 1 bit, black/white palette: Pillow's mode "1", the same pixels as the palette gives.
  auto bw = DecodeImage(PaletteBmp(1, 3, 1, {{0, 0, 0}, {255, 255, 255}}, {0xA0, 0, 0, 0}));
  ASSERT_TRUE(bw.ok()) << bw.status().ToString();
  EXPECT_EQ(bw->rgb, (std::vector<uint8_t>{255, 255, 255, 0, 0, 0, 255, 255, 255}));
  // 8 bits with a 3-entry grey ramp: Pillow's mode "L", so index 200 is grey 200, not black.
  auto ramp = DecodeImage(PaletteBmp(8, 2, 1, {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}}, {1, 200, 0, 0}));
  ASSERT_TRUE(ramp.ok()) << ramp.status().ToString();
  EXPECT_EQ(ramp->rgb, (std::vector<uint8_t>{1, 1, 1, 200, 200, 200}));
  // The same indices with a coloured palette: past its end is black.
  auto pal = DecodeImage(PaletteBmp(8, 2, 1, {{9, 8, 7}, {1, 2, 3}, {4, 5, 6}}, {1, 200, 0, 0}));
  ASSERT_TRUE(pal.ok()) << pal.status().ToString();
  EXPECT_EQ(pal->rgb, (std::vector<uint8_t>{1, 2, 3, 0, 0, 0}));
  // 8 bits with a black/white palette: Pillow unpacks the rows as 1-bit data; so does ocular.
  auto ones = DecodeImage(PaletteBmp(8, 3, 1, {{0, 0, 0}, {255, 255, 255}}, {0xA0, 1, 0, 0}));
  ASSERT_TRUE(ones.ok()) << ones.status().ToString();
  EXPECT_EQ(ones->rgb, (std::vector<uint8_t>{255, 255, 255, 0, 0, 0, 255, 255, 255}));
  // 1 bit with a one-entry grey palette: Pillow (opening a path) reads each row as 9 bytes of
  // grey from the row's start, past the 4-byte stride (zeros past the end of the file).
  auto overlapping = DecodeImage(PaletteBmp(1, 9, 1, {{0, 0, 0}}, {0xFF, 0x80, 0, 0}));
  ASSERT_TRUE(overlapping.ok()) << overlapping.status().ToString();
  std::vector<uint8_t> grey;
  for (uint8_t v : {255, 128, 0, 0, 0, 0, 0, 0, 0}) grey.insert(grey.end(), {v, v, v});
  EXPECT_EQ(overlapping->rgb, grey);
}

TEST(DecodeErrorTest, RandomGarbageAfterEachMagic) {
  const std::vector<std::string> magics = {"\xFF\xD8\xFF", "\x89PNG\r\n\x1A\n",
                                           std::string("RIFF\x20\0\0\0WEBPVP8 ", 16), "GIF89a",
                                           "BM"};
  std::mt19937 rng(42);
  for (const std::string& magic : magics) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<uint8_t> data(magic.begin(), magic.end());
      const size_t extra = rng() % 300;
      for (size_t i = 0; i < extra; ++i) data.push_back(static_cast<uint8_t>(rng()));
      auto image = DecodeImage(data);
      if (!image.ok()) {
        EXPECT_EQ(image.status().message().rfind("[image] ", 0), 0u) << image.status().message();
      }
    }
  }
}

TEST(DecodeErrorTest, CorruptedBytesNeverCrash) {
  // Flipped bytes may or may not decode; what matters is a Status either way (ASan watches).
  std::mt19937 rng(7);
  for (const char* file : kOnePerFormat) {
    const std::vector<uint8_t> original = ReadInput(file);
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<uint8_t> data = original;
      for (int k = 0; k < 1 + trial % 8; ++k) data[rng() % data.size()] ^= 1 + rng() % 255;
      auto image = DecodeImage(data);
      if (image.ok()) {
        EXPECT_EQ(image->rgb.size(), size_t{3} * image->width * image->height);
      } else {
        EXPECT_EQ(image.status().message().rfind("[image] ", 0), 0u) << image.status().message();
      }
    }
  }
}

TEST(LoadImageTest, MissingFileNamesThePath) {
  auto image = LoadImage("testdata/images/inputs/no_such_file.png");
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kNotFound);
  EXPECT_NE(image.status().message().find("no_such_file.png"), std::string::npos);
}

TEST(LoadImageTest, DecodeErrorsNameThePath) {
  const std::string path = ::testing::TempDir() + "ocular_truncated.png";
  const std::vector<uint8_t> data = ReadInput("chelsea.png");
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(data.data(), 1, data.size() / 2, f);
  std::fclose(f);
  auto image = LoadImage(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(image.status().message().rfind("[image] " + path + ": corrupt PNG", 0), 0u)
      << image.status().message();
}

TEST(WritePngTest, RoundTripsThroughLoadImage) {
  const TensorView& want = *Expected().Find("decode/astronaut_q90.jpg");
  const Image image = testing_image::ImageFromTensor(want);
  const std::string path = ::testing::TempDir() + "ocular_write_png_test.png";
  ASSERT_TRUE(WritePng(path, image).ok());
  auto back = LoadImage(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(SameImage(*back, want));
}

TEST(WritePngTest, Errors) {
  Image bad(4, 4);
  bad.rgb.pop_back();
  EXPECT_EQ(WritePng(::testing::TempDir() + "x.png", bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WritePng("/nonexistent_dir/x.png", Image(2, 2)).code(), StatusCode::kIoError);
}

TEST(ExifTest, OrientationParsingIsBoundsChecked) {
  std::vector<uint8_t> data = ReadInput("chelsea_exif6.jpg");
  ASSERT_EQ(JpegExifOrientation(data), 6);
  for (size_t n = 0; n < 200 && n < data.size(); ++n) {
    const int o = JpegExifOrientation(std::span(data.data(), n));  // ASan checks the reads
    EXPECT_TRUE(o == 1 || o == 6);
  }
  EXPECT_EQ(JpegExifOrientation(ReadInput("coffee.jpg")), 1);
}

}  // namespace
}  // namespace ocular

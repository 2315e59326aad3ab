// Format sniffing, the pixel budget, EXIF orientation, and the DecodeImage/LoadImage entry points.
#include <algorithm>
#include <cstring>
#include <new>
#include <string_view>

#include "core/mapped_file.h"
#include "image/codecs.h"
#include "image/image.h"

namespace ocular {

namespace image_internal {

// stb_image's own limit, and far beyond any real photo; keeps every size computation in range
// even when a caller raises max_pixels.
constexpr int64_t kMaxSide = 1 << 24;

Status CheckDimensions(const char* format, int64_t width, int64_t height, int64_t max_pixels) {
  if (width <= 0 || height <= 0) {
    return Error(StatusCode::kInvalidArgument, "image", format, " header declares a ", width, "x",
                 height, " image");
  }
  if (width > kMaxSide || height > kMaxSide) {
    // Sides may come from unsigned 32-bit fields: their product could overflow int64.
    return Error(StatusCode::kResourceExhausted, "image", format, " image is ", width, "x", height,
                 ": a side over ", kMaxSide, " pixels, beyond any --max-image-pixels");
  }
  if (width * height > max_pixels) {
    return Error(StatusCode::kResourceExhausted, "image", format, " image is ", width, "x", height,
                 " = ", width * height, " pixels, over the limit of ", max_pixels,
                 " pixels (--max-image-pixels)");
  }
  return Status::Ok();
}

void DropOpaqueAlpha(Image* image) {
  if (std::all_of(image->alpha.begin(), image->alpha.end(), [](uint8_t a) { return a == 255; })) {
    image->alpha.clear();
    image->alpha.shrink_to_fit();
  }
}

}  // namespace image_internal

namespace {

bool StartsWith(std::span<const uint8_t> data, size_t offset, std::string_view magic) {
  return data.size() >= offset + magic.size() &&
         std::memcmp(data.data() + offset, magic.data(), magic.size()) == 0;
}

// Reads the orientation tag (0x0112) from IFD0 of a TIFF-structured EXIF block.
int TiffOrientation(std::span<const uint8_t> t) {
  if (t.size() < 8) return 1;
  const bool little = t[0] == 'I' && t[1] == 'I';
  if (!little && !(t[0] == 'M' && t[1] == 'M')) return 1;
  auto u16 = [&](size_t o) -> uint32_t {
    return little ? t[o] | (t[o + 1] << 8) : (t[o] << 8) | t[o + 1];
  };
  auto u32 = [&](size_t o) -> uint32_t {
    return little ? u16(o) | (u16(o + 2) << 16) : (u16(o) << 16) | u16(o + 2);
  };
  if (u16(2) != 42) return 1;
  const size_t ifd = u32(4);
  if (ifd > t.size() - 2) return 1;
  const size_t entries = u16(ifd);
  for (size_t i = 0; i < entries; ++i) {
    const size_t e = ifd + 2 + 12 * i;
    if (e > t.size() - 12) break;
    if (u16(e) != 0x0112) continue;
    const uint32_t type = u16(e + 2);  // 3 = SHORT, 4 = LONG; the value sits in the entry
    const uint32_t value = type == 3 ? u16(e + 8) : type == 4 ? u32(e + 8) : 1;
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

}  // namespace

namespace {

// One row per format ocular decodes: its name, its decoder and its EXIF orientation reader
// (null: the format carries none). Declared functions only, so the table may precede them.
struct FormatRow {
  ImageFormat format;
  const char* name;
  StatusOr<Image> (*decode)(std::span<const uint8_t> data, int64_t max_pixels);
  int (*exif_orientation)(std::span<const uint8_t> data);
};
constexpr FormatRow kFormats[] = {
    {ImageFormat::kJpeg, "JPEG", image_internal::DecodeJpeg, JpegExifOrientation},
    {ImageFormat::kPng, "PNG", image_internal::DecodePng, PngExifOrientation},
    {ImageFormat::kWebp, "WebP", image_internal::DecodeWebp, WebpExifOrientation},
    {ImageFormat::kGif, "GIF", image_internal::DecodeGif, nullptr},
    {ImageFormat::kBmp, "BMP", image_internal::DecodeBmp, nullptr},
};

// The row of `f`; null for kUnknown.
const FormatRow* FindFormat(ImageFormat f) {
  for (const FormatRow& row : kFormats) {
    if (row.format == f) return &row;
  }
  return nullptr;
}

}  // namespace

const char* ImageFormatName(ImageFormat f) {
  const FormatRow* row = FindFormat(f);
  return row != nullptr ? row->name : "unknown";
}

ImageFormat DetectImageFormat(std::span<const uint8_t> data) {
  if (StartsWith(data, 0, "\xFF\xD8\xFF")) return ImageFormat::kJpeg;
  if (StartsWith(data, 0, "\x89PNG\r\n\x1A\n")) return ImageFormat::kPng;
  if (StartsWith(data, 0, "RIFF") && StartsWith(data, 8, "WEBP")) return ImageFormat::kWebp;
  if (StartsWith(data, 0, "GIF87a") || StartsWith(data, 0, "GIF89a")) return ImageFormat::kGif;
  if (StartsWith(data, 0, "BM")) return ImageFormat::kBmp;
  return ImageFormat::kUnknown;
}

int JpegExifOrientation(std::span<const uint8_t> data) {
  if (!StartsWith(data, 0, "\xFF\xD8")) return 1;
  size_t pos = 2;
  while (pos + 4 <= data.size()) {
    if (data[pos] != 0xFF) return 1;
    const uint8_t marker = data[pos + 1];
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return 1;  // start of scan / end: no metadata left
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // markers without a length
      pos += 2;
      continue;
    }
    const size_t length = (data[pos + 2] << 8) | data[pos + 3];  // includes its own 2 bytes
    if (length < 2 || pos + 2 + length > data.size()) return 1;
    // Pillow reads the first APP1 segment that starts with "Exif\0\0".
    if (marker == 0xE1 && length >= 8 &&
        StartsWith(data, pos + 4, std::string_view("Exif\0\0", 6))) {
      return TiffOrientation(data.subspan(pos + 10, length - 8));
    }
    pos += 2 + length;
  }
  return 1;
}

namespace {

// Pillow's Exif.load drops every leading "Exif\0\0" before reading the TIFF structure.
int ExifBlockOrientation(std::span<const uint8_t> block) {
  constexpr std::string_view kPrefix("Exif\0\0", 6);
  while (StartsWith(block, 0, kPrefix)) block = block.subspan(kPrefix.size());
  return TiffOrientation(block);
}

}  // namespace

int PngExifOrientation(std::span<const uint8_t> data) {
  if (!StartsWith(data, 0, "\x89PNG\r\n\x1A\n")) return 1;
  // Chunks: u32 big-endian length, 4-byte type, data, CRC. Pillow reads eXIf wherever it is
  // (after IDAT too, when the image is loaded); a later one replaces an earlier one.
  int orientation = 1;
  size_t pos = 8;
  while (pos + 8 <= data.size()) {
    const size_t length =
        (size_t{data[pos]} << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3];
    if (length > data.size() - pos - 8) break;
    if (StartsWith(data, pos + 4, "eXIf")) {
      orientation = ExifBlockOrientation(data.subspan(pos + 8, length));
    }
    if (StartsWith(data, pos + 4, "IEND")) break;
    pos += 12 + length;
  }
  return orientation;
}

int WebpExifOrientation(std::span<const uint8_t> data) {
  if (!StartsWith(data, 0, "RIFF") || !StartsWith(data, 8, "WEBP")) return 1;
  // RIFF chunks: fourcc, u32 little-endian size, data padded to an even size. libwebp's demuxer
  // (what Pillow asks for the chunk) returns the first EXIF chunk.
  size_t pos = 12;
  while (pos + 8 <= data.size()) {
    const size_t size = data[pos + 4] | (data[pos + 5] << 8) | (data[pos + 6] << 16) |
                        (size_t{data[pos + 7]} << 24);
    if (size > data.size() - pos - 8) break;
    if (StartsWith(data, pos, "EXIF")) return ExifBlockOrientation(data.subspan(pos + 8, size));
    pos += 8 + size + (size & 1);
  }
  return 1;
}

Image ApplyExifOrientation(const Image& in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const int w = in.width, h = in.height;
  const bool swap = orientation >= 5;  // transpose, rotations by 90, transverse
  Image out(swap ? h : w, swap ? w : h);
  if (!in.alpha.empty()) out.alpha.resize(in.alpha.size());
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;  // source pixel for output (x, y)
      switch (orientation) {
        case 2:  // FLIP_LEFT_RIGHT
          sx = w - 1 - x;
          break;
        case 3:  // ROTATE_180
          sx = w - 1 - x, sy = h - 1 - y;
          break;
        case 4:  // FLIP_TOP_BOTTOM
          sy = h - 1 - y;
          break;
        case 5:  // TRANSPOSE
          sx = y, sy = x;
          break;
        case 6:  // ROTATE_270 (90° clockwise)
          sx = y, sy = h - 1 - x;
          break;
        case 7:  // TRANSVERSE
          sx = w - 1 - y, sy = h - 1 - x;
          break;
        case 8:  // ROTATE_90 (90° counter-clockwise)
          sx = w - 1 - y, sy = x;
          break;
      }
      std::memcpy(out.pixel(x, y), in.pixel(sx, sy), 3);
      if (!in.alpha.empty()) {
        out.alpha[static_cast<size_t>(y) * out.width + x] =
            in.alpha[static_cast<size_t>(sy) * w + sx];
      }
    }
  }
  return out;
}

StatusOr<Image> DecodeImage(std::span<const uint8_t> data, const DecodeOptions& options) {
  if (data.empty()) return Error(StatusCode::kInvalidArgument, "image", "empty input");
  const FormatRow* row = FindFormat(DetectImageFormat(data));
  if (row == nullptr) {
    std::string head;
    for (size_t i = 0; i < data.size() && i < 8; ++i) {
      static const char kHex[] = "0123456789abcdef";
      head += StrCat(i ? " " : "", kHex[data[i] >> 4], kHex[data[i] & 15]);
    }
    return Error(
        StatusCode::kInvalidArgument, "image",
        "unrecognized image format (not JPEG, PNG, WebP, GIF or BMP); first bytes: ", head);
  }
  StatusOr<Image> image = Status(StatusCode::kInternal, "unreachable");
  // The pixel budget is checked before allocating, but a budget the machine cannot hold (a
  // raised --max-image-pixels) must still end in an error, not std::bad_alloc.
  try {
    image = row->decode(data, options.max_pixels);
  } catch (const std::bad_alloc&) {
    return Error(StatusCode::kResourceExhausted, "image", row->name,
                 " image: not enough memory for its pixels (lower --max-image-pixels)");
  }
  if (image.ok() && options.exif_rotate && row->exif_orientation != nullptr) {
    const int orientation = row->exif_orientation(data);
    if (orientation != 1) return ApplyExifOrientation(*image, orientation);
  }
  return image;
}

StatusOr<Image> LoadImage(const std::string& path, const DecodeOptions& options) {
  OCULAR_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  StatusOr<Image> image = DecodeImage(std::span(file.data(), file.size()), options);
  if (image.ok()) return image;
  // "[image] <message>" → "[image] <path>: <message>"
  std::string_view message = image.status().message();
  if (message.starts_with("[image] ")) message.remove_prefix(8);
  return Error(image.status().code(), "image", path, ": ", message);
}

}  // namespace ocular

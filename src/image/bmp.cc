// BMP, decoded the way Pillow 11.3 reads it (PIL/BmpImagePlugin.py, the "raw" unpackers of
// libImaging/Unpack.c and the Python RLE decoder), followed by convert("RGB").
//
// Our own decoder rather than stb_image's, which differs from Pillow in three ways: it widens
// 5/6-bit channels by bit replication (Pillow: v * 255 / 31 and v * 255 / 63, floor), it does
// not read RLE4/RLE8, and it leaves pixels whose palette index is past the palette
// uninitialised (Pillow: black). What Pillow does is followed even where it is odd (noted
// inline), because the goal is the pixels transformers' image processor sees.
//
// A truncated file is an error (Pillow: "image file is truncated"), never a black bottom.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "image/codecs.h"

namespace ocular::image_internal {
namespace {

uint32_t U16(const uint8_t* p) { return p[0] | (p[1] << 8); }
uint32_t U32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

enum Compression : uint32_t { kRaw = 0, kRle8 = 1, kRle4 = 2, kBitfields = 3 };

// How a pixel of 16, 24 or 32 bits becomes RGB (Pillow's raw mode for the layout).
enum class Layout { kBgr15, kBgr16, kBytes };

struct BmpHeader {
  int64_t width = 0, height = 0;
  bool top_down = false;  // rows stored top row first (negative height in the header)
  uint32_t bits = 0, compression = kRaw;
  uint64_t colors = 0;       // palette entries (0 in the header: 1 << bits)
  size_t palette_at = 0;     // file offset of the palette
  size_t palette_entry = 4;  // bytes per palette entry: 4 (BGRX), 3 (BGR) for OS/2 headers
  uint64_t pixels_at = 0;    // file offset of the pixel data
  std::array<uint32_t, 4> masks = {0, 0, 0, 0};  // r, g, b, a (BITFIELDS)
};

Status Unsupported(const auto&... args) {
  return Error(StatusCode::kUnimplemented, "image", "BMP ", args...);
}
Status Corrupt(const auto&... args) { return Error(StatusCode::kDataLoss, "image", args...); }

StatusOr<BmpHeader> ParseHeader(std::span<const uint8_t> data) {
  // BITMAPFILEHEADER (14 bytes), then a DIB header whose first field is its own size.
  if (data.size() < 18) return Corrupt("truncated BMP header");
  const uint8_t* p = data.data();
  BmpHeader h;
  h.pixels_at = U32(p + 10);
  const uint32_t header_size = U32(p + 14);
  if (header_size == 12) {  // BITMAPCOREHEADER (OS/2 1.x): 16-bit unsigned sizes
    if (data.size() < 26) return Corrupt("truncated BMP header");
    h.width = U16(p + 18);
    h.height = U16(p + 20);
    h.bits = U16(p + 24);
    h.palette_entry = 3;
  } else if (header_size == 40 || header_size == 52 || header_size == 56 || header_size == 64 ||
             header_size == 108 || header_size == 124) {
    if (data.size() < 14 + size_t{header_size}) return Corrupt("truncated BMP header");
    // Pillow: a height whose top byte is 0xFF is negative (top-down); sizes are unsigned.
    h.top_down = p[25] == 0xFF;
    h.width = U32(p + 18);
    h.height = h.top_down ? (int64_t{1} << 32) - U32(p + 22) : U32(p + 22);
    if (!h.top_down && (U32(p + 22) & 0x80000000u) != 0) {
      // Negative, but without the 0xFF top byte Pillow takes as top-down: Pillow reads the
      // field as an unsigned row count of 2^31 or more. Both readings are named.
      return Error(StatusCode::kResourceExhausted, "image", "BMP header declares a height of ",
                   static_cast<int32_t>(U32(p + 22)), ", which Pillow reads as ", h.height,
                   " rows: a side over any image, beyond any --max-image-pixels");
    }
    h.bits = U16(p + 28);
    h.compression = U32(p + 30);
    h.colors = U32(p + 46);
    if (h.compression == kBitfields) {
      // After the 40-byte fields come the masks: part of the header from 52 bytes on (alpha
      // from 56), else three extra words right after it. Same file offsets either way.
      if (data.size() < 66) return Corrupt("truncated BMP bitfield masks");
      h.masks = {U32(p + 54), U32(p + 58), U32(p + 62), header_size >= 56 ? U32(p + 66) : 0};
    }
  } else {
    return Corrupt("BMP with unknown header size ", header_size);
  }
  h.palette_at = 14 + header_size;
  if (h.colors == 0) h.colors = uint64_t{1} << std::min<uint32_t>(h.bits, 63);
  // Pillow: a pixel offset pointing right after the header is taken to skip a full palette.
  if (h.pixels_at == 14 + uint64_t{header_size} && h.bits <= 8) h.pixels_at += 4 * h.colors;
  return h;
}

// The raw layout of a 16/24/32-bit image and, for byte layouts, which byte of the
// little-endian pixel holds R, G, B and A (-1: none; Pillow's mode is then "RGB", else "RGBA").
// Only the layouts Pillow accepts.
Status ChooseLayout(const BmpHeader& h, Layout* layout, std::array<int, 4>* rgb_byte) {
  *rgb_byte = {2, 1, 0, -1};  // BGR(X)
  *layout = Layout::kBytes;
  if (h.compression == kRaw) {
    if (h.bits == 16) *layout = Layout::kBgr15;
    return Status::Ok();
  }
  const auto [r, g, b, a] = h.masks;
  if (h.bits == 16 && r == 0xF800 && g == 0x7E0 && b == 0x1F) {
    *layout = Layout::kBgr16;
    return Status::Ok();
  }
  if (h.bits == 16 && r == 0x7C00 && g == 0x3E0 && b == 0x1F) {
    *layout = Layout::kBgr15;
    return Status::Ok();
  }
  if (h.bits == 24 && r == 0xFF0000 && g == 0xFF00 && b == 0xFF) return Status::Ok();
  if (h.bits == 32) {
    // Pillow's table of 32-bit (r, g, b, a) masks; all zero means BGRA.
    constexpr std::array<std::array<uint32_t, 4>, 8> kAccepted = {{
        {0xFF0000, 0xFF00, 0xFF, 0x0},
        {0xFF000000, 0xFF0000, 0xFF00, 0x0},
        {0xFF000000, 0xFF00, 0xFF, 0x0},
        {0xFF000000, 0xFF0000, 0xFF00, 0xFF},
        {0xFF, 0xFF00, 0xFF0000, 0xFF000000},
        {0xFF0000, 0xFF00, 0xFF, 0xFF000000},
        {0xFF000000, 0xFF00, 0xFF, 0xFF0000},
        {0x0, 0x0, 0x0, 0x0},
    }};
    if (std::find(kAccepted.begin(), kAccepted.end(), h.masks) != kAccepted.end()) {
      if (r != 0) {
        auto byte_of = [](uint32_t mask) {
          return mask == 0xFF ? 0 : mask == 0xFF00 ? 1 : mask == 0xFF0000 ? 2 : 3;
        };
        *rgb_byte = {byte_of(r), byte_of(g), byte_of(b), a != 0 ? byte_of(a) : -1};
      } else {
        *rgb_byte = {2, 1, 0, 3};  // all masks zero: Pillow's "BGRA"
      }
      return Status::Ok();
    }
  }
  return Unsupported("bitfields layout (", h.bits, " bits, masks ", r, "/", g, "/", b, "/", a,
                     ") is not supported");
}

// 5- and 6-bit channels widened as Pillow's BGR;15 / BGR;16 unpackers do: v * 255 / max.
void Unpack16(uint32_t v, Layout layout, uint8_t* out) {
  if (layout == Layout::kBgr16) {
    out[0] = static_cast<uint8_t>(((v >> 11) & 31) * 255 / 31);
    out[1] = static_cast<uint8_t>(((v >> 5) & 63) * 255 / 63);
  } else {
    out[0] = static_cast<uint8_t>(((v >> 10) & 31) * 255 / 31);
    out[1] = static_cast<uint8_t>(((v >> 5) & 31) * 255 / 31);
  }
  out[2] = static_cast<uint8_t>((v & 31) * 255 / 31);
}

// Pillow's RLE decoder (BmpRleDecoder.decode), to palette indices in file row order.
// Its quirks are kept: a delta escape consumes four bytes (two skipped, then right/up), an
// odd-length absolute run in RLE4 reads one byte too few, word alignment is by file offset.
StatusOr<std::vector<uint8_t>> DecodeRle(std::span<const uint8_t> data, const BmpHeader& h) {
  const size_t w = static_cast<size_t>(h.width);
  const size_t dest = w * static_cast<size_t>(h.height);
  const bool rle4 = h.compression == kRle4;
  std::vector<uint8_t> out;
  out.reserve(dest);
  size_t pos = h.pixels_at, x = 0;
  auto remaining = [&] { return pos < data.size() ? data.size() - pos : 0; };
  while (out.size() < dest) {
    if (remaining() < 2) break;
    size_t count = data[pos];
    const uint8_t value = data[pos + 1];
    pos += 2;
    if (count > 0) {  // encoded run
      if (x + count > w) count = x < w ? w - x : 0;
      for (size_t i = 0; i < count; ++i) {
        out.push_back(rle4 ? (i % 2 == 0 ? value >> 4 : value & 15) : value);
      }
      x += count;
    } else if (value == 0) {  // end of line
      while (out.size() % w != 0) out.push_back(0);
      x = 0;
    } else if (value == 1) {  // end of bitmap
      break;
    } else if (value == 2) {  // delta
      if (remaining() < 2) break;
      pos += 2;
      if (remaining() < 2) return Corrupt("truncated BMP RLE delta");
      const size_t right = data[pos], up = data[pos + 1];
      pos += 2;
      out.resize(out.size() + right + up * w, 0);
      x = out.size() % w;
    } else {  // absolute run of `value` pixels
      const size_t want = rle4 ? value / 2 : value;
      const size_t got = std::min(want, remaining());
      for (size_t i = 0; i < got; ++i) {
        const uint8_t b = data[pos + i];
        if (rle4) {
          out.push_back(b >> 4);
          out.push_back(b & 15);
        } else {
          out.push_back(b);
        }
      }
      pos += got;
      if (got < want) break;
      x += value;
      if (pos % 2 != 0) ++pos;
    }
  }
  if (out.size() < dest) {
    return Corrupt("truncated BMP: the RLE data ends after ", out.size(), " of ", dest, " pixels");
  }
  out.resize(dest);
  return out;
}

// A palette image's colours (1, 4, 8 bits): index → colour, with Pillow's grey shortcut.
struct Palette {
  std::vector<std::array<uint8_t, 3>> colors;
  bool gray = false;  // the grey ramp: the indices are grey levels

  void Put(uint8_t* out, uint32_t index) const {
    if (gray) {  // only reached from RLE ("L": the index is the grey level)
      out[0] = out[1] = out[2] = static_cast<uint8_t>(index);
    } else if (index < colors.size()) {
      std::memcpy(out, colors[index].data(), 3);
    } else {
      out[0] = out[1] = out[2] = 0;  // past the palette: Pillow's palette is black there
    }
  }
};

StatusOr<Palette> ReadPalette(std::span<const uint8_t> data, const BmpHeader& h, bool rle) {
  Palette p;
  if (h.bits > 8) return p;
  if (h.compression == kBitfields) return Unsupported("bitfields with ", h.bits, " bits");
  if (h.colors == 0 || h.colors > 65536) {
    return Corrupt("BMP palette size ", h.colors, " is outside 1..65536");
  }
  const size_t bytes = h.palette_at < data.size() ? std::min<size_t>(data.size() - h.palette_at,
                                                                     h.colors * h.palette_entry)
                                                  : 0;
  const uint8_t* pal = data.data() + h.palette_at;
  // Pillow drops a palette that is the grey ramp 0, 1, ... (or black, white for 2 colours)
  // and reads the indices as grey levels ("L", or "1" for 2 colours).
  p.gray = true;
  for (uint64_t i = 0; i < h.colors && p.gray; ++i) {
    const uint8_t level = h.colors == 2 ? (i == 0 ? 0 : 255) : static_cast<uint8_t>(i & 255);
    const size_t at = i * h.palette_entry;
    p.gray = at + 3 <= bytes && pal[at] == level && pal[at + 1] == level && pal[at + 2] == level;
  }
  // Through its RLE path Pillow cannot put a black/white ("1") image together: refuse.
  if (p.gray && rle && h.colors == 2) {
    return Unsupported(h.bits, "-bit RLE with a black/white palette (Pillow cannot read it)");
  }
  for (size_t i = 0; i + 3 <= bytes && p.colors.size() < 256; i += h.palette_entry) {
    p.colors.push_back({pal[i + 2], pal[i + 1], pal[i]});  // stored B, G, R
  }
  return p;
}

// The pixels of an uncompressed (or bitfields) BMP, as Pillow's raw decoder unpacks them.
StatusOr<Image> DecodeRaw(std::span<const uint8_t> data, const BmpHeader& h, const Palette& p) {
  const int w = static_cast<int>(h.width), ht = static_cast<int>(h.height);
  const bool gray = p.gray;
  Image img(w, ht);
  Layout layout = Layout::kBytes;
  std::array<int, 4> rgb_byte{};
  if (h.bits > 8) OCULAR_RETURN_IF_ERROR(ChooseLayout(h, &layout, &rgb_byte));
  if (h.bits == 32 && rgb_byte[3] >= 0) img.alpha.resize(static_cast<size_t>(w) * ht);
  const uint64_t stride = ((uint64_t(w) * h.bits + 31) >> 3) & ~uint64_t{3};
  // Without its palette Pillow unpacks the rows with the grey raw mode whatever the stored
  // depth: "1" (1 bit per pixel) for black/white, else "L" (a byte per pixel), stepping by the
  // stored stride. An "L" row can then be longer than the stride: Pillow opened from a path
  // maps the file and reads each row's bytes from its start (rows overlap; past the end of the
  // file the mapping reads zeros), which is followed here. (From a file object its decoder
  // fails instead.)
  const uint32_t unpack_bits = gray ? (h.colors == 2 ? 1 : 8) : h.bits;
  const bool overlapping_rows = gray && unpack_bits == 8 && h.bits < 8;
  const uint64_t row_bytes = (uint64_t(w) * unpack_bits + 7) / 8;
  // The last row needs no padding (Pillow's raw decoder stops once it has every pixel); the
  // mapped path checks whole strides.
  const uint64_t needed = h.pixels_at + stride * (ht - 1) + (overlapping_rows ? stride : row_bytes);
  if (data.size() < needed) {
    return Corrupt("truncated BMP: ", data.size(), " bytes, header needs ", needed);
  }
  const size_t bpp = h.bits / 8;
  for (int r = 0; r < ht; ++r) {
    const uint8_t* row = data.data() + h.pixels_at + stride * r;
    const int y = h.top_down ? r : ht - 1 - r;
    for (int x = 0; x < w; ++x) {
      uint8_t* out = img.pixel(x, y);
      if (gray && unpack_bits == 1) {
        out[0] = out[1] = out[2] = ((row[x / 8] >> (7 - x % 8)) & 1) ? 255 : 0;
      } else if (gray) {
        const size_t at = h.pixels_at + stride * r + x;
        out[0] = out[1] = out[2] = at < data.size() ? data[at] : 0;
      } else if (h.bits <= 8) {
        const int per_byte = 8 / h.bits;
        const int shift = 8 - h.bits * (x % per_byte + 1);  // first pixel in the high bits
        p.Put(out, (row[x / per_byte] >> shift) & ((1u << h.bits) - 1));
      } else if (h.bits == 16) {
        Unpack16(U16(row + 2 * x), layout, out);
      } else {
        const uint8_t* px = row + bpp * x;
        for (int c = 0; c < 3; ++c) out[c] = px[rgb_byte[c]];
        if (!img.alpha.empty()) img.alpha[static_cast<size_t>(y) * w + x] = px[rgb_byte[3]];
      }
    }
  }
  DropOpaqueAlpha(&img);
  return img;
}

}  // namespace

StatusOr<Image> DecodeBmp(std::span<const uint8_t> data, int64_t max_pixels) {
  OCULAR_ASSIGN_OR_RETURN(const BmpHeader h, ParseHeader(data));
  OCULAR_RETURN_IF_ERROR(CheckDimensions("BMP", h.width, h.height, max_pixels));
  if (h.bits != 1 && h.bits != 4 && h.bits != 8 && h.bits != 16 && h.bits != 24 && h.bits != 32) {
    return Corrupt("BMP with ", h.bits, " bits per pixel");
  }
  const bool rle = h.compression == kRle8 || h.compression == kRle4;
  if (h.compression != kRaw && h.compression != kBitfields && !rle) {
    return Unsupported("compression ", h.compression, " (JPEG/PNG in BMP) is not supported");
  }
  if (rle && h.bits > 8) return Unsupported("RLE with ", h.bits, " bits per pixel");
  OCULAR_ASSIGN_OR_RETURN(const Palette palette, ReadPalette(data, h, rle));
  if (!rle) return DecodeRaw(data, h, palette);
  const int w = static_cast<int>(h.width), ht = static_cast<int>(h.height);
  Image img(w, ht);
  OCULAR_ASSIGN_OR_RETURN(const std::vector<uint8_t> indices, DecodeRle(data, h));
  for (int r = 0; r < ht; ++r) {
    const int y = h.top_down ? r : ht - 1 - r;
    for (int x = 0; x < w; ++x) palette.Put(img.pixel(x, y), indices[size_t(r) * w + x]);
  }
  return img;
}

}  // namespace ocular::image_internal

// PNG through libpng: decoding to PIL's convert("RGB") (and convert("RGBA")'s alpha) and
// writing 8-bit RGB.
//
// Pillow's modes for PNG (src/PIL/PngImagePlugin.py, _MODES) and what convert("RGB") makes of
// them (src/libImaging/Convert.c, Unpack.c):
//   grey 1/2/4/8 bit → "1"/"L" (bit-replicated to 8 bits) → replicated to R=G=B
//   grey 16 bit      → "I;16" → min(v, 255) on each channel (I16 → RGB clips; it does not shift)
//   grey+alpha       → "LA" (16 bit: most significant byte) → alpha kept in Image::alpha
//   RGB / RGBA       → 8 bit as is, 16 bit: most significant byte ("RGB;16B") → alpha kept
//   palette          → "P" → palette lookup; tRNS (PIL info) → the entries' alphas
//   grey with tRNS   → alpha 0 where the sample equals it (convert("RGBA")'s convert_transparent)
//   RGB with tRNS    → no alpha: the image stays mode "RGB", which no processor composites
// libpng errors longjmp back to the function that called setjmp; as in jpeg.cc, those functions
// keep their mutable state behind pointers to the caller's frame.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "image/codecs.h"

namespace ocular {
namespace image_internal {
namespace {

struct PngErrorState {
  char message[256] = "unknown libpng error";
};

[[noreturn]] void OnPngError(png_structp png, png_const_charp message) {
  auto* err = static_cast<PngErrorState*>(png_get_error_ptr(png));
  std::snprintf(err->message, sizeof(err->message), "%s", message);
  png_longjmp(png, 1);
}
void OnPngWarning(png_structp, png_const_charp) {}

struct PngReader {
  std::span<const uint8_t> data;
  size_t pos = 0;
};

void ReadFromSpan(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (n > r->data.size() - r->pos) png_error(png, "truncated PNG data");
  std::memcpy(out, r->data.data() + r->pos, n);
  r->pos += n;
}

struct PngDecodeState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngErrorState err;
  PngReader reader;
  std::vector<uint8_t> pixels;  // decoded rows, after libpng's expansions
  std::vector<png_bytep> rows;
  Status status;
};

// One output row from a decoded sample row. `channels` is 1..4 after expansion (2 and 4 carry
// alpha, written to `alpha`), `depth` 8 or 16 (16-bit samples are big-endian); `clip16`: a 16-bit
// grey source ("I;16"), whose grey is clipped, not shifted.
void ConvertPngRow(const uint8_t* in, int width, int channels, int depth, bool clip16, uint8_t* out,
                   uint8_t* alpha) {
  const int bytes = depth / 8;
  for (int x = 0; x < width; ++x, out += 3, in += channels * bytes) {
    if (channels <= 2) {
      uint8_t v = in[0];  // 8-bit L/LA; for 16-bit LA the most significant byte
      if (clip16) {
        const int v16 = (in[0] << 8) | in[1];
        v = static_cast<uint8_t>(v16 > 255 ? 255 : v16);  // "I;16" → RGB clips
      }
      out[0] = out[1] = out[2] = v;
    } else {
      for (int c = 0; c < 3; ++c) out[c] = in[c * bytes];  // MSB for 16 bit
    }
    if (channels == 2 || channels == 4) alpha[x] = in[(channels - 1) * bytes];  // MSB for 16 bit
  }
}

bool RunPngDecode(PngDecodeState* st, int64_t max_pixels, Image* out) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  png_set_read_fn(st->png, &st->reader, ReadFromSpan);
  png_read_info(st->png, st->info);
  png_uint_32 width = 0, height = 0;
  int depth = 0, color_type = 0;
  png_get_IHDR(st->png, st->info, &width, &height, &depth, &color_type, nullptr, nullptr, nullptr);
  st->status = CheckDimensions("PNG", width, height, max_pixels);
  if (!st->status.ok()) return true;

  // Palette → RGB (libpng adds alpha if there is a tRNS chunk), grey < 8 bit → 8 bit by bit
  // replication (as PIL's "1", "L;2", "L;4" unpackers), a grey's tRNS → alpha. An RGB image's
  // tRNS is not expanded (PIL keeps the mode "RGB").
  const bool trns = png_get_valid(st->png, st->info, PNG_INFO_tRNS) != 0;
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(st->png);
  if (color_type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(st->png);
  if (color_type == PNG_COLOR_TYPE_GRAY && trns) png_set_tRNS_to_alpha(st->png);
  png_set_interlace_handling(st->png);
  png_read_update_info(st->png, st->info);
  const int channels = png_get_channels(st->png, st->info);
  const int out_depth = png_get_bit_depth(st->png, st->info);
  const size_t rowbytes = png_get_rowbytes(st->png, st->info);
  if (channels < 1 || channels > 4 || (out_depth != 8 && out_depth != 16) ||
      rowbytes != static_cast<size_t>(width) * channels * (out_depth / 8)) {
    st->status = Error(StatusCode::kInternal, "image", "unexpected libpng row layout: ", channels,
                       " channels, ", out_depth, " bits, ", rowbytes, " bytes per row");
    return true;
  }
  st->pixels.resize(rowbytes * height);
  st->rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y) st->rows[y] = st->pixels.data() + y * rowbytes;
  png_read_image(st->png, st->rows.data());
  // No png_read_end: chunks after the image data (up to IEND) do not change the pixels, and
  // Pillow also accepts a file whose IEND is missing. Truncated image data is an error above.
  *out = Image(static_cast<int>(width), static_cast<int>(height));
  const bool clip16 = color_type == PNG_COLOR_TYPE_GRAY && depth == 16;
  if (channels == 2 || channels == 4) out->alpha.resize(static_cast<size_t>(width) * height);
  for (png_uint_32 y = 0; y < height; ++y) {
    uint8_t* alpha = out->alpha.empty() ? nullptr : &out->alpha[static_cast<size_t>(y) * width];
    ConvertPngRow(st->rows[y], static_cast<int>(width), channels, out_depth, clip16,
                  out->pixel(0, y), alpha);
  }
  DropOpaqueAlpha(out);
  return true;
}

struct PngWriteState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngErrorState err;
  FILE* file = nullptr;
  std::vector<png_bytep> rows;
};

bool RunPngWrite(PngWriteState* st, const Image* image) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  png_init_io(st->png, st->file);
  png_set_IHDR(st->png, st->info, static_cast<png_uint_32>(image->width),
               static_cast<png_uint_32>(image->height), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(st->png, st->info);
  png_write_image(st->png, st->rows.data());
  png_write_end(st->png, nullptr);
  return true;
}

}  // namespace

StatusOr<Image> DecodePng(std::span<const uint8_t> data, int64_t max_pixels) {
  PngDecodeState st;
  st.reader.data = data;
  st.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st.err, OnPngError, OnPngWarning);
  if (st.png != nullptr) st.info = png_create_info_struct(st.png);
  if (st.png == nullptr || st.info == nullptr) {
    png_destroy_read_struct(&st.png, nullptr, nullptr);
    return Error(StatusCode::kInternal, "image", "libpng could not allocate a decoder");
  }
  Image out;
  const bool ok = RunPngDecode(&st, max_pixels, &out);
  png_destroy_read_struct(&st.png, &st.info, nullptr);
  if (!ok) return Error(StatusCode::kDataLoss, "image", "corrupt PNG: ", st.err.message);
  if (!st.status.ok()) return st.status;
  return out;
}

}  // namespace image_internal

Status WritePng(const std::string& path, const Image& image) {
  if (image.width <= 0 || image.height <= 0 ||
      image.rgb.size() != static_cast<size_t>(image.width) * image.height * 3) {
    return Error(StatusCode::kInvalidArgument, "image", "WritePng ", path, ": image is ",
                 image.width, "x", image.height, " with ", image.rgb.size(), " bytes");
  }
  image_internal::PngWriteState st;
  st.file = std::fopen(path.c_str(), "wb");
  if (st.file == nullptr) {
    return Error(StatusCode::kIoError, "image", "cannot open ", path, " for writing");
  }
  st.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &st.err, image_internal::OnPngError,
                                   image_internal::OnPngWarning);
  if (st.png != nullptr) st.info = png_create_info_struct(st.png);
  bool ok = st.png != nullptr && st.info != nullptr;
  if (ok) {
    st.rows.resize(image.height);
    for (int y = 0; y < image.height; ++y) {
      st.rows[y] = const_cast<png_bytep>(image.pixel(0, y));  // libpng only reads them
    }
    ok = image_internal::RunPngWrite(&st, &image);
  }
  png_destroy_write_struct(&st.png, &st.info);
  const bool closed = std::fclose(st.file) == 0;
  if (!ok) return Error(StatusCode::kIoError, "image", "writing ", path, ": ", st.err.message);
  if (!closed) return Error(StatusCode::kIoError, "image", "writing ", path, ": close failed");
  return Status::Ok();
}

}  // namespace ocular

// GIF (first frame) through giflib, matching Pillow's GifImagePlugin for frame 0: the canvas is
// the logical screen, pre-filled with the frame's transparent index if it has one (else index
// 0), the frame is pasted at its offset, and convert("RGB") looks indices up in the local or
// global colour table (black past its end). Without any colour table Pillow uses mode "L": the
// index is the grey. The transparent index (PIL info "transparency") is alpha 0 in
// convert("RGBA"), for the "P" and the "L" image alike; it is kept in Image::alpha.
#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "image/codecs.h"

namespace ocular::image_internal {
namespace {

struct GifReader {
  std::span<const uint8_t> data;
  size_t pos = 0;
};

int ReadFromSpan(GifFileType* gif, GifByteType* out, int n) {
  auto* r = static_cast<GifReader*>(gif->UserData);
  const size_t count = std::min(static_cast<size_t>(n < 0 ? 0 : n), r->data.size() - r->pos);
  std::memcpy(out, r->data.data() + r->pos, count);
  r->pos += count;
  return static_cast<int>(count);
}

Status GifError(const char* what, int code) {
  const char* reason = GifErrorString(code);
  return Error(StatusCode::kDataLoss, "image", "corrupt GIF (", what,
               "): ", reason != nullptr ? reason : "unknown error");
}

struct GifCloser {
  void operator()(GifFileType* gif) const {
    int error = 0;
    DGifCloseFile(gif, &error);
  }
};

}  // namespace

StatusOr<Image> DecodeGif(std::span<const uint8_t> data, int64_t max_pixels) {
  GifReader reader{data, 0};
  int error = 0;
  std::unique_ptr<GifFileType, GifCloser> gif(DGifOpen(&reader, ReadFromSpan, &error));
  if (gif == nullptr) return GifError("header", error);
  const int width = gif->SWidth, height = gif->SHeight;
  OCULAR_RETURN_IF_ERROR(CheckDimensions("GIF", width, height, max_pixels));

  int transparent = -1;  // from the graphics control extension preceding the first image
  for (;;) {
    GifRecordType type;
    if (DGifGetRecordType(gif.get(), &type) == GIF_ERROR) return GifError("record", gif->Error);
    if (type == TERMINATE_RECORD_TYPE) {
      return Error(StatusCode::kDataLoss, "image", "GIF has no image");
    }
    if (type == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(gif.get(), &code, &ext) == GIF_ERROR) {
        return GifError("extension", gif->Error);
      }
      if (code == GRAPHICS_EXT_FUNC_CODE && ext != nullptr && ext[0] >= 4 && (ext[1] & 1)) {
        transparent = ext[4];
      }
      while (ext != nullptr) {
        if (DGifGetExtensionNext(gif.get(), &ext) == GIF_ERROR) {
          return GifError("extension", gif->Error);
        }
      }
      continue;
    }
    if (type != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(gif.get()) == GIF_ERROR) return GifError("image descriptor", gif->Error);
    const GifImageDesc& desc = gif->Image;
    OCULAR_RETURN_IF_ERROR(CheckDimensions("GIF frame", desc.Width, desc.Height, max_pixels));

    std::vector<uint8_t> canvas(static_cast<size_t>(width) * height,
                                static_cast<uint8_t>(transparent >= 0 ? transparent : 0));
    std::vector<GifPixelType> line(desc.Width);
    // Interlaced frames store rows in four passes (GIF89a, appendix E).
    constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
    const int passes = desc.Interlace ? 4 : 1;
    for (int pass = 0; pass < passes; ++pass) {
      const int start = desc.Interlace ? kStart[pass] : 0, step = desc.Interlace ? kStep[pass] : 1;
      for (int fy = start; fy < desc.Height; fy += step) {
        if (DGifGetLine(gif.get(), line.data(), desc.Width) == GIF_ERROR) {
          return GifError("image data", gif->Error);
        }
        const int y = desc.Top + fy;
        if (y < 0 || y >= height) continue;
        for (int fx = 0; fx < desc.Width; ++fx) {
          const int x = desc.Left + fx;
          if (x >= 0 && x < width) canvas[static_cast<size_t>(y) * width + x] = line[fx];
        }
      }
    }
    const ColorMapObject* map = desc.ColorMap != nullptr ? desc.ColorMap : gif->SColorMap;
    Image out(width, height);
    if (transparent >= 0) out.alpha.assign(canvas.size(), 255);
    for (size_t i = 0; i < canvas.size(); ++i) {
      const int index = canvas[i];
      if (index == transparent) out.alpha[i] = 0;
      uint8_t* p = &out.rgb[i * 3];
      if (map == nullptr) {
        // No colour table at all: Pillow opens the GIF as "L", the index is the grey level.
        p[0] = p[1] = p[2] = static_cast<uint8_t>(index);
      } else if (index < map->ColorCount) {
        p[0] = map->Colors[index].Red;
        p[1] = map->Colors[index].Green;
        p[2] = map->Colors[index].Blue;
      } else {
        // An index past the table's end: Pillow's palette is black there.
        p[0] = p[1] = p[2] = 0;
      }
    }
    DropOpaqueAlpha(&out);
    return out;
  }
}

}  // namespace ocular::image_internal

// WebP through libwebp. Pillow (src/_webp.c) decodes every WebP with WebPAnimDecoder in
// non-premultiplied RGBA (mode "RGBA" when the file has alpha) or RGBX (mode "RGB"); for a still
// image that frame is exactly WebPDecode's output, so still images take the simple path and
// animations the first frame of WebPAnimDecoder. Alpha is kept in Image::alpha.
#include <webp/decode.h>
#include <webp/demux.h>

#include <cstring>
#include <vector>

#include "image/codecs.h"

namespace ocular::image_internal {
namespace {

const char* Vp8StatusName(VP8StatusCode code) {
  switch (code) {
    case VP8_STATUS_OK:
      return "ok";
    case VP8_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
      return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
      return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return "unsupported feature";
    case VP8_STATUS_SUSPENDED:
      return "suspended";
    case VP8_STATUS_USER_ABORT:
      return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return "truncated data";
  }
  return "unknown error";
}

StatusOr<Image> DecodeAnimatedFirstFrame(std::span<const uint8_t> data, int64_t max_pixels) {
  WebPData webp_data = {data.data(), data.size()};
  WebPAnimDecoderOptions options;
  if (!WebPAnimDecoderOptionsInit(&options)) {
    return Error(StatusCode::kInternal, "image", "libwebp version mismatch");
  }
  options.color_mode = MODE_RGBA;
  options.use_threads = 0;
  // The demuxer validates the container and the canvas size before any frame is decoded.
  WebPDemuxer* demux = WebPDemux(&webp_data);
  if (demux == nullptr) return Error(StatusCode::kDataLoss, "image", "corrupt animated WebP");
  const int64_t w = WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH);
  const int64_t h = WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT);
  WebPDemuxDelete(demux);
  OCULAR_RETURN_IF_ERROR(CheckDimensions("WebP", w, h, max_pixels));

  WebPAnimDecoder* dec = WebPAnimDecoderNew(&webp_data, &options);
  if (dec == nullptr) return Error(StatusCode::kDataLoss, "image", "corrupt animated WebP");
  uint8_t* rgba = nullptr;
  int timestamp = 0;
  Image out;
  if (WebPAnimDecoderGetNext(dec, &rgba, &timestamp) && rgba != nullptr) {
    out = Image(static_cast<int>(w), static_cast<int>(h));
    out.alpha.resize(static_cast<size_t>(w) * h);
    for (size_t i = 0, n = out.alpha.size(); i < n; ++i) {
      std::memcpy(&out.rgb[i * 3], rgba + i * 4, 3);
      out.alpha[i] = rgba[i * 4 + 3];
    }
    DropOpaqueAlpha(&out);
  }
  WebPAnimDecoderDelete(dec);
  if (out.rgb.empty()) return Error(StatusCode::kDataLoss, "image", "corrupt animated WebP frame");
  return out;
}

}  // namespace

StatusOr<Image> DecodeWebp(std::span<const uint8_t> data, int64_t max_pixels) {
  WebPBitstreamFeatures features;
  const VP8StatusCode code = WebPGetFeatures(data.data(), data.size(), &features);
  if (code != VP8_STATUS_OK) {
    return Error(StatusCode::kDataLoss, "image", "corrupt WebP header: ", Vp8StatusName(code));
  }
  if (features.has_animation) return DecodeAnimatedFirstFrame(data, max_pixels);
  OCULAR_RETURN_IF_ERROR(CheckDimensions("WebP", features.width, features.height, max_pixels));

  Image out(features.width, features.height);
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) {
    return Error(StatusCode::kInternal, "image", "libwebp version mismatch");
  }
  // With alpha: non-premultiplied RGBA (as Pillow's decoder), split below.
  std::vector<uint8_t> rgba(features.has_alpha ? out.rgb.size() / 3 * 4 : 0);
  const int channels = features.has_alpha ? 4 : 3;
  config.output.colorspace = features.has_alpha ? MODE_RGBA : MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = features.has_alpha ? rgba.data() : out.rgb.data();
  config.output.u.RGBA.stride = features.width * channels;
  config.output.u.RGBA.size = features.has_alpha ? rgba.size() : out.rgb.size();
  const VP8StatusCode status = WebPDecode(data.data(), data.size(), &config);
  WebPFreeDecBuffer(&config.output);
  if (status != VP8_STATUS_OK) {
    return Error(StatusCode::kDataLoss, "image", "corrupt WebP: ", Vp8StatusName(status));
  }
  if (features.has_alpha) {
    out.alpha.resize(rgba.size() / 4);
    for (size_t i = 0; i < out.alpha.size(); ++i) {
      std::memcpy(&out.rgb[i * 3], &rgba[i * 4], 3);
      out.alpha[i] = rgba[i * 4 + 3];
    }
    DropOpaqueAlpha(&out);
  }
  return out;
}

}  // namespace ocular::image_internal

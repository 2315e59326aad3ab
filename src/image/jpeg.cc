// JPEG through libjpeg(-turbo), converted to RGB the way Pillow does it.
//
// Pillow (src/PIL/JpegImagePlugin.py, JpegImageFile._open) picks the mode from the number of
// components: 1 → L, 3 → RGB, 4 → CMYK, and reads every 4-component file with rawmode "CMYK;I"
// ("assume adobe conventions": inverted, unconditionally). libjpeg is asked for the matching
// out_color_space (src/libImaging/JpegDecode.c), then Convert.c turns L/CMYK into RGB.
//
// libjpeg reports fatal errors through error_exit, which must not return: we longjmp back to
// RunJpeg. To keep that well-defined in C++, RunJpeg owns no objects with destructors and writes
// only through pointers to state that lives in the caller's frame.
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include "image/codecs.h"

namespace ocular::image_internal {
namespace {

// A progressive file can hold thousands of tiny scans, each a full pass over the coefficients:
// a classic decompression bomb. Real encoders write at most a few dozen.
constexpr int kMaxJpegScans = 1000;

struct JpegErrorManager {
  jpeg_error_mgr pub;  // first member: libjpeg sees a jpeg_error_mgr*
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

struct JpegState {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  jpeg_source_mgr src;
  jpeg_progress_mgr progress;
  std::vector<uint8_t> row;
  Status status;  // set for errors found by us rather than by libjpeg
};

[[noreturn]] void OnJpegError(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

// Warnings (e.g. "extraneous bytes before marker") are ignored, as in Pillow. Running out of data
// is not a warning here: our source manager turns it into an error.
void OnJpegMessage(j_common_ptr, int) {}

void OnJpegProgress(j_common_ptr common) {
  if (!common->is_decompressor) return;
  auto* cinfo = reinterpret_cast<j_decompress_ptr>(common);
  if (cinfo->input_scan_number > kMaxJpegScans) {
    auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "more than %d scans", kMaxJpegScans);
    longjmp(err->jump, 1);
  }
}

// A memory source that fails on premature end of data. libjpeg's jpeg_mem_src instead inserts a
// fake EOI and returns a gray remainder, which would make truncated files decode "successfully".
void InitSource(j_decompress_ptr) {}
boolean FillInputBuffer(j_decompress_ptr cinfo) {
  ERREXIT(cinfo, JERR_INPUT_EOF);
  return FALSE;
}
void SkipInputData(j_decompress_ptr cinfo, long num_bytes) {  // NOLINT: libjpeg's signature
  if (num_bytes <= 0) return;
  jpeg_source_mgr* src = cinfo->src;
  if (static_cast<size_t>(num_bytes) > src->bytes_in_buffer) ERREXIT(cinfo, JERR_INPUT_EOF);
  src->next_input_byte += num_bytes;
  src->bytes_in_buffer -= static_cast<size_t>(num_bytes);
}
void TermSource(j_decompress_ptr) {}

// Pillow's cmyk2rgb (src/libImaging/Convert.c): with nk = 255 - k,
// out = nk - MULDIV255(c, nk), MULDIV255(a, b) = (t + (t >> 8)) >> 8 where t = a * b + 128.
inline uint8_t CmykChannel(int c, int nk) {
  const int t = c * nk + 128;
  return static_cast<uint8_t>(nk - (((t >> 8) + t) >> 8));
}

void ConvertRow(const uint8_t* in, int width, int components, uint8_t* out) {
  for (int x = 0; x < width; ++x, out += 3) {
    if (components == 1) {
      out[0] = out[1] = out[2] = in[x];
    } else if (components == 3) {
      std::memcpy(out, in + x * 3, 3);
    } else {
      // "CMYK;I": every sample inverted before the CMYK → RGB conversion.
      const uint8_t* p = in + x * 4;
      const int k = 255 - p[3];
      for (int c = 0; c < 3; ++c) out[c] = CmykChannel(255 - p[c], 255 - k);
    }
  }
}

// Returns false after a libjpeg error (message in st->err.message), or with st->status set.
bool RunJpeg(JpegState* st, int64_t max_pixels, Image* out) {
  if (setjmp(st->err.jump)) return false;
  j_decompress_ptr cinfo = &st->cinfo;
  jpeg_create_decompress(cinfo);
  cinfo->src = &st->src;
  cinfo->progress = &st->progress;
  jpeg_read_header(cinfo, TRUE);

  st->status = CheckDimensions("JPEG", cinfo->image_width, cinfo->image_height, max_pixels);
  if (!st->status.ok()) return true;
  switch (cinfo->num_components) {
    case 1:
      cinfo->out_color_space = JCS_GRAYSCALE;
      break;
    case 3:
      cinfo->out_color_space = JCS_RGB;
      break;
    case 4:
      cinfo->out_color_space = JCS_CMYK;
      break;
    default:
      st->status = Error(StatusCode::kUnimplemented, "image", "JPEG with ", cinfo->num_components,
                         " components (PIL reads 1, 3 or 4)");
      return true;
  }
  jpeg_start_decompress(cinfo);
  const int width = static_cast<int>(cinfo->output_width);
  const int components = cinfo->output_components;
  *out = Image(width, static_cast<int>(cinfo->output_height));
  st->row.resize(static_cast<size_t>(width) * components);
  while (cinfo->output_scanline < cinfo->output_height) {
    const int y = static_cast<int>(cinfo->output_scanline);
    JSAMPROW rows[1] = {st->row.data()};
    jpeg_read_scanlines(cinfo, rows, 1);
    ConvertRow(st->row.data(), width, components, out->pixel(0, y));
  }
  // Not jpeg_finish_decompress: all pixels are in, and a missing EOI marker after complete
  // image data is not worth rejecting a file for (Pillow accepts it too).
  return true;
}

}  // namespace

StatusOr<Image> DecodeJpeg(std::span<const uint8_t> data, int64_t max_pixels) {
  JpegState st{};
  st.cinfo.err = jpeg_std_error(&st.err.pub);
  st.err.pub.error_exit = OnJpegError;
  st.err.pub.emit_message = OnJpegMessage;
  st.src.next_input_byte = data.data();
  st.src.bytes_in_buffer = data.size();
  st.src.init_source = InitSource;
  st.src.fill_input_buffer = FillInputBuffer;
  st.src.skip_input_data = SkipInputData;
  st.src.resync_to_restart = jpeg_resync_to_restart;
  st.src.term_source = TermSource;
  st.progress.progress_monitor = OnJpegProgress;
  Image out;
  const bool ok = RunJpeg(&st, max_pixels, &out);
  jpeg_destroy_decompress(&st.cinfo);
  if (!ok) return Error(StatusCode::kDataLoss, "image", "corrupt JPEG: ", st.err.message);
  if (!st.status.ok()) return st.status;
  return out;
}

}  // namespace ocular::image_internal

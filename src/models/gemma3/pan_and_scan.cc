#include "models/gemma3/pan_and_scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ocular::gemma3 {

namespace {

constexpr const char* kBoi = "<start_of_image>";

}  // namespace

StatusOr<std::vector<CropRect>> PanAndScanCrops(int width, int height, const PanAndScanParams& p) {
  if (p.min_crop_size < 1 || p.max_num_crops < 1 || !(p.min_ratio_to_activate > 0) ||
      !std::isfinite(p.min_ratio_to_activate)) {
    return Error(StatusCode::kInvalidArgument, "image",
                 "pan-and-scan needs pan_and_scan_min_crop_size >= 1, "
                 "pan_and_scan_max_num_crops >= 1 and a positive "
                 "pan_and_scan_min_ratio_to_activate");
  }
  if (width < 1 || height < 1) return std::vector<CropRect>{};
  const double w = width, h = height;
  // image_processing_gemma3.py pan_and_scan: Python floats are doubles; int(math.floor(...)).
  auto crops_along = [&](double longer, double shorter) {
    int n = static_cast<int>(std::floor(longer / shorter + 0.5));  // half rounds up
    n = std::min(static_cast<int>(std::floor(longer / p.min_crop_size)), n);
    n = std::max(2, n);
    return std::min(p.max_num_crops, n);
  };
  int num_w = 1, num_h = 1;
  if (width >= height) {  // square or landscape
    if (w / h < p.min_ratio_to_activate) return std::vector<CropRect>{};
    num_w = crops_along(w, h);
  } else {
    if (h / w < p.min_ratio_to_activate) return std::vector<CropRect>{};
    num_h = crops_along(h, w);
  }
  const int crop_w = static_cast<int>(std::ceil(w / num_w));
  const int crop_h = static_cast<int>(std::ceil(h / num_h));
  if (std::min(crop_w, crop_h) < p.min_crop_size) return std::vector<CropRect>{};
  std::vector<CropRect> out;
  for (int i = 0; i < num_h; ++i) {
    for (int j = 0; j < num_w; ++j) {
      const int x = crop_w * j, y = crop_h * i;
      if (x >= width || y >= height) {
        return Error(StatusCode::kInvalidArgument, "image", "pan-and-scan of a ", width, "x",
                     height, " image into ", num_w, "x", num_h, " crops of ", crop_w, "x", crop_h,
                     " leaves an empty crop (lower pan_and_scan_max_num_crops or raise "
                     "pan_and_scan_min_crop_size)");
      }
      out.push_back({x, y, std::min(crop_w, width - x), std::min(crop_h, height - y)});
    }
  }
  return out;
}

Image CropImage(const Image& image, const CropRect& r) {
  Image out(r.width, r.height);
  for (int y = 0; y < r.height; ++y) {
    std::memcpy(out.pixel(0, y), image.pixel(r.x, r.y + y), static_cast<size_t>(r.width) * 3);
  }
  return out;
}

std::string InsertCropMarkers(const std::string& text, const std::vector<int>& crops) {
  const std::string boi = kBoi;
  std::string out;
  size_t from = 0, image = 0;
  for (size_t at; (at = text.find(boi, from)) != std::string::npos; from = at + boi.size()) {
    out += text.substr(from, at - from);
    const int n = image < crops.size() ? crops[image] : 0;
    ++image;
    if (n == 0) {
      out += boi;
      continue;
    }
    out += "Here is the original image " + boi + " and here are some crops to help you see better ";
    for (int i = 0; i < n; ++i) out += (i ? " " : "") + boi;
  }
  return out + text.substr(from);
}

}  // namespace ocular::gemma3

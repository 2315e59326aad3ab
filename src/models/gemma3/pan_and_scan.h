// Gemma 3's pan-and-scan: an elongated image is also shown as 2..max_num_crops crops side by
// side (or stacked), each preprocessed like a whole image; the prompt then says
// "Here is the original image <start_of_image> and here are some crops to help you see better
// <start_of_image> <start_of_image> ...".
// Reference: transformers 4.57 models/gemma3/image_processing_gemma3.py (pan_and_scan,
// _process_images_for_pan_and_scan) and processing_gemma3.py (Gemma3Processor.__call__).
#pragma once

#include <string>
#include <vector>

#include "image/image.h"
#include "ocular/status.h"

namespace ocular::gemma3 {

// The crop parameters: preprocessor_config.json's pan_and_scan_* where set (not null), else
// Gemma3ProcessorKwargs' defaults (the values Gemma3Processor passes when a call turns
// do_pan_and_scan on).
struct PanAndScanParams {
  int min_crop_size = 256;
  int max_num_crops = 4;
  double min_ratio_to_activate = 1.2;
};

struct CropRect {
  int x = 0, y = 0, width = 0, height = 0;
};

// The crops of a width x height image in transformers' order (row-major over the grid of
// num_crops_h x num_crops_w; one of them is 1): none when the long side is less than
// min_ratio_to_activate times the short one or when the crops would be smaller than
// min_crop_size. A crop is ceil(side / n) long; the last one ends at the image's edge (numpy
// slicing). Errors (kInvalidArgument): parameters under 1, or a crop grid that starts past
// the image's edge (transformers would slice an empty array).
StatusOr<std::vector<CropRect>> PanAndScanCrops(int width, int height, const PanAndScanParams& p);

// The pixels of `r` (REQUIRES: inside the image, non-empty).
Image CropImage(const Image& image, const CropRect& r);

// Gemma3Processor's prompt rewrite: the i-th "<start_of_image>" of `text` becomes
// "Here is the original image <start_of_image> and here are some crops to help you see better "
// + crops[i] markers joined by " " when crops[i] > 0. REQUIRES: the text has crops.size()
// markers.
std::string InsertCropMarkers(const std::string& text, const std::vector<int>& crops);

}  // namespace ocular::gemma3

// LoadGroundingFormat / ParseGroundedDetections (ocular/detection.h): which frame a family's
// boxes are in. PaliGemma: <loc> tokens over the original image (tasks/detection.h).
// Qwen2.5-VL: pixels of the image its processor fed the model — smart_resize of the original
// size (QwenLM/Qwen2.5-VL cookbooks/spatial_understanding.ipynb: input_width =
// image_grid_thw[2] * 14). Qwen3-VL: a 0-1000 grid (QwenLM/Qwen3-VL
// cookbooks/spatial_understanding.ipynb: x / 1000 * width).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "core/file_set.h"
#include "models/qwen2vl/processor.h"
#include "ocular/detection.h"
#include "tasks/qwen_boxes.h"

namespace ocular {

GroundingFormat WithImageResize(GroundingFormat format, const ImageResize& resize) {
  if (format.kind != GroundingFormat::Kind::kQwenResizedPixels) return format;
  if (resize.min_pixels != 0) format.min_pixels = resize.min_pixels;
  if (resize.max_pixels != 0) format.max_pixels = resize.max_pixels;
  return format;
}

StatusOr<GroundingFormat> LoadGroundingFormat(const std::string& model_path,
                                              const ImageResize& resize) {
  GroundingFormat f;
  std::error_code ec;
  if (!std::filesystem::is_directory(model_path, ec)) return f;  // a GGUF file: no Qwen
  const DirectoryFiles files(model_path);
  StatusOr<std::string> text = files.Read("config.json", kMaxConfigFileBytes, "config");
  if (!text.ok()) return f;  // the engine reports a bad checkpoint; boxes stay <loc> tokens
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  const auto type = j.is_object() ? j.find("model_type") : j.end();
  if (j.is_object() && type != j.end() && type->is_string()) {
    if (*type == "qwen3_vl") f.kind = GroundingFormat::Kind::kQwenGrid1000;
    if (*type == "qwen2_5_vl") {
      OCULAR_ASSIGN_OR_RETURN(qwen2vl::ImageConfig c, qwen2vl::LoadImageConfig(files, resize));
      f.kind = GroundingFormat::Kind::kQwenResizedPixels;
      f.factor = c.factor();
      f.min_pixels = c.min_pixels;
      f.max_pixels = c.max_pixels;
    }
  }
  return f;
}

std::vector<Detection> ParseGroundedDetections(const GroundingFormat& format,
                                               std::string_view decoded_text, int image_w,
                                               int image_h) {
  switch (format.kind) {
    case GroundingFormat::Kind::kQwenGrid1000:
      return ParseQwenBoxes(decoded_text, 1000, 1000, image_w, image_h);
    case GroundingFormat::Kind::kQwenResizedPixels: {
      StatusOr<std::pair<int, int>> hw = qwen2vl::SmartResize(image_h, image_w, format.factor,
                                                              format.min_pixels, format.max_pixels);
      if (!hw.ok()) return {};  // an image the processor refuses produced no answer
      return ParseQwenBoxes(decoded_text, hw->second, hw->first, image_w, image_h);
    }
    case GroundingFormat::Kind::kLocTokens:
      break;
  }
  return ParseDetections(decoded_text, image_w, image_h);
}

}  // namespace ocular

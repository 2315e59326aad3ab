#include "image/preprocess.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/file_io.h"

namespace ocular {
namespace {

using Json = nlohmann::json;

Status FieldError(const std::string& origin, const char* field, const char* expected,
                  const Json& value) {
  // A preprocessor_config.json with a wrong-typed or out-of-range field is a corrupt file.
  return Error(StatusCode::kDataLoss, "image", origin, ": field '", field, "' must be ", expected,
               ", got ", ShortJson(value));
}

// Reads an optional boolean; null means false (transformers treats None as falsy).
Status ReadBool(const Json& j, const char* field, const std::string& origin, bool* out) {
  if (!j.contains(field)) return Status::Ok();
  const Json& v = j[field];
  if (v.is_null()) {
    *out = false;
  } else if (v.is_boolean()) {
    *out = v.get<bool>();
  } else {
    return FieldError(origin, field, "a boolean", v);
  }
  return Status::Ok();
}

// A float or a list of 3 floats (image_mean / image_std).
Status ReadPerChannel(const Json& j, const char* field, const std::string& origin,
                      std::array<double, 3>* out) {
  if (!j.contains(field) || j[field].is_null()) return Status::Ok();
  const Json& v = j[field];
  if (v.is_number()) {
    out->fill(v.get<double>());
    return Status::Ok();
  }
  if (!v.is_array() || v.size() != 3) return FieldError(origin, field, "a number or 3 numbers", v);
  for (size_t c = 0; c < 3; ++c) {
    if (!v[c].is_number()) return FieldError(origin, field, "a number or 3 numbers", v);
    (*out)[c] = v[c].get<double>();
  }
  return Status::Ok();
}

}  // namespace

Status PreprocessConfig::Validate() const {
  if (height < 1 || height > 16384 || width < 1 || width > 16384) {
    return Error(StatusCode::kDataLoss, "image", "preprocess size ", width, "x", height,
                 " is outside 1..16384");
  }
  if (!std::isfinite(rescale_factor)) {
    return Error(StatusCode::kDataLoss, "image", "rescale_factor is not finite");
  }
  for (int c = 0; c < 3; ++c) {
    if (!std::isfinite(image_mean[c]) || !std::isfinite(image_std[c]) || image_std[c] == 0.0) {
      return Error(StatusCode::kDataLoss, "image", "image_mean/image_std channel ", c, " = ",
                   image_mean[c], "/", image_std[c], ": need finite values, std != 0");
    }
  }
  return Status::Ok();
}

StatusOr<PreprocessConfig> ParsePreprocessConfig(const std::string& json_text,
                                                 const std::string& origin) {
  OCULAR_ASSIGN_OR_RETURN(const Json j, ParseJson(json_text, origin, "image"));
  if (!j.is_object()) {
    return Error(StatusCode::kDataLoss, "image", origin, ": not a JSON object");
  }
  PreprocessConfig config;
  OCULAR_RETURN_IF_ERROR(ReadBool(j, "do_resize", origin, &config.do_resize));
  OCULAR_RETURN_IF_ERROR(ReadBool(j, "do_rescale", origin, &config.do_rescale));
  OCULAR_RETURN_IF_ERROR(ReadBool(j, "do_normalize", origin, &config.do_normalize));
  OCULAR_RETURN_IF_ERROR(ReadBool(j, "do_convert_rgb", origin, &config.do_convert_rgb));
  OCULAR_RETURN_IF_ERROR(ReadPerChannel(j, "image_mean", origin, &config.image_mean));
  OCULAR_RETURN_IF_ERROR(ReadPerChannel(j, "image_std", origin, &config.image_std));
  if (j.contains("size") && !j["size"].is_null()) {
    const Json& size = j["size"];
    if (!size.is_object() || !size.contains("height") || !size.contains("width") ||
        !size["height"].is_number_integer() || !size["width"].is_number_integer()) {
      return Error(StatusCode::kUnimplemented, "image", origin, ": size ", ShortJson(size),
                   " is not {\"height\": int, \"width\": int} (shortest_edge etc. unsupported)");
    }
    const int64_t h = size["height"].get<int64_t>(), w = size["width"].get<int64_t>();
    if (h < 1 || h > 16384 || w < 1 || w > 16384)
      return FieldError(origin, "size", "1..16384", size);
    config.height = static_cast<int>(h);
    config.width = static_cast<int>(w);
  }
  if (j.contains("resample") && !j["resample"].is_null()) {
    const Json& r = j["resample"];
    if (!r.is_number_integer()) return FieldError(origin, "resample", "a PIL filter number", r);
    if (!ResampleFilterFromPil(r.get<int>(), &config.resample)) {
      return Error(StatusCode::kUnimplemented, "image", origin, ": resample ", ShortJson(r),
                   " is not supported (2 = BILINEAR, 3 = BICUBIC)");
    }
  }
  if (j.contains("rescale_factor") && !j["rescale_factor"].is_null()) {
    const Json& r = j["rescale_factor"];
    if (!r.is_number()) return FieldError(origin, "rescale_factor", "a number", r);
    config.rescale_factor = r.get<double>();
  }
  Status valid = config.Validate();
  if (!valid.ok()) return Status(valid.code(), StrCat(valid.message(), " (", origin, ")"));
  return config;
}

StatusOr<PreprocessConfig> LoadPreprocessConfig(const std::string& path) {
  StatusOr<std::string> text = ReadFileBounded(path, kMaxConfigFileBytes, "image");
  if (!text.ok()) return text.status();
  return ParsePreprocessConfig(*text, path);
}

Tensor Preprocess(const Image& image, const PreprocessConfig& config) {
  OCULAR_CHECK(config.Validate().ok());
  const Image resized =
      config.do_resize ? Resize(image, config.width, config.height, config.resample) : image;
  const int h = resized.height, w = resized.width;
  Tensor out(Shape{3, h, w});
  for (int c = 0; c < 3; ++c) {
    // numpy: mean/std become float32 arrays of the image's dtype; the arithmetic is float32.
    const float mean = static_cast<float>(config.image_mean[c]);
    const float std = static_cast<float>(config.image_std[c]);
    float* plane = out.data.data() + static_cast<size_t>(c) * h * w;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        const uint8_t v = resized.pixel(x, y)[c];
        // rescale(): image.astype(float64) * scale, then astype(float32).
        float value = config.do_rescale
                          ? static_cast<float>(static_cast<double>(v) * config.rescale_factor)
                          : static_cast<float>(v);
        if (config.do_normalize) value = (value - mean) / std;
        plane[static_cast<size_t>(y) * w + x] = value;
      }
    }
  }
  return out;
}

StatusOr<Tensor> PreprocessSquare(const Image& image, const PreprocessConfig& config, int size,
                                  const char* component) {
  Tensor px = Preprocess(image, config);
  if (px.numel() != 3 * int64_t{size} * size) {
    return Error(StatusCode::kInvalidArgument, component, "preprocessor_config.json resizes to ",
                 ShapeString(px.shape), " but the vision tower expects ", size, "x", size);
  }
  return px;
}

}  // namespace ocular

// libFuzzer target: ParsePreprocessConfig on arbitrary text; a config that parses must validate
// and, when its output is small, preprocess a tiny image to finite values of the right shape.
// Seeds: testdata/images/configs/*.json and testdata/tiny/*/preprocessor_config.json.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "image/preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = ocular::ParsePreprocessConfig(text, "fuzz/preprocessor_config.json");
  if (!config.ok()) return 0;
  if (!config->Validate().ok()) std::abort();
  if (int64_t{config->width} * config->height > 4096) return 0;  // keep runs fast
  ocular::Image image(5, 3);
  for (size_t i = 0; i < image.rgb.size(); ++i) image.rgb[i] = static_cast<uint8_t>(i * 37);
  const ocular::Tensor t = ocular::Preprocess(image, *config);
  const int64_t h = config->do_resize ? config->height : image.height;
  const int64_t w = config->do_resize ? config->width : image.width;
  if (t.shape != ocular::Shape{3, h, w}) std::abort();
  return 0;
}

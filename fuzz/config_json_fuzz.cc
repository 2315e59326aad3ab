// libFuzzer target: ParsePaliGemmaConfig on arbitrary text. Whatever parses must pass its own
// Validate() and have sizes inside the limits the engine relies on (no allocation from an
// unchecked size). Seeds: testdata/tiny/*/config.json.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "models/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = ocular::ParsePaliGemmaConfig(text, "fuzz/config.json");
  if (!config.ok()) {
    if (config.status().message().size() > 1000) std::abort();  // errors stay short
    return 0;
  }
  const ocular::PaliGemmaConfig& c = *config;
  if (!c.Validate().ok()) std::abort();
  if (c.text.num_hidden_layers < 1 || c.text.num_hidden_layers > 1024) std::abort();
  if (c.text.is_gemma2() && c.text.layer_is_sliding.size() != size_t(c.text.num_hidden_layers)) {
    std::abort();
  }
  if (c.image_tokens() <= 0 || !(c.text.attention_scale() > 0)) std::abort();
  return 0;
}

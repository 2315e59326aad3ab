// The image processor's resize bounds a caller may set: Qwen2VLImageProcessor's min_pixels /
// max_pixels (transformers' `min_pixels=` / `max_pixels=`, vLLM's mm_processor_kwargs). Only
// the Qwen-VL families take them; every other family refuses them (kInvalidArgument), never
// ignores them.
#pragma once

#include <cstdint>

namespace ocular {

struct ImageResize {
  // 0: the checkpoint's (preprocessor_config.json min_pixels / max_pixels or size), or, for a
  // request, the bounds the engine was loaded with.
  int64_t min_pixels = 0;
  int64_t max_pixels = 0;

  bool empty() const { return min_pixels == 0 && max_pixels == 0; }
};

}  // namespace ocular

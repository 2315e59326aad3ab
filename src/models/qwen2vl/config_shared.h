// The config.json readers Qwen2-VL / Qwen2.5-VL (config.cc) and Qwen3-VL (config3.cc) share:
// their configs name these fields alike (transformers 4.57.1 configuration_qwen2_vl.py,
// configuration_qwen3_vl.py). Internal to the two config readers.
#pragma once

#include <array>
#include <initializer_list>
#include <string>
#include <utility>

#include "models/config_section.h"

namespace ocular::qwen2vl::config_shared {

using config_internal::Json;
using config_internal::Section;

// The patch grid and heads of vision_config: num_heads, in_channels, patch_size,
// spatial_merge_size, temporal_patch_size.
template <typename VisionConfig>
Status ParsePatchGrid(const Section& s, VisionConfig* c) {
  using namespace config_internal;  // NOLINT: the bounds
  OCULAR_RETURN_IF_ERROR(s.Int("num_heads", 1, kMaxHeads, &c->num_heads));
  OCULAR_RETURN_IF_ERROR(s.Int("in_channels", 1, 16, &c->in_channels));
  OCULAR_RETURN_IF_ERROR(s.Int("patch_size", 1, 1024, &c->patch_size));
  OCULAR_RETURN_IF_ERROR(s.Int("spatial_merge_size", 1, 64, &c->spatial_merge_size));
  return s.Int("temporal_patch_size", 1, 64, &c->temporal_patch_size);
}

// The rules both ViTs share: `width` (vision_config's `width_key`) is a whole number of heads
// of a size divisible by 4 (the 2-D rotary); the input is RGB.
inline Status CheckVitShape(const char* width_key, int width, int num_heads, int in_channels) {
  const config_internal::RuleError fail("vision_config");
  if (width % num_heads != 0 || (width / num_heads) % 4 != 0) {
    return fail(width_key, " (", width, ") / num_heads (", num_heads,
                ") must be a whole head size divisible by 4 (the 2-D rotary)");
  }
  if (in_channels != 3) return fail(StatusCode::kUnimplemented, "in_channels must be 3 (RGB)");
  return Status::Ok();
}

// layer_types, when present, lists full_attention only.
Status FullAttentionOnly(const Section& s);

// The decoder's fields: a SwiGLU MLP, no sliding windows (Qwen2VLDecoderLayer: sliding windows
// are not implemented for eager attention; transformers warns and then masks sliding layers
// anyway: refused rather than guessed), no dropout, the sizes (num_key_value_heads defaults to
// num_attention_heads), eos_token_id, and layer_types of full_attention only.
template <typename TextConfig>
Status ParseText(const Section& s, TextConfig* c) {
  OCULAR_RETURN_IF_ERROR(
      s.RequireDefault("hidden_act", "silu", "the MLP is SwiGLU: silu(gate) * up"));
  OCULAR_RETURN_IF_ERROR(
      s.RequireDefault("use_sliding_window", false, "every layer attends to the whole context"));
  OCULAR_RETURN_IF_ERROR(s.RequireDefault("attention_dropout", 0.0, "inference has no dropout"));
  OCULAR_RETURN_IF_ERROR(config_internal::ParseDecoderSizes(s, c, /*kv_heads_default_heads=*/true));
  OCULAR_RETURN_IF_ERROR(config_internal::TokenId(s, "eos_token_id", &c->eos_token_id));
  return FullAttentionOnly(s);
}

// The top level's dtype (informational) and the four vision token ids.
template <typename Config>
Status ParseTop(const Section& top, Config* c) {
  OCULAR_RETURN_IF_ERROR(top.TorchDtype(&c->torch_dtype));
  for (auto [key, id] : {std::pair{"image_token_id", &c->image_token_id},
                         std::pair{"video_token_id", &c->video_token_id},
                         std::pair{"vision_start_token_id", &c->vision_start_token_id},
                         std::pair{"vision_end_token_id", &c->vision_end_token_id}}) {
    OCULAR_RETURN_IF_ERROR(config_internal::TokenId(top, key, id));
  }
  return Status::Ok();
}

// The vision and text configs' own rules (their Validate), then the token ids: the four
// vision tokens and text_config.eos_token_id inside the vocabulary.
template <typename Config>
Status ValidateParts(const Config& c) {
  OCULAR_RETURN_IF_ERROR(c.vision.Validate());
  OCULAR_RETURN_IF_ERROR(c.text.Validate());
  const int vocab = c.text.vocab_size;
  for (int id :
       {c.image_token_id, c.video_token_id, c.vision_start_token_id, c.vision_end_token_id}) {
    if (id >= vocab) {
      return Error(StatusCode::kDataLoss, "config", "the vision token id ", id,
                   " is past the vocabulary (", vocab, ")");
    }
  }
  if (c.text.eos_token_id >= vocab) {
    return Error(StatusCode::kDataLoss, "config", "text_config: eos_token_id (",
                 c.text.eos_token_id, ") is past the vocabulary (", vocab, ")");
  }
  return Status::Ok();
}

// rope_scaling.mrope_section: 3 integers in [min, 4096] into `out`; absent is an error when
// `required`, else keeps `out`.
Status ParseMropeSection(const Section& s, const Section& r, int min, bool required,
                         std::array<int, 3>* out);

// Refuses a rope_scaling key other than `known`.
Status KnownRopeKeys(const Section& s, const Json& rs, std::initializer_list<const char*> known);

}  // namespace ocular::qwen2vl::config_shared

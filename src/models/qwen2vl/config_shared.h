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
  OCULAR_RETURN_IF_ERROR(top.String("torch_dtype", &c->torch_dtype));
  OCULAR_RETURN_IF_ERROR(top.String("dtype", &c->torch_dtype));
  for (auto [key, id] : {std::pair{"image_token_id", &c->image_token_id},
                         std::pair{"video_token_id", &c->video_token_id},
                         std::pair{"vision_start_token_id", &c->vision_start_token_id},
                         std::pair{"vision_end_token_id", &c->vision_end_token_id}}) {
    OCULAR_RETURN_IF_ERROR(config_internal::TokenId(top, key, id));
  }
  return Status::Ok();
}

// The four vision token ids are inside the vocabulary.
template <typename Config>
Status CheckTokenIds(const Config& c) {
  for (int id :
       {c.image_token_id, c.video_token_id, c.vision_start_token_id, c.vision_end_token_id}) {
    if (id >= c.text.vocab_size) {
      return Error(StatusCode::kDataLoss, "config", "the vision token id ", id,
                   " is past the vocabulary (", c.text.vocab_size, ")");
    }
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

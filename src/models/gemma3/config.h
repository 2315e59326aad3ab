// Gemma 3 configuration: plain data mirroring HF config.json field names and transformers
// 4.57's defaults (models/gemma3/configuration_gemma3.py).
//   model_type "gemma3_text"  Gemma3ForCausalLM: the text decoder alone (config.json is the
//                             Gemma3TextConfig itself)
//   model_type "gemma3"       Gemma3ForConditionalGeneration: SigLIP + projector + decoder
#pragma once

#include <string>
#include <vector>

#include "core/file_set.h"
#include "models/config.h"
#include "ocular/status.h"

namespace ocular::gemma3 {

// Gemma3TextConfig. The shared Gemma fields live in `gemma` (model_type "gemma3_text"), so
// the Gemma blocks of models/layers.h (GeGLU MLP, workspace sizing) take it as they are.
struct Gemma3TextConfig {
  GemmaTextConfig gemma;  // hidden/heads/head_dim/MLP/eps, sliding_window, layer_is_sliding,
                          // query_pre_attn_scalar, softcaps (0 = null)
  float rope_local_base_freq = 10000.0f;  // RoPE base of the sliding layers
  float rope_scaling_factor = 1.0f;       // rope_scaling {"rope_type": "linear"}; global layers
  int pad_token_id = 0, bos_token_id = 2, eos_token_id = 1;
  std::vector<int> eos_token_ids = {1};  // every id of eos_token_id (generate() stops on each)

  // query_pre_attn_scalar ** -0.5 (Gemma3Attention.scaling).
  float attention_scale() const;
  Status Validate() const;
};

struct Gemma3Config {
  std::string model_type;   // "gemma3" or "gemma3_text"
  std::string torch_dtype;  // informational
  Gemma3TextConfig text;
  // Vision (model_type "gemma3" only).
  bool has_vision = false;
  SiglipVisionConfig vision;
  int mm_tokens_per_image = 256;
  int boi_token_index = 255999, eoi_token_index = 256000, image_token_index = 262144;

  // Projector: patches_per_image // tokens_per_side (Gemma3MultiModalProjector).
  int tokens_per_side() const;
  int pool_kernel() const { return vision.image_size / vision.patch_size / tokens_per_side(); }
  Status Validate() const;
};

// Parses config.json text (either model_type). Errors as ParsePaliGemmaConfig (config.h):
// kDataLoss malformed/inconsistent, kResourceExhausted over ocular's limits, kUnimplemented a
// key at a value ocular does not implement (rope_scaling other than linear, attention_bias,
// use_bidirectional_attention, an mm_tokens_per_image that does not pool evenly, ...).
StatusOr<Gemma3Config> ParseGemma3Config(const std::string& json_text, const std::string& source);
StatusOr<Gemma3Config> LoadGemma3Config(const FileSet& files);

}  // namespace ocular::gemma3

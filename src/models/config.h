// Model configuration: plain data mirroring HF config.json field names, with transformers'
// defaults for absent fields (transformers 4.57: configuration_paligemma.py,
// configuration_siglip.py, configuration_gemma.py, configuration_gemma2.py).
#pragma once

#include <string>
#include <vector>

#include "core/file_set.h"
#include "ocular/status.h"

namespace ocular {

enum class Activation { kGeluTanh, kGeluErf };

// The sizes every family's decoder config names alike (LlamaConfig's fields; read by
// config_section.h ParseDecoderSizes). A family's text config derives from it and gives its
// transformers defaults in this order: DecoderSizes{vocab_size, hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, max_position_embeddings[,
// rms_norm_eps, rope_theta]}.
struct DecoderSizes {
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
};

struct SiglipVisionConfig {
  int hidden_size = 768;
  int intermediate_size = 3072;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int num_channels = 3;
  int image_size = 224;
  int patch_size = 16;
  float layer_norm_eps = 1e-6f;
  Activation hidden_act = Activation::kGeluTanh;
  bool vision_use_head = false;

  int head_dim() const { return hidden_size / num_attention_heads; }
  int num_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
  // Sizes in range and consistent (hidden_size divisible by heads, image_size by patch_size).
  Status Validate() const;
};

// Gemma (model_type "gemma") and Gemma 2 ("gemma2") decoders.
struct GemmaTextConfig : DecoderSizes {
  GemmaTextConfig() : DecoderSizes{256000, 3072, 24576, 28, 16, 16, 8192, 1e-6f, 10000.0f} {}

  std::string model_type = "gemma";
  int head_dim = 256;
  Activation hidden_act = Activation::kGeluTanh;
  // Gemma 2 only (0 = absent/disabled).
  float query_pre_attn_scalar = 0;  // attention scale = query_pre_attn_scalar^-1/2
  int sliding_window = 0;
  float attn_logit_softcapping = 0;
  float final_logit_softcapping = 0;
  std::vector<bool> layer_is_sliding;  // per layer, from layer_types

  bool is_gemma2() const { return model_type == "gemma2"; }
  float attention_scale() const;
  Status Validate() const;
};

struct PaliGemmaConfig {
  std::string torch_dtype;  // informational ("float32", "bfloat16")
  int image_token_index = 256000;
  int vocab_size = 257152;
  int projection_dim = 2048;
  int pad_token_id = 0, bos_token_id = 2, eos_token_id = 1;
  SiglipVisionConfig vision;
  GemmaTextConfig text;

  int image_tokens() const { return vision.num_patches(); }
  Status Validate() const;
};

// Parses config.json text and validates it before anything is sized from it. `source` names
// the file in errors, which also name the key ("text_config.num_hidden_layers") or the rule:
//   kDataLoss          malformed JSON (with line and column), a wrong type, a value below its
//                      minimum, an inconsistency between fields (exit 4)
//   kResourceExhausted a size above ocular's limits, e.g. more than 1024 layers (exit 6)
//   kUnimplemented     another architecture, or a key that changes the math at a value ocular
//                      does not implement: attention_bias, mlp_bias, rope_scaling,
//                      use_bidirectional_attention, partial_rotary_factor, a non-GELU
//                      activation, vision_use_head (exit 5; docs/models.md §8)
StatusOr<PaliGemmaConfig> ParsePaliGemmaConfig(const std::string& json_text,
                                               const std::string& source);
// Reads <model_dir>/config.json (bounded, regular files only) and parses it.
StatusOr<PaliGemmaConfig> LoadPaliGemmaConfig(const std::string& model_dir);
// The same from a directory's or a GGUF file's config.json.
StatusOr<PaliGemmaConfig> LoadPaliGemmaConfig(const FileSet& files);

}  // namespace ocular

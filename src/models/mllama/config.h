// Llama 3.2 Vision (model_type "mllama") configuration: plain data mirroring HF config.json
// field names and transformers 4.57's defaults (models/mllama/configuration_mllama.py).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/file_set.h"
#include "models/config.h"
#include "ocular/status.h"

namespace ocular::mllama {

// MllamaVisionConfig (vision_config).
struct VisionConfig {
  int hidden_size = 1280;
  Activation hidden_act = Activation::kGeluErf;  // "gelu"
  int num_hidden_layers = 32;                    // local encoder
  int num_global_layers = 8;                     // gated global encoder
  int num_attention_heads = 16;                  // saved as "attention_heads" too
  int num_channels = 3;
  int intermediate_size = 5120;
  int vision_output_dim = 7680;  // hidden_size * (1 + intermediate_layers_indices.size())
  int image_size = 448;          // the tile side in pixels
  int patch_size = 14;
  float norm_eps = 1e-5f;  // encoder layers' LayerNorms (layernorm_pre/post use torch's 1e-5)
  int max_num_tiles = 4;
  std::vector<int> intermediate_layers_indices = {3, 7, 15, 23, 30};
  std::vector<std::pair<int, int>> supported_aspect_ratios;  // (tiles high, tiles wide)

  int grid() const { return image_size / patch_size; }
  int patches() const { return grid() * grid() + 1; }             // + class token
  int padded_patches() const { return (patches() + 7) / 8 * 8; }  // MllamaVisionModel pads to 8
  int head_dim() const { return hidden_size / num_attention_heads; }
  int max_aspect_ratio_id() const { return static_cast<int>(supported_aspect_ratios.size()); }
  Status Validate() const;
};

// MllamaTextConfig (text_config).
// vocab_size: rows of lm_head; embed_tokens has vocab_size + 8.
struct TextConfig : DecoderSizes {
  TextConfig() : DecoderSizes{128256, 4096, 14336, 40, 32, 8, 131072, 1e-5f, 500000.0f} {}

  std::vector<int> cross_attention_layers = {3, 8, 13, 18, 23, 28, 33, 38};
  // rope_scaling {"rope_type": "llama3", ...}; factor 0 = no scaling (null / "default").
  float rope_factor = 0, low_freq_factor = 1, high_freq_factor = 4;
  int original_max_position_embeddings = 8192;
  int bos_token_id = 128000, eos_token_id = 128001, pad_token_id = 128004;
  std::vector<int> eos_token_ids;  // every id of a list (Instruct: 128001, 128008, 128009)

  int head_dim() const { return hidden_size / num_attention_heads; }
  bool IsCross(int layer) const;
  Status Validate() const;
};

struct MllamaConfig {
  std::string torch_dtype;  // informational
  VisionConfig vision;
  TextConfig text;
  int image_token_index = 128256;
  Status Validate() const;
};

// get_all_supported_aspect_ratios(max_image_tiles) of image_processing_mllama.py: every
// (a, b) with a * b <= max_tiles, a outer; the canvas is a tiles high and b wide.
std::vector<std::pair<int, int>> SupportedAspectRatios(int max_tiles);

// Parses config.json text. Errors as the other families' configs: kDataLoss malformed or
// inconsistent, kResourceExhausted over ocular's limits, kUnimplemented a value ocular does not
// implement (a rope_scaling other than llama3, tied embeddings, a patch count that needs no
// padding — HF's vision mask then masks everything —, aspect ratios not from max_num_tiles).
StatusOr<MllamaConfig> ParseMllamaConfig(const std::string& json_text, const std::string& source);
StatusOr<MllamaConfig> LoadMllamaConfig(const FileSet& files);

}  // namespace ocular::mllama

// Qwen2-VL (model_type "qwen2_vl") and Qwen2.5-VL ("qwen2_5_vl") configuration: plain data
// mirroring HF config.json field names and transformers 4.57's defaults
// (models/qwen2_vl/configuration_qwen2_vl.py, models/qwen2_5_vl/configuration_qwen2_5_vl.py).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/file_set.h"
#include "models/config.h"
#include "ocular/status.h"

namespace ocular::qwen2vl {

// Qwen2VLVisionConfig / Qwen2_5_VLVisionConfig (vision_config), in Qwen2-VL's names: Qwen2.5-VL's
// hidden_size is embed_dim here, its out_hidden_size hidden_size.
struct VisionConfig {
  int depth = 32;
  int embed_dim = 1280;
  int hidden_size = 3584;     // the merger's output: the text hidden size
  float mlp_ratio = 4;        // Qwen2-VL: the MLP is int(embed_dim * mlp_ratio) wide
  int intermediate_size = 0;  // Qwen2.5-VL: the SwiGLU MLP's width
  int num_heads = 16;
  int in_channels = 3;
  int patch_size = 14;
  int spatial_merge_size = 2;
  int temporal_patch_size = 2;
  // Qwen2.5-VL: RMSNorm + SwiGLU blocks, window attention over windows of window_size pixels
  // (window_size / merge / patch merged patches a side) but in fullatt_block_indexes.
  bool qwen25 = false;
  int window_size = 112;
  std::vector<int> fullatt_block_indexes = {7, 15, 23, 31};

  int head_dim() const { return embed_dim / num_heads; }
  int mlp_dim() const {
    return qwen25 ? intermediate_size
                  : static_cast<int>(embed_dim * static_cast<double>(mlp_ratio));
  }
  // Merged patches per window side (vit_merger_window_size).
  int window_merged() const { return window_size / spatial_merge_size / patch_size; }
  bool full_attention(int block) const;
  int patch_floats() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  int merge_rows() const { return spatial_merge_size * spatial_merge_size; }
  Status Validate() const;
};

// Qwen2VLTextConfig (text_config, or the top level of older config.json files).
// vocab_size: rows of embed_tokens and lm_head (past the tokenizer's ids).
struct TextConfig : DecoderSizes {
  TextConfig() : DecoderSizes{152064, 8192, 29568, 80, 64, 8, 32768, 1e-5f, 1000000.0f} {}

  std::array<int, 3> mrope_section = {16, 24, 24};  // rope_scaling.mrope_section (required)
  int eos_token_id = -1;

  int head_dim() const { return hidden_size / num_attention_heads; }
  Status Validate() const;
};

// The top level every Qwen-VL config.json shares: the two sub-configs, the tying, the vision
// token ids (the released checkpoints' values as defaults).
template <typename Vision, typename Text>
struct QwenVLConfigBase {
  std::string model_type;
  std::string torch_dtype;  // informational
  Vision vision;
  Text text;
  bool tie_word_embeddings = false;
  int image_token_id = 151655;
  int video_token_id = 151656;
  int vision_start_token_id = 151652;
  int vision_end_token_id = 151653;
};

// model_type "qwen2_vl" or "qwen2_5_vl".
struct Qwen2VLConfig : QwenVLConfigBase<VisionConfig, TextConfig> {
  bool qwen25() const { return vision.qwen25; }
  Status Validate() const;
};

// Parses config.json text (model_type qwen2_vl or qwen2_5_vl). Errors: kDataLoss malformed or
// inconsistent, kResourceExhausted over ocular's limits, kUnimplemented a value ocular does not
// implement (use_sliding_window, rope_scaling other than M-RoPE's default, an activation other than
// QuickGELU / SiLU).
StatusOr<Qwen2VLConfig> ParseQwen2VLConfig(const std::string& json_text, const std::string& source);
StatusOr<Qwen2VLConfig> LoadQwen2VLConfig(const FileSet& files);

}  // namespace ocular::qwen2vl

// Qwen3-VL (model_type "qwen3_vl", the dense models) configuration: plain data mirroring HF
// config.json field names and transformers 4.57.1's defaults
// (models/qwen3_vl/configuration_qwen3_vl.py: Qwen3VLVisionConfig, Qwen3VLTextConfig,
// Qwen3VLConfig). The MoE variant (qwen3_vl_moe) and videos are not implemented.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/file_set.h"
#include "models/qwen2vl/config.h"
#include "ocular/status.h"

namespace ocular::qwen2vl {

// Qwen3VLVisionConfig: a LayerNorm + gelu_pytorch_tanh ViT with a learned position table of
// num_position_embeddings (a square grid) interpolated to each image, the 2-D rotary of
// Qwen2-VL, and DeepStack mergers after the blocks of deepstack_visual_indexes.
struct Vision3Config {
  int depth = 27;
  int hidden_size = 1152;  // the ViT's width (D)
  int intermediate_size = 4304;
  int num_heads = 16;
  int in_channels = 3;
  int patch_size = 16;
  int spatial_merge_size = 2;
  int temporal_patch_size = 2;
  int out_hidden_size = 3584;  // the mergers' output: the text hidden size
  int num_position_embeddings = 2304;
  std::vector<int> deepstack_visual_indexes = {8, 16, 24};

  int head_dim() const { return hidden_size / num_heads; }
  int grid_per_side() const;  // int(num_position_embeddings ** 0.5)
  int patch_floats() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  int merge_rows() const { return spatial_merge_size * spatial_merge_size; }
  int deepstack() const { return static_cast<int>(deepstack_visual_indexes.size()); }
  Status Validate() const;
};

// Qwen3VLTextConfig: the Qwen3 decoder (q/k RMSNorm per head, explicit head_dim,
// attention_bias) with interleaved M-RoPE.
struct Text3Config : DecoderSizes {
  Text3Config() : DecoderSizes{151936, 4096, 22016, 32, 32, 32, 128000, 1e-6f, 5000000.0f} {}

  int head_dim = 128;
  bool attention_bias = false;
  std::array<int, 3> mrope_section = {24, 20, 20};  // rope_scaling.mrope_section
  int eos_token_id = -1;

  Status Validate() const;
};

struct Qwen3VLConfig : QwenVLConfigBase<Vision3Config, Text3Config> {
  Qwen3VLConfig() { model_type = "qwen3_vl"; }

  Status Validate() const;
  // The fields Qwen2VLProcessor reads (token ids, patch geometry), as a Qwen2-VL config.
  Qwen2VLConfig ProcessorConfig() const;
};

// Parses config.json text (model_type qwen3_vl). Errors: kDataLoss malformed or inconsistent,
// kResourceExhausted over ocular's limits, kUnimplemented a value ocular does not implement
// (qwen3_vl_moe, an activation other than gelu_pytorch_tanh / silu, rope_scaling other than
// interleaved M-RoPE with default frequencies, sliding windows).
StatusOr<Qwen3VLConfig> ParseQwen3VLConfig(const std::string& json_text, const std::string& source);
StatusOr<Qwen3VLConfig> LoadQwen3VLConfig(const FileSet& files);

}  // namespace ocular::qwen2vl

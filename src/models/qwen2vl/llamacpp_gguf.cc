#include "models/qwen2vl/llamacpp_gguf.h"

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "io/gguf_bpe_vocab.h"
#include "io/gguf_meta.h"
#include "io/mmproj.h"

namespace ocular::qwen2vl {

namespace {

using json = nlohmann::ordered_json;

// Any key but general.* and tokenizer.* (the vocabulary's reader checks those).
bool ModelKey(std::string_view key) {
  return !key.starts_with("general.") && !key.starts_with("tokenizer.");
}

Status CheckKeys(const GgufMeta& g) {
  // The qwen2vl.* keys convert_hf_to_gguf.py writes (TextModel.set_gguf_parameters for
  // MODEL_ARCH.QWEN2VL), all read below.
  static const GgufKeys keys = LlmKeys("qwen2vl", {"rope.dimension_sections"});
  return g.CheckKeys(keys, ModelKey, "llama.cpp's Qwen2-VL files");
}

// rope.dimension_sections: four i32, llama.cpp's M-RoPE sections (t, h, w, and a fourth that
// Qwen2-VL leaves 0); HF's mrope_section is the first three.
StatusOr<json> MropeSection(const GgufMeta& g) {
  const char* key = "qwen2vl.rope.dimension_sections";
  const GgufValue* v = g.file().Find(key);
  if (v == nullptr || v->type != GgufType::kArray || v->elem_type != GgufType::kI32 ||
      v->count != 4) {
    return g.Corrupt("metadata '", key, "' must be an array of 4 i32");
  }
  int32_t s[4];
  std::memcpy(s, v->elems, sizeof(s));
  if (s[3] != 0) return g.Refuse(key, "[3] = ", s[3], ": a fourth section is not implemented");
  return json::array({s[0], s[1], s[2]});
}

// Qwen2VLTextConfig from the text file.
StatusOr<json> TextConfigJson(const GgufMeta& g, const GgufVocab& vocab) {
  json c;
  // llama.cpp's default freq_base when the file has none: 10000
  OCULAR_RETURN_IF_ERROR(SetLlmConfig(g, "qwen2vl", 10000.0, &c));
  OCULAR_ASSIGN_OR_RETURN(json section, MropeSection(g));
  c["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", std::move(section)}};
  c["hidden_act"] = "silu";
  if (vocab.eos_id < 0) return g.Refuse("a vocabulary without an eos token");
  c["eos_token_id"] = vocab.eos_id;
  if (vocab.bos_id >= 0) c["bos_token_id"] = vocab.bos_id;
  // llama.cpp ties the output to token_embd when the file has no output.weight.
  c["tie_word_embeddings"] = g.file().FindTensor("output.weight") == nullptr;
  return c;
}

// The vision tower's common fields; `mlp` the MLP width from v.blk.0.ffn_up.
json VisionCommon(const MmprojVision& v, int64_t merge) {
  return {{"depth", v.num_layers},      {"num_heads", v.num_heads},    {"in_channels", 3},
          {"patch_size", v.patch_size}, {"spatial_merge_size", merge}, {"temporal_patch_size", 2}};
}

// Qwen2.5-VL's full-attention blocks: clip.cpp makes block il full iff (il + 1) % n == 0.
json FullAttentionBlocks(const MmprojVision& v) {
  json out = json::array();
  for (int64_t i = 0; i < v.num_layers; ++i) {
    if (v.n_wa_pattern > 0 && (i + 1) % v.n_wa_pattern == 0) out.push_back(i);
  }
  return out;
}

StatusOr<json> VisionConfigJson(const GgufFile& mmproj, const MmprojVision& v, bool qwen25) {
  // The MLP's width: v.blk.0.ffn_up.weight (ggml ne [D, Iv]).
  const GgufTensor* up = mmproj.FindTensor("v.blk.0.ffn_up.weight");
  if (up == nullptr || up->ne.size() != 2 || up->ne[0] != v.hidden_size) {
    return Error(StatusCode::kDataLoss, "mmproj", mmproj.origin(),
                 ": no tensor v.blk.0.ffn_up.weight of ", v.hidden_size, " columns");
  }
  const int64_t mlp = up->ne[1];
  if (!(v.layer_norm_eps > 0.99e-6 && v.layer_norm_eps < 1.01e-6)) {
    return Error(StatusCode::kUnimplemented, "mmproj", mmproj.origin(),
                 ": clip.vision.attention.layer_norm_epsilon = ", v.layer_norm_eps,
                 " but transformers' Qwen-VL vision norms use 1e-6: not implemented");
  }
  json c = VisionCommon(v, v.spatial_merge_size > 0 ? v.spatial_merge_size : 2);
  if (qwen25) {
    if (v.n_wa_pattern == 0) {
      return Error(StatusCode::kDataLoss, "mmproj", mmproj.origin(),
                   ": no clip.vision.n_wa_pattern (qwen2.5vl_merger needs it)");
    }
    c["hidden_act"] = "silu";
    c["hidden_size"] = v.hidden_size;
    c["out_hidden_size"] = v.projection_dim;
    c["intermediate_size"] = mlp;
    c["window_size"] = v.window_size > 0 ? v.window_size : 112;  // clip.cpp's default
    c["fullatt_block_indexes"] = FullAttentionBlocks(v);
    return c;
  }
  if (mlp % v.hidden_size != 0) {
    return Error(StatusCode::kUnimplemented, "mmproj", mmproj.origin(), ": a vision MLP of ", mlp,
                 " is not a whole multiple of the width ", v.hidden_size,
                 " (Qwen2-VL's mlp_ratio)");
  }
  c["hidden_act"] = "quick_gelu";
  c["embed_dim"] = v.hidden_size;
  c["hidden_size"] = v.projection_dim;
  c["mlp_ratio"] = mlp / v.hidden_size;
  return c;
}

StatusOr<json> PairConfig(const GgufFile& text, const GgufFile& mmproj, const MmprojVision& v,
                          json text_config) {
  const int64_t hidden = text_config["hidden_size"].get<int64_t>();
  OCULAR_RETURN_IF_ERROR(CheckPair(text, mmproj, v, hidden, "qwen2vl"));
  const bool qwen25 = v.projector_type == "qwen2.5vl_merger";
  json c;
  c["architectures"] = {qwen25 ? "Qwen2_5_VLForConditionalGeneration"
                               : "Qwen2VLForConditionalGeneration"};
  c["model_type"] = qwen25 ? "qwen2_5_vl" : "qwen2_vl";
  c["tie_word_embeddings"] = text_config["tie_word_embeddings"];
  c["text_config"] = std::move(text_config);
  OCULAR_ASSIGN_OR_RETURN(c["vision_config"], VisionConfigJson(mmproj, v, qwen25));
  OCULAR_RETURN_IF_ERROR(GgufMeta(text).SetTokenIds({{"image_token_id", "<|image_pad|>"},
                                                     {"video_token_id", "<|video_pad|>"},
                                                     {"vision_start_token_id", "<|vision_start|>"},
                                                     {"vision_end_token_id", "<|vision_end|>"}},
                                                    "Qwen-VL", &c));
  return c;
}

// Qwen2VLImageProcessor: what the mmproj says, the rest as the released checkpoints'.
std::string PreprocessorJson(const MmprojVision& v) {
  json p;
  p["image_processor_type"] = "Qwen2VLImageProcessor";
  p["processor_class"] = "Qwen2VLProcessor";
  p["do_resize"] = true;
  p["min_pixels"] = 56 * 56;  // Qwen/Qwen2-VL-7B-Instruct's preprocessor_config.json
  p["max_pixels"] = 12845056;
  p["patch_size"] = v.patch_size;
  p["merge_size"] = v.spatial_merge_size > 0 ? v.spatial_merge_size : 2;
  p["temporal_patch_size"] = 2;
  p["resample"] = 3;  // PIL BICUBIC
  SetMmprojNormalization(v, &p);
  return p.dump(2);
}

}  // namespace

StatusOr<std::unique_ptr<FileSet>> LlamaCppFiles(const GgufFile& g, const GgufFile* mmproj) {
  OCULAR_RETURN_IF_ERROR(CheckKeys(GgufMeta(g)));
  if (mmproj == nullptr) {
    return GgufMeta(g).Refuse(
        "a Qwen2-VL text file runs with its vision encoder: give its mmproj file ", "(--mmproj)");
  }
  OCULAR_ASSIGN_OR_RETURN(GgufVocab vocab, ReadGgufBpeVocab(g));
  OCULAR_ASSIGN_OR_RETURN(json text_config, TextConfigJson(GgufMeta(g), vocab));
  OCULAR_ASSIGN_OR_RETURN(MmprojVision v, ReadMmproj(*mmproj, "qwen2vl"));
  OCULAR_ASSIGN_OR_RETURN(json config, PairConfig(g, *mmproj, v, std::move(text_config)));
  std::map<std::string, std::string, std::less<>> files;
  files["config.json"] = config.dump(2);
  files["preprocessor_config.json"] = PreprocessorJson(v);
  files["tokenizer.json"] = std::move(vocab.tokenizer_json);
  files["tokenizer_config.json"] = std::move(vocab.tokenizer_config_json);
  return std::unique_ptr<FileSet>(
      std::make_unique<MemoryFiles>(g.origin() + " + " + mmproj->origin(), std::move(files)));
}

}  // namespace ocular::qwen2vl

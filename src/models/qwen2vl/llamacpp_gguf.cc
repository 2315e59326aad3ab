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

// llama.cpp's text architectures of the family: "qwen2vl" (Qwen2-VL, Qwen2.5-VL), "qwen3vl"
// (Qwen3-VL, dense).
const char* Family(std::string_view arch) {
  return arch == "qwen3vl" ? "llama.cpp's Qwen3-VL files" : "llama.cpp's Qwen2-VL files";
}

Status CheckKeys(const GgufMeta& g, const std::string& arch) {
  // The <arch>.* keys convert_hf_to_gguf.py writes (TextModel.set_gguf_parameters for
  // MODEL_ARCH.QWEN2VL; Qwen3Model's and Qwen3VLTextModel's for MODEL_ARCH.QWEN3VL), all read
  // below.
  static const GgufKeys qwen2 = LlmKeys("qwen2vl", {"rope.dimension_sections"});
  static const GgufKeys qwen3 =
      LlmKeys("qwen3vl", {"rope.dimension_sections", "attention.key_length",
                          "attention.value_length", "n_deepstack_layers"});
  return g.CheckKeys(arch == "qwen3vl" ? qwen3 : qwen2, ModelKey, Family(arch));
}

// rope.dimension_sections: four i32, llama.cpp's M-RoPE sections (t, h, w, and a fourth that
// Qwen-VL leaves 0); HF's mrope_section is the first three.
StatusOr<json> MropeSection(const GgufMeta& g, const std::string& arch) {
  const std::string key = arch + ".rope.dimension_sections";
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

// Qwen3VLTextConfig's own fields: head_dim (attention.key_length, which value_length must
// equal; hidden / heads when absent, as llama.cpp), attention_bias (the file has q biases),
// interleaved M-RoPE (llama.cpp's LLM_ARCH_QWEN3VL always interleaves, as
// Qwen3VLTextRotaryEmbedding).
Status SetQwen3Text(const GgufMeta& g, json section, json* c) {
  const int64_t heads = (*c)["num_attention_heads"].get<int64_t>();
  int64_t head_dim = (*c)["hidden_size"].get<int64_t>() / heads;
  if (g.file().Find("qwen3vl.attention.key_length") != nullptr) {
    OCULAR_ASSIGN_OR_RETURN(head_dim, g.Required("qwen3vl.attention.key_length", 4096));
  }
  if (g.file().Find("qwen3vl.attention.value_length") != nullptr) {
    OCULAR_ASSIGN_OR_RETURN(const int64_t v, g.Required("qwen3vl.attention.value_length", 4096));
    if (v != head_dim) {
      return g.Refuse("qwen3vl.attention.value_length = ", v, " differs from the key length ",
                      head_dim, ": not implemented (Qwen3's head_dim is both)");
    }
  }
  (*c)["head_dim"] = head_dim;
  (*c)["attention_bias"] = g.file().FindTensor("blk.0.attn_q.bias") != nullptr;
  (*c)["rope_scaling"] = {
      {"rope_type", "default"}, {"mrope_section", std::move(section)}, {"mrope_interleaved", true}};
  return Status::Ok();
}

// Qwen2VLTextConfig / Qwen3VLTextConfig from the text file.
StatusOr<json> TextConfigJson(const GgufMeta& g, const std::string& arch, const GgufVocab& vocab) {
  json c;
  // llama.cpp's default freq_base when the file has none: 10000
  OCULAR_RETURN_IF_ERROR(SetLlmConfig(g, arch, 10000.0, &c));
  OCULAR_ASSIGN_OR_RETURN(json section, MropeSection(g, arch));
  if (arch == "qwen3vl") {
    OCULAR_RETURN_IF_ERROR(SetQwen3Text(g, std::move(section), &c));
  } else {
    c["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", std::move(section)}};
  }
  c["hidden_act"] = "silu";
  if (vocab.eos_id < 0) return g.Refuse("a vocabulary without an eos token");
  c["eos_token_id"] = vocab.eos_id;
  if (vocab.bos_id >= 0) c["bos_token_id"] = vocab.bos_id;
  // llama.cpp ties the output to token_embd when the file has no output.weight.
  c["tie_word_embeddings"] = g.file().FindTensor("output.weight") == nullptr;
  return c;
}

// Qwen2.5-VL's full-attention blocks: clip.cpp makes block il full iff (il + 1) % n == 0.
json FullAttentionBlocks(const MmprojVision& v) {
  json out = json::array();
  for (int64_t i = 0; i < v.num_layers; ++i) {
    if (v.n_wa_pattern > 0 && (i + 1) % v.n_wa_pattern == 0) out.push_back(i);
  }
  return out;
}

// The rows of the 2-D tensor `name` of `mmproj` whose columns must be `cols` (ggml ne [cols,
// rows]).
StatusOr<int64_t> Rows(const GgufFile& mmproj, const char* name, int64_t cols) {
  const GgufTensor* t = mmproj.FindTensor(name);
  if (t == nullptr || t->ne.size() != 2 || t->ne[0] != cols) {
    return Error(StatusCode::kDataLoss, "mmproj", mmproj.origin(), ": no tensor ", name, " of ",
                 cols, " columns");
  }
  return t->ne[1];
}

// The ViT's common fields; kUnimplemented for a norm epsilon transformers does not use.
StatusOr<json> VisionCommon(const GgufFile& mmproj, const MmprojVision& v) {
  if (!(v.layer_norm_eps > 0.99e-6 && v.layer_norm_eps < 1.01e-6)) {
    return Error(StatusCode::kUnimplemented, "mmproj", mmproj.origin(),
                 ": clip.vision.attention.layer_norm_epsilon = ", v.layer_norm_eps,
                 " but transformers' Qwen-VL vision norms use 1e-6: not implemented");
  }
  const int64_t merge = v.spatial_merge_size > 0 ? v.spatial_merge_size : 2;  // clip.cpp's
  return json{
      {"depth", v.num_layers},      {"num_heads", v.num_heads},    {"in_channels", 3},
      {"patch_size", v.patch_size}, {"spatial_merge_size", merge}, {"temporal_patch_size", 2}};
}

// Qwen3VLVisionConfig: the position table's size from v.position_embd's rows (a square of
// clip.vision.image_size / patch_size per side, as the converter derives image_size from it),
// DeepStack from clip.vision.is_deepstack_layers.
StatusOr<json> Vision3ConfigJson(const GgufFile& mmproj, const MmprojVision& v) {
  OCULAR_ASSIGN_OR_RETURN(json c, VisionCommon(mmproj, v));
  OCULAR_ASSIGN_OR_RETURN(const int64_t positions,
                          Rows(mmproj, "v.position_embd.weight", v.hidden_size));
  const int64_t side = v.image_size / v.patch_size;
  if (v.image_size % v.patch_size != 0 || side * side != positions) {
    return Error(StatusCode::kDataLoss, "mmproj", mmproj.origin(), ": v.position_embd.weight has ",
                 positions, " rows but clip.vision.image_size / patch_size = ", v.image_size, " / ",
                 v.patch_size, " makes a table of ", side, "x", side);
  }
  c["hidden_act"] = "gelu_pytorch_tanh";
  c["hidden_size"] = v.hidden_size;
  c["intermediate_size"] = v.intermediate_size;
  c["out_hidden_size"] = v.projection_dim;
  c["num_position_embeddings"] = positions;
  c["deepstack_visual_indexes"] = v.deepstack_layers;
  return c;
}

StatusOr<json> VisionConfigJson(const GgufFile& mmproj, const MmprojVision& v, bool qwen25) {
  // The MLP's width: v.blk.0.ffn_up.weight (ggml ne [D, Iv]).
  OCULAR_ASSIGN_OR_RETURN(const int64_t mlp, Rows(mmproj, "v.blk.0.ffn_up.weight", v.hidden_size));
  OCULAR_ASSIGN_OR_RETURN(json c, VisionCommon(mmproj, v));
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

// Qwen3-VL: the text file's n_deepstack_layers must be the mmproj's DeepStack count (llama.cpp
// splits the image embedding into 1 + n parts by it).
Status CheckDeepstack(const GgufFile& text, const GgufFile& mmproj, const MmprojVision& v) {
  // GetUint: kNotFound when absent (the converter always writes it)
  OCULAR_ASSIGN_OR_RETURN(const uint64_t n, text.GetUint("qwen3vl.n_deepstack_layers"));
  if (n == v.deepstack_layers.size()) return Status::Ok();
  return Error(
      StatusCode::kUnimplemented, "mmproj", mmproj.origin(), ": ", v.deepstack_layers.size(),
      " DeepStack blocks (clip.vision.is_deepstack_layers) but ", text.origin(),
      " has qwen3vl.n_deepstack_layers = ", n, ": this mmproj file belongs to another model");
}

StatusOr<json> PairConfig(const GgufFile& text, const GgufFile& mmproj, const MmprojVision& v,
                          const std::string& arch, json text_config) {
  const int64_t hidden = text_config["hidden_size"].get<int64_t>();
  OCULAR_RETURN_IF_ERROR(CheckPair(text, mmproj, v, hidden, arch));
  const bool qwen3 = arch == "qwen3vl";
  const bool qwen25 = v.projector_type == "qwen2.5vl_merger";
  json c;
  if (qwen3) {
    OCULAR_RETURN_IF_ERROR(CheckDeepstack(text, mmproj, v));
    c["architectures"] = {"Qwen3VLForConditionalGeneration"};
    c["model_type"] = "qwen3_vl";
  } else {
    c["architectures"] = {qwen25 ? "Qwen2_5_VLForConditionalGeneration"
                                 : "Qwen2VLForConditionalGeneration"};
    c["model_type"] = qwen25 ? "qwen2_5_vl" : "qwen2_vl";
  }
  c["tie_word_embeddings"] = text_config["tie_word_embeddings"];
  c["text_config"] = std::move(text_config);
  if (qwen3) {
    OCULAR_ASSIGN_OR_RETURN(c["vision_config"], Vision3ConfigJson(mmproj, v));
  } else {
    OCULAR_ASSIGN_OR_RETURN(c["vision_config"], VisionConfigJson(mmproj, v, qwen25));
  }
  OCULAR_RETURN_IF_ERROR(GgufMeta(text).SetTokenIds({{"image_token_id", "<|image_pad|>"},
                                                     {"video_token_id", "<|video_pad|>"},
                                                     {"vision_start_token_id", "<|vision_start|>"},
                                                     {"vision_end_token_id", "<|vision_end|>"}},
                                                    "Qwen-VL", &c));
  return c;
}

// Qwen2VLImageProcessor: what the mmproj says, the rest as the released checkpoints'.
std::string PreprocessorJson(const MmprojVision& v, bool qwen3) {
  json p;
  p["image_processor_type"] = "Qwen2VLImageProcessor";
  p["processor_class"] = qwen3 ? "Qwen3VLProcessor" : "Qwen2VLProcessor";
  p["do_resize"] = true;
  if (qwen3) {  // Qwen/Qwen3-VL-4B-Instruct's: size {shortest_edge, longest_edge}
    p["min_pixels"] = 65536;
    p["max_pixels"] = 16777216;
  } else {  // Qwen/Qwen2-VL-7B-Instruct's (and Qwen2.5-VL's)
    p["min_pixels"] = 56 * 56;
    p["max_pixels"] = 12845056;
  }
  p["patch_size"] = v.patch_size;
  p["merge_size"] = v.spatial_merge_size > 0 ? v.spatial_merge_size : 2;
  p["temporal_patch_size"] = 2;
  p["resample"] = 3;  // PIL BICUBIC
  SetMmprojNormalization(v, &p);
  return p.dump(2);
}

}  // namespace

StatusOr<std::unique_ptr<FileSet>> LlamaCppFiles(const GgufFile& g, const GgufFile* mmproj) {
  OCULAR_ASSIGN_OR_RETURN(std::string_view arch_view, g.GetString("general.architecture"));
  const std::string arch(arch_view);
  OCULAR_RETURN_IF_ERROR(CheckKeys(GgufMeta(g), arch));
  if (mmproj == nullptr) {
    return GgufMeta(g).Refuse(arch == "qwen3vl" ? "a Qwen3-VL" : "a Qwen2-VL",
                              " text file runs with its vision encoder: give its mmproj file ",
                              "(--mmproj)");
  }
  OCULAR_ASSIGN_OR_RETURN(GgufVocab vocab, ReadGgufBpeVocab(g));
  OCULAR_ASSIGN_OR_RETURN(json text_config, TextConfigJson(GgufMeta(g), arch, vocab));
  OCULAR_ASSIGN_OR_RETURN(MmprojVision v, ReadMmproj(*mmproj, arch));
  OCULAR_ASSIGN_OR_RETURN(json config, PairConfig(g, *mmproj, v, arch, std::move(text_config)));
  std::map<std::string, std::string, std::less<>> files;
  files["config.json"] = config.dump(2);
  files["preprocessor_config.json"] = PreprocessorJson(v, arch == "qwen3vl");
  files["tokenizer.json"] = std::move(vocab.tokenizer_json);
  files["tokenizer_config.json"] = std::move(vocab.tokenizer_config_json);
  return std::unique_ptr<FileSet>(
      std::make_unique<MemoryFiles>(g.origin() + " + " + mmproj->origin(), std::move(files)));
}

}  // namespace ocular::qwen2vl

#include "models/gemma3/llamacpp_gguf.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "io/gguf_meta.h"
#include "io/gguf_vocab.h"
#include "io/mmproj.h"
#include "io/model_files.h"

namespace ocular::gemma3 {

namespace {

// The architecture, and no key this file does not read (general.* is descriptive; the
// vocabulary's reader checks tokenizer.*).
Status CheckKeys(const GgufMeta& g) {
  OCULAR_ASSIGN_OR_RETURN(std::string_view arch, g.file().GetString("general.architecture"));
  if (arch != "gemma3") return g.Refuse("architecture '", arch, "' is not Gemma 3");
  // The gemma3.* keys llama.cpp writes for Gemma3ForCausalLM (gguf-py constants, Keys.LLM /
  // Keys.Attention / Keys.Rope), all read below.
  static const GgufKeys keys = LlmKeys(
      "gemma3", {"attention.key_length", "attention.value_length", "attention.sliding_window",
                 "attention.sliding_window_pattern", "rope.freq_base_swa", "rope.scaling.type",
                 "rope.scaling.factor", "final_logit_softcapping"});
  return g.CheckKeys(
      keys,
      [](std::string_view key) {
        return !key.starts_with("general.") && !key.starts_with("tokenizer.");
      },
      "llama.cpp's Gemma 3 files");
}

// "sliding_window" and "layer_types". Sliding layers: llama.cpp's set_swa_pattern(n) makes
// layer i sliding iff i % n < n - 1 (the HF rule (i + 1) % n != 0); no sliding_window key
// means every layer is global.
Status SetLayerTypes(const GgufMeta& g, int64_t layers, nlohmann::ordered_json* c) {
  nlohmann::ordered_json types = nlohmann::ordered_json::array();
  if (g.file().Find("gemma3.attention.sliding_window") != nullptr) {
    OCULAR_ASSIGN_OR_RETURN((*c)["sliding_window"], g.Required("gemma3.attention.sliding_window"));
    int64_t pattern = 6;
    if (const GgufValue* p = g.file().Find("gemma3.attention.sliding_window_pattern")) {
      if (p->type == GgufType::kArray) {
        return g.Refuse("a per-layer sliding_window_pattern array is not implemented");
      }
      OCULAR_ASSIGN_OR_RETURN(pattern, g.Required("gemma3.attention.sliding_window_pattern"));
    }
    for (int64_t i = 0; i < layers; ++i) {
      types.push_back(i % pattern < pattern - 1 ? "sliding_attention" : "full_attention");
    }
  } else {
    for (int64_t i = 0; i < layers; ++i) types.push_back("full_attention");
  }
  (*c)["layer_types"] = std::move(types);
  return Status::Ok();
}

// "rope_scaling": null, or linear with its factor.
Status SetRopeScaling(const GgufMeta& g, nlohmann::ordered_json* c) {
  (*c)["rope_scaling"] = nullptr;
  if (g.file().Find("gemma3.rope.scaling.type") != nullptr) {
    OCULAR_ASSIGN_OR_RETURN(std::string_view type, g.file().GetString("gemma3.rope.scaling.type"));
    OCULAR_ASSIGN_OR_RETURN(const double factor,
                            g.OptionalFloat("gemma3.rope.scaling.factor", 1.0));
    if (type == "linear") {
      (*c)["rope_scaling"] = {{"rope_type", "linear"}, {"factor", factor}};
    } else if (type != "none") {
      return g.Refuse("rope.scaling.type '", type, "' is not implemented (none, linear)");
    }
  } else if (g.file().Find("gemma3.rope.scaling.factor") != nullptr) {
    return g.Refuse("rope.scaling.factor without rope.scaling.type");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> ConfigJsonFromLlamaCpp(const GgufFile& file, const GgufVocab& vocab) {
  const GgufMeta g(file);
  OCULAR_RETURN_IF_ERROR(CheckKeys(g));
  if (file.FindTensor("output.weight") != nullptr) {
    return g.Refuse("an untied output projection (output.weight) is not implemented");
  }
  nlohmann::ordered_json c;
  c["architectures"] = {"Gemma3ForCausalLM"};
  c["model_type"] = "gemma3_text";
  OCULAR_RETURN_IF_ERROR(SetLlmConfig(g, "gemma3", 1e6, &c));
  OCULAR_ASSIGN_OR_RETURN(const int64_t head_dim, g.Required("gemma3.attention.key_length"));
  OCULAR_ASSIGN_OR_RETURN(const int64_t v_dim, g.Required("gemma3.attention.value_length"));
  if (v_dim != head_dim) {
    return g.Refuse("attention.value_length ", v_dim, " != key_length ", head_dim);
  }
  c["head_dim"] = head_dim;
  OCULAR_ASSIGN_OR_RETURN(c["rope_local_base_freq"],
                          g.OptionalFloat("gemma3.rope.freq_base_swa", 10000.0));
  const int64_t hidden = c["hidden_size"].get<int64_t>(),
                layers = c["num_hidden_layers"].get<int64_t>();
  const int64_t heads = c["num_attention_heads"].get<int64_t>();
  // llama.cpp (gemma3.cpp load_arch_hparams): Q is scaled by 1/sqrt(hidden/heads) for the
  // 62-layer 27B, else 1/sqrt(head_dim): the checkpoints' query_pre_attn_scalar.
  c["query_pre_attn_scalar"] = layers == 62 ? hidden / heads : head_dim;
  c["hidden_activation"] = "gelu_pytorch_tanh";
  c["attn_logit_softcapping"] = nullptr;
  OCULAR_ASSIGN_OR_RETURN(const double softcap,
                          g.OptionalFloat("gemma3.final_logit_softcapping", 0));
  c["final_logit_softcapping"] = softcap > 0 ? nlohmann::ordered_json(softcap) : nullptr;

  OCULAR_RETURN_IF_ERROR(SetLayerTypes(g, layers, &c));
  OCULAR_RETURN_IF_ERROR(SetRopeScaling(g, &c));
  if (vocab.bos_id < 0 || vocab.eos_id < 0) {
    return g.Refuse("a vocabulary without bos and eos tokens");
  }
  c["bos_token_id"] = vocab.bos_id;
  nlohmann::ordered_json eos = nlohmann::ordered_json::array({vocab.eos_id});
  for (int32_t id : vocab.extra_eog_ids) eos.push_back(id);
  c["eos_token_id"] = std::move(eos);
  c["pad_token_id"] = std::max(vocab.pad_id, 0);
  return c.dump(2);
}

namespace {

// Gemma3Config (model_type gemma3) for the pair: `text_config` is the text file's config.
StatusOr<nlohmann::ordered_json> PairConfig(const GgufFile& text, const GgufFile& mmproj,
                                            const MmprojVision& v,
                                            nlohmann::ordered_json text_config) {
  const int64_t hidden = text_config["hidden_size"].get<int64_t>();
  OCULAR_RETURN_IF_ERROR(CheckPair(text, mmproj, v, hidden, "gemma3"));
  // clip.cpp (PROJECTOR_TYPE_GEMMA3): patches are average-pooled n_merge x n_merge, n_merge =
  // clip.vision.projector.scale_factor, 4 when absent (every Gemma 3 size).
  const int64_t merge = v.scale_factor > 0 ? v.scale_factor : 4;
  const int64_t side = v.image_size / v.patch_size;
  if (v.image_size % v.patch_size != 0 || side % merge != 0) {
    return Error(StatusCode::kUnimplemented, "mmproj", mmproj.origin(), ": clip.vision.image_size ",
                 v.image_size, " / patch_size ", v.patch_size,
                 " is not a whole number of patches divisible by the pooling ",
                 "(clip.vision.projector.scale_factor ", merge, ")");
  }
  nlohmann::ordered_json c;
  c["architectures"] = {"Gemma3ForConditionalGeneration"};
  c["model_type"] = "gemma3";
  text_config.erase("architectures");
  c["bos_token_id"] = text_config["bos_token_id"];
  c["eos_token_id"] = text_config["eos_token_id"];
  c["pad_token_id"] = text_config["pad_token_id"];
  c["text_config"] = std::move(text_config);
  c["vision_config"] = {
      {"model_type", "siglip_vision_model"},
      {"hidden_size", v.hidden_size},
      {"intermediate_size", v.intermediate_size},
      {"num_hidden_layers", v.num_layers},
      {"num_attention_heads", v.num_heads},
      {"num_channels", 3},
      {"image_size", v.image_size},
      {"patch_size", v.patch_size},
      {"layer_norm_eps", v.layer_norm_eps},
      {"hidden_act", "gelu_pytorch_tanh"},  // clip.use_gelu (ggml_gelu: the tanh form)
      {"vision_use_head", false},
  };
  c["mm_tokens_per_image"] = (side / merge) * (side / merge);
  // llama.cpp's mtmd wraps the image embeddings in <start_of_image> ... <end_of_image> by
  // text; transformers' processor writes <image_soft_token> placeholders between them.
  OCULAR_RETURN_IF_ERROR(GgufMeta(text).SetTokenIds({{"boi_token_index", "<start_of_image>"},
                                                     {"eoi_token_index", "<end_of_image>"},
                                                     {"image_token_index", "<image_soft_token>"}},
                                                    "Gemma 3", &c));
  return c;
}

// preprocessor_config.json: the mmproj's size, mean and std; the rest as
// google/gemma-3-*'s (Gemma3ImageProcessor), which llama.cpp's metadata has no keys for.
std::string PreprocessorJson(const MmprojVision& v) {
  nlohmann::ordered_json p;
  p["image_processor_type"] = "Gemma3ImageProcessor";
  p["processor_class"] = "Gemma3Processor";
  p["do_resize"] = true;
  p["size"] = {{"height", v.image_size}, {"width", v.image_size}};
  p["resample"] = 2;  // PIL BILINEAR
  SetMmprojNormalization(v, &p);
  p["do_pan_and_scan"] = false;
  return p.dump(2);
}

}  // namespace

StatusOr<std::unique_ptr<FileSet>> LlamaCppFiles(const GgufFile& g, const GgufFile* mmproj) {
  OCULAR_RETURN_IF_ERROR(CheckKeys(GgufMeta(g)));
  OCULAR_ASSIGN_OR_RETURN(GgufVocab vocab, ReadGgufVocab(g));
  OCULAR_ASSIGN_OR_RETURN(std::string config, ConfigJsonFromLlamaCpp(g, vocab));
  std::map<std::string, std::string, std::less<>> files;
  std::string origin = g.origin();
  if (mmproj != nullptr) {
    OCULAR_ASSIGN_OR_RETURN(MmprojVision v, ReadMmproj(*mmproj, "gemma3"));
    OCULAR_ASSIGN_OR_RETURN(nlohmann::ordered_json pair,
                            PairConfig(g, *mmproj, v, nlohmann::ordered_json::parse(config)));
    config = pair.dump(2);
    files["preprocessor_config.json"] = PreprocessorJson(v);
    origin += " + " + mmproj->origin();
  }
  files["config.json"] = std::move(config);
  files["tokenizer.model"] = std::move(vocab.tokenizer_model);
  files["tokenizer_config.json"] = std::move(vocab.tokenizer_config_json);
  return std::unique_ptr<FileSet>(std::make_unique<MemoryFiles>(origin, std::move(files)));
}

}  // namespace ocular::gemma3

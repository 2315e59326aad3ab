#include "models/config.h"

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "models/config_section.h"

namespace ocular {

namespace {

using namespace config_internal;  // NOLINT: the shared config.json readers

// Keys of GemmaConfig / Gemma2Config (transformers 4.57) that change the computation and that
// ocular implements only at their defaults. Keys that do not change inference (use_cache,
// initializer_range, attention_dropout, attn_implementation, cache_implementation, ...) are
// accepted and ignored, as transformers does at inference time.
Status RefuseUnimplementedText(const Section& s) {
  OCULAR_RETURN_IF_ERROR(
      s.RequireDefault("attention_bias", false, "q/k/v/o projections have no bias"));
  OCULAR_RETURN_IF_ERROR(s.RequireDefault("mlp_bias", false, "MLP projections have no bias"));
  OCULAR_RETURN_IF_ERROR(s.RequireDefault("use_bidirectional_attention", false,
                                          "the text decoder is causal after the prefix"));
  OCULAR_RETURN_IF_ERROR(s.RequireDefault("partial_rotary_factor", 1.0, "RoPE on the whole head"));
  if (const Json* rs = s.Find("rope_scaling")) {
    return s.Fail(StatusCode::kUnimplemented, s.Key("rope_scaling"), " = ", Shown(*rs),
                  " is not supported (Gemma and Gemma 2 use plain RoPE: rope_scaling null)");
  }
  return Status::Ok();
}

Status ParseText(const Section& s, GemmaTextConfig* t) {
  OCULAR_RETURN_IF_ERROR(s.String("model_type", &t->model_type));
  if (t->model_type == "gemma2") {
    // Gemma2Config defaults differ from GemmaConfig's (configuration_gemma2.py).
    *t = GemmaTextConfig{};
    t->model_type = "gemma2";
    t->hidden_size = 2304;
    t->intermediate_size = 9216;
    t->num_hidden_layers = 26;
    t->num_attention_heads = 8;
    t->num_key_value_heads = 4;
    t->query_pre_attn_scalar = 256;
    t->sliding_window = 4096;
    t->final_logit_softcapping = 30.0f;
    t->attn_logit_softcapping = 50.0f;
  } else if (t->model_type != "gemma") {
    return s.Fail(StatusCode::kUnimplemented, s.Key("model_type"), " = '",
                  t->model_type.substr(0, 40), "' is not supported (gemma, gemma2)");
  }
  OCULAR_RETURN_IF_ERROR(RefuseUnimplementedText(s));
  OCULAR_RETURN_IF_ERROR(ParseDecoderSizes(s, t));
  OCULAR_RETURN_IF_ERROR(s.Int("head_dim", 2, kMaxHeadDim, &t->head_dim));
  // Gemma 1 reads hidden_act; Gemma 2 reads hidden_activation (modeling_gemma{,2}.py MLP).
  OCULAR_RETURN_IF_ERROR(
      s.Activation(t->is_gemma2() ? "hidden_activation" : "hidden_act", &t->hidden_act));
  if (!t->is_gemma2()) return Status::Ok();

  OCULAR_RETURN_IF_ERROR(
      s.Float("query_pre_attn_scalar", 0, true, kMaxScalar, &t->query_pre_attn_scalar));
  OCULAR_RETURN_IF_ERROR(s.Int("sliding_window", 0, kMaxPositions, &t->sliding_window));
  // null softcaps mean "disabled" (0 here); absent ones keep Gemma2Config's defaults.
  for (auto [key, out] : {std::pair{"attn_logit_softcapping", &t->attn_logit_softcapping},
                          std::pair{"final_logit_softcapping", &t->final_logit_softcapping}}) {
    if (s.IsNull(key)) {
      *out = 0;
      continue;
    }
    OCULAR_RETURN_IF_ERROR(s.Float(key, 0, false, kMaxScalar, out));
  }
  // num_hidden_layers is in range here, so the per-layer vector is small.
  t->layer_is_sliding.assign(t->num_hidden_layers, false);
  if (const Json* lt = s.Find("layer_types")) {
    if (!lt->is_array()) {
      return s.Fail(StatusCode::kDataLoss, s.Key("layer_types"), " must be a list, got ",
                    Shown(*lt));
    }
    if (lt->size() != static_cast<size_t>(t->num_hidden_layers)) {
      return s.Fail(
          StatusCode::kDataLoss, s.Key("layer_types"), " has ", lt->size(),
          " entries; the rule is one per layer (num_hidden_layers = ", t->num_hidden_layers, ")");
    }
    for (int i = 0; i < t->num_hidden_layers; ++i) {
      const Json& e = (*lt)[i];
      if (!e.is_string() || (e != "sliding_attention" && e != "full_attention")) {
        return s.Fail(StatusCode::kUnimplemented, s.Key("layer_types"), "[", i, "] = ", Shown(e),
                      " is not supported (sliding_attention, full_attention)");
      }
      t->layer_is_sliding[i] = e == "sliding_attention";
    }
  } else {
    // configuration_gemma2.py: sliding on even layer indices.
    for (int i = 0; i < t->num_hidden_layers; ++i) t->layer_is_sliding[i] = (i + 1) % 2 == 1;
  }
  return Status::Ok();
}

}  // namespace

float GemmaTextConfig::attention_scale() const {
  const float s = is_gemma2() ? query_pre_attn_scalar : static_cast<float>(head_dim);
  return 1.0f / std::sqrt(s);
}

// Validate() messages state the rule that failed; ParsePaliGemmaConfig prefixes the file.
Status SiglipVisionConfig::Validate() const {
  const RuleError fail("vision_config");
  if (hidden_size < 1 || hidden_size > kMaxHidden || num_attention_heads < 1 ||
      num_attention_heads > kMaxHeads || intermediate_size < 1 ||
      intermediate_size > kMaxIntermediate || num_hidden_layers < 0 ||
      num_hidden_layers > kMaxLayers || patch_size < 1 || image_size < 1 ||
      image_size > kMaxImageSize) {
    return fail("sizes out of range: hidden_size ", hidden_size, ", intermediate_size ",
                intermediate_size, ", num_hidden_layers ", num_hidden_layers,
                ", num_attention_heads ", num_attention_heads, ", image_size ", image_size,
                ", patch_size ", patch_size);
  }
  if (hidden_size % num_attention_heads != 0) {
    return fail("hidden_size (", hidden_size, ") must be a multiple of num_attention_heads (",
                num_attention_heads, ")");
  }
  if (image_size < patch_size || image_size % patch_size != 0) {
    return fail("image_size (", image_size, ") must be a positive multiple of patch_size (",
                patch_size, ")");
  }
  if (num_channels != 3) {
    return Error(StatusCode::kUnimplemented, "config",
                 "vision_config: num_channels = ", num_channels, " is not supported (3: RGB)");
  }
  if (!(layer_norm_eps > 0) || !std::isfinite(layer_norm_eps)) {
    return fail("layer_norm_eps must be a positive finite number");
  }
  if (vision_use_head) {
    return Error(StatusCode::kUnimplemented, "config",
                 "vision_config: vision_use_head = true is not supported (PaliGemma uses the "
                 "patch features, not a pooled head)");
  }
  return Status::Ok();
}

Status GemmaTextConfig::Validate() const {
  const RuleError fail("text_config");
  if (vocab_size < 1 || vocab_size > kMaxVocab || hidden_size < 1 || hidden_size > kMaxHidden ||
      intermediate_size < 1 || intermediate_size > kMaxIntermediate || num_hidden_layers < 1 ||
      num_hidden_layers > kMaxLayers || num_attention_heads < 1 ||
      num_attention_heads > kMaxHeads || num_key_value_heads < 1 ||
      num_key_value_heads > kMaxHeads || head_dim < 2 || head_dim > kMaxHeadDim ||
      max_position_embeddings < 1 || max_position_embeddings > kMaxPositions) {
    return fail("sizes out of range: vocab_size ", vocab_size, ", hidden_size ", hidden_size,
                ", intermediate_size ", intermediate_size, ", num_hidden_layers ",
                num_hidden_layers, ", heads ", num_attention_heads, "/", num_key_value_heads,
                " kv, head_dim ", head_dim);
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    return fail("num_attention_heads (", num_attention_heads,
                ") must be a multiple of num_key_value_heads (", num_key_value_heads, ")");
  }
  if (head_dim % 2 != 0) return fail("head_dim (", head_dim, ") must be even (RoPE pairs)");
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps)) {
    return fail("rms_norm_eps must be a positive finite number");
  }
  if (!(rope_theta > 1) || !std::isfinite(rope_theta)) {
    return fail("rope_theta must be a finite number > 1");
  }
  if (is_gemma2()) {
    if (!(query_pre_attn_scalar > 0) || !std::isfinite(query_pre_attn_scalar)) {
      return fail("gemma2 needs query_pre_attn_scalar > 0");
    }
    if (sliding_window < 0) return fail("sliding_window must be >= 0");
    if (!(attn_logit_softcapping >= 0) || !(final_logit_softcapping >= 0)) {
      return fail("softcaps must be >= 0 (0 or null: off)");
    }
    if (layer_is_sliding.size() != static_cast<size_t>(num_hidden_layers)) {
      return fail("layer_types needs one entry per layer (", num_hidden_layers, ")");
    }
  }
  return Status::Ok();
}

Status PaliGemmaConfig::Validate() const {
  OCULAR_RETURN_IF_ERROR(vision.Validate());
  OCULAR_RETURN_IF_ERROR(text.Validate());
  if (image_token_index < 0 || image_token_index >= text.vocab_size) {
    return Error(StatusCode::kDataLoss, "config", "image_token_index (", image_token_index,
                 ") must be a token id below text_config.vocab_size (", text.vocab_size, ")");
  }
  if (projection_dim != text.hidden_size) {
    // modeling_paligemma.py: the projector's output replaces <image> token embeddings.
    return Error(StatusCode::kDataLoss, "config", "projection_dim (", projection_dim,
                 ") must equal text_config.hidden_size (", text.hidden_size, ")");
  }
  for (auto [name, id] :
       {std::pair{"bos_token_id", bos_token_id}, std::pair{"eos_token_id", eos_token_id}}) {
    if (id < 0 || id >= text.vocab_size) {
      return Error(StatusCode::kDataLoss, "config", name, " (", id,
                   ") must be a token id below text_config.vocab_size (", text.vocab_size, ")");
    }
  }
  if (vision.num_patches() > kMaxPositions) {
    return Error(StatusCode::kResourceExhausted, "config", "vision_config: ", vision.num_patches(),
                 " image tokens, over ocular's limit of ", kMaxPositions);
  }
  return Status::Ok();
}

StatusOr<PaliGemmaConfig> ParsePaliGemmaConfig(const std::string& json_text,
                                               const std::string& source) {
  StatusOr<Json> parsed = ParseJson(json_text, source, "config");
  if (!parsed.ok()) {
    // "[config] <file>: invalid JSON at line L, column C: ..." → "...: not a JSON object: ...".
    std::string detail = parsed.status().message();
    const std::string prefix = StrCat("[config] ", source, ": ");
    if (detail.rfind(prefix, 0) == 0) detail = detail.substr(prefix.size());
    return Error(StatusCode::kDataLoss, "config", source, ": not a JSON object: ", detail);
  }
  const Json j = std::move(parsed).value();
  if (!j.is_object()) {
    return Error(StatusCode::kDataLoss, "config", source, ": not a JSON object");
  }
  const Section top(j, source, "");
  PaliGemmaConfig c;
  std::string model_type;
  OCULAR_RETURN_IF_ERROR(top.String("model_type", &model_type));
  if (model_type.empty()) {
    return top.Fail(StatusCode::kDataLoss, "no model_type (expected \"paligemma\")");
  }
  if (model_type != "paligemma") {
    return top.Fail(StatusCode::kUnimplemented, "model_type '", model_type.substr(0, 40),
                    "' is not supported (supported: paligemma)");
  }
  OCULAR_RETURN_IF_ERROR(top.TorchDtype(&c.torch_dtype));
  OCULAR_RETURN_IF_ERROR(top.Int("image_token_index", 0, kMaxVocab, &c.image_token_index));
  OCULAR_RETURN_IF_ERROR(top.Int("image_token_id", 0, kMaxVocab, &c.image_token_index));
  OCULAR_RETURN_IF_ERROR(top.Int("vocab_size", 1, kMaxVocab, &c.vocab_size));
  OCULAR_RETURN_IF_ERROR(top.Int("projection_dim", 1, kMaxHidden, &c.projection_dim));
  OCULAR_RETURN_IF_ERROR(top.Int("pad_token_id", 0, kMaxVocab, &c.pad_token_id));
  OCULAR_RETURN_IF_ERROR(top.Int("bos_token_id", 0, kMaxVocab, &c.bos_token_id));
  if (const Json* eos = top.Find("eos_token_id"); eos != nullptr && eos->is_array()) {
    // Valid in transformers (stop on any of them), but ocular stops on one id.
    return top.Fail(StatusCode::kUnimplemented, "eos_token_id = ", Shown(*eos),
                    " is not supported (a single id)");
  }
  OCULAR_RETURN_IF_ERROR(top.Int("eos_token_id", 0, kMaxVocab, &c.eos_token_id));

  OCULAR_ASSIGN_OR_RETURN(const Json* vc, top.Object("vision_config"));
  if (vc != nullptr) {
    OCULAR_RETURN_IF_ERROR(ParseVision(Section(*vc, source, "vision_config"), &c.vision));
  } else {
    // PaliGemmaConfig's own defaults when vision_config is absent.
    c.vision = SiglipVisionConfig{.hidden_size = 1152,
                                  .intermediate_size = 4096,
                                  .num_hidden_layers = 27,
                                  .num_attention_heads = 16,
                                  .image_size = 224,
                                  .patch_size = 14};
  }
  OCULAR_ASSIGN_OR_RETURN(const Json* tc, top.Object("text_config"));
  if (tc != nullptr) {
    OCULAR_RETURN_IF_ERROR(ParseText(Section(*tc, source, "text_config"), &c.text));
  } else {
    // PaliGemmaConfig's own defaults when text_config is absent (GemmaConfig's for the rest).
    static_cast<DecoderSizes&>(c.text) =
        DecoderSizes{c.vocab_size, 2048, 16384, 18, 8, 1, 8192, 1e-6f, 10000.0f};
  }
  return Validated(std::move(c), source);
}

StatusOr<PaliGemmaConfig> LoadPaliGemmaConfig(const std::string& model_dir) {
  return LoadPaliGemmaConfig(DirectoryFiles(model_dir));
}

StatusOr<PaliGemmaConfig> LoadPaliGemmaConfig(const FileSet& files) {
  return ReadConfigJson(files, &ParsePaliGemmaConfig);
}

}  // namespace ocular

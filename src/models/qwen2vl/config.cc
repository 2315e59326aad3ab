#include "models/qwen2vl/config.h"

#include <algorithm>

#include "models/qwen2vl/config_shared.h"

namespace ocular::qwen2vl {

namespace {

using namespace config_internal;  // NOLINT: the shared config.json readers

Status ParseVision(const Section& s, VisionConfig* c) {
  OCULAR_RETURN_IF_ERROR(s.Int("depth", 1, kMaxLayers, &c->depth));
  if (c->qwen25) {
    // Qwen2_5_VLVisionConfig: hidden_size is the ViT's width, out_hidden_size the merger's
    // output; Qwen2_5_VLMLP is down(act(gate(x)) * up(x)) with ACT2FN[hidden_act].
    c->embed_dim = 3584;
    c->intermediate_size = 3420;
    OCULAR_RETURN_IF_ERROR(s.RequireDefault("hidden_act", "silu", "the ViT MLP is SwiGLU"));
    OCULAR_RETURN_IF_ERROR(s.Int("hidden_size", 1, kMaxHidden, &c->embed_dim));
    OCULAR_RETURN_IF_ERROR(s.Int("out_hidden_size", 1, kMaxHidden, &c->hidden_size));
    OCULAR_RETURN_IF_ERROR(s.Int("intermediate_size", 1, kMaxIntermediate, &c->intermediate_size));
    OCULAR_RETURN_IF_ERROR(s.Int("window_size", 1, 1 << 16, &c->window_size));
    OCULAR_RETURN_IF_ERROR(
        s.IntList("fullatt_block_indexes", 0, kMaxLayers - 1, &c->fullatt_block_indexes));
  } else {
    // ACT2FN["quick_gelu"] in Qwen2VLVisionBlock's VisionMlp; every release uses it.
    OCULAR_RETURN_IF_ERROR(
        s.RequireDefault("hidden_act", "quick_gelu", "the ViT MLP is fc2(quick_gelu(fc1(x)))"));
    OCULAR_RETURN_IF_ERROR(s.Int("embed_dim", 1, kMaxHidden, &c->embed_dim));
    OCULAR_RETURN_IF_ERROR(s.Int("hidden_size", 1, kMaxHidden, &c->hidden_size));
    OCULAR_RETURN_IF_ERROR(s.Float("mlp_ratio", 0, true, 64, &c->mlp_ratio));
  }
  return config_shared::ParsePatchGrid(s, c);
}

// The text fields: under text_config (transformers >= 4.53's save_pretrained) or at the top
// level (the released checkpoints; Qwen2VLConfig builds its text config from them).
Status ParseText(const Section& s, const std::string& source, TextConfig* c) {
  OCULAR_RETURN_IF_ERROR(config_shared::ParseText(s, c));
  OCULAR_ASSIGN_OR_RETURN(const Json* rs, s.Object("rope_scaling"));
  if (rs == nullptr) {
    // Qwen2VLAttention reads rope_scaling["mrope_section"]: transformers fails without it.
    return s.Fail(StatusCode::kDataLoss, s.Key("rope_scaling"),
                  " is missing (Qwen2-VL's M-RoPE needs its mrope_section)");
  }
  const Section r(*rs, source, s.Key("rope_scaling"));
  std::string type;
  OCULAR_RETURN_IF_ERROR(r.RopeType(&type));
  // "mrope" is the released spelling; the config class rewrites it to "default" (the same
  // frequencies, _compute_default_rope_parameters).
  if (!type.empty() && type != "default" && type != "mrope") {
    return s.Fail(StatusCode::kUnimplemented, s.Key("rope_scaling"), " = ", Shown(*rs),
                  " is not supported (M-RoPE with default frequencies)");
  }
  OCULAR_RETURN_IF_ERROR(config_shared::ParseMropeSection(s, r, 1, true, &c->mrope_section));
  return config_shared::KnownRopeKeys(s, *rs, {"type", "rope_type", "mrope_section"});
}

}  // namespace

namespace config_shared {

Status FullAttentionOnly(const Section& s) {
  const Json* lt = s.Find("layer_types");
  if (lt == nullptr) return Status::Ok();
  for (const Json& t : lt->is_array() ? *lt : Json::array({*lt})) {
    if (t != "full_attention") {
      return s.Fail(StatusCode::kUnimplemented, s.Key("layer_types"), " = ",
                    config_internal::Shown(*lt), " is not supported (full_attention layers only)");
    }
  }
  return Status::Ok();
}

Status ParseMropeSection(const Section& s, const Section& r, int min, bool required,
                         std::array<int, 3>* out) {
  const Json* sec = r.Find("mrope_section");
  if (sec == nullptr && !required) return Status::Ok();
  bool ok = sec != nullptr && sec->is_array() && sec->size() == 3;
  std::array<int, 3> v = *out;
  for (size_t i = 0; ok && i < 3; ++i) {
    ok = (*sec)[i].is_number_integer() && (*sec)[i].get<int64_t>() >= min &&
         (*sec)[i].get<int64_t>() <= 4096;
    if (ok) v[i] = (*sec)[i].get<int>();
  }
  if (!ok) {
    return s.Fail(StatusCode::kDataLoss, s.Key("rope_scaling.mrope_section"), " = ",
                  sec ? config_internal::Shown(*sec) : std::string("(missing)"), " must list 3 ",
                  min == 1 ? "positive integers" : "integers >= 0", " (temporal, height, width)");
  }
  *out = v;
  return Status::Ok();
}

Status KnownRopeKeys(const Section& s, const Json& rs, std::initializer_list<const char*> known) {
  for (const auto& [key, value] : rs.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return s.Fail(StatusCode::kUnimplemented, s.Key("rope_scaling"), ".", key.substr(0, 40),
                    " is not supported (M-RoPE takes mrope_section only)");
    }
  }
  return Status::Ok();
}

}  // namespace config_shared

bool VisionConfig::full_attention(int block) const {
  return !qwen25 || std::find(fullatt_block_indexes.begin(), fullatt_block_indexes.end(), block) !=
                        fullatt_block_indexes.end();
}

Status VisionConfig::Validate() const {
  const config_internal::RuleError fail("vision_config");
  OCULAR_RETURN_IF_ERROR(
      config_shared::CheckVitShape("embed_dim", embed_dim, num_heads, in_channels));
  if (mlp_dim() < 1) return fail(StatusCode::kDataLoss, "embed_dim * mlp_ratio is below 1");
  if (qwen25 && window_merged() < 1) {
    return fail(StatusCode::kDataLoss, "window_size (", window_size,
                ") is below one merged patch (", spatial_merge_size * patch_size, " px)");
  }
  return Status::Ok();
}

Status TextConfig::Validate() const {
  const config_internal::RuleError fail("text_config");
  OCULAR_RETURN_IF_ERROR(CheckHeads(hidden_size, num_attention_heads, num_key_value_heads, fail));
  const int half = head_dim() / 2;
  if (head_dim() % 2 != 0 || mrope_section[0] + mrope_section[1] + mrope_section[2] != half) {
    return fail("rope_scaling.mrope_section [", mrope_section[0], ", ", mrope_section[1], ", ",
                mrope_section[2], "] must sum to head_dim / 2 = ", half);
  }
  return Status::Ok();
}

Status Qwen2VLConfig::Validate() const {
  OCULAR_RETURN_IF_ERROR(config_shared::ValidateParts(*this));
  if (vision.hidden_size != text.hidden_size) {
    return Error(StatusCode::kDataLoss, "config", "vision_config.hidden_size (", vision.hidden_size,
                 ") must be the text hidden_size (", text.hidden_size,
                 "): the merger's output replaces token embeddings");
  }
  return Status::Ok();
}

StatusOr<Qwen2VLConfig> ParseQwen2VLConfig(const std::string& json_text,
                                           const std::string& source) {
  OCULAR_ASSIGN_OR_RETURN(Json j, ParseObject(json_text, source));
  const Section top(j, source, "");
  Qwen2VLConfig c;
  OCULAR_RETURN_IF_ERROR(top.String("model_type", &c.model_type));
  if (c.model_type != "qwen2_vl" && c.model_type != "qwen2_5_vl") {
    return top.Fail(StatusCode::kUnimplemented, "model_type '", c.model_type.substr(0, 40),
                    "' is not supported (qwen2_vl, qwen2_5_vl)");
  }
  c.vision.qwen25 = c.model_type == "qwen2_5_vl";
  OCULAR_RETURN_IF_ERROR(config_shared::ParseTop(top, &c));
  OCULAR_RETURN_IF_ERROR(top.Bool("tie_word_embeddings", &c.tie_word_embeddings));
  const Json empty = Json::object();
  OCULAR_ASSIGN_OR_RETURN(const Json* vc, top.Object("vision_config"));
  OCULAR_RETURN_IF_ERROR(
      ParseVision(Section(vc ? *vc : empty, source, "vision_config"), &c.vision));
  OCULAR_ASSIGN_OR_RETURN(const Json* tc, top.Object("text_config"));
  const Section text = tc ? Section(*tc, source, "text_config") : top;
  OCULAR_RETURN_IF_ERROR(ParseText(text, source, &c.text));
  // tie_embeddings_and_encoder_decoder reads get_text_config(decoder=True).tie_word_embeddings:
  // with a text_config its own (default false), else the top level's.
  if (tc != nullptr) {
    c.tie_word_embeddings = false;
    OCULAR_RETURN_IF_ERROR(text.Bool("tie_word_embeddings", &c.tie_word_embeddings));
  }
  return Validated(std::move(c), source);
}

StatusOr<Qwen2VLConfig> LoadQwen2VLConfig(const FileSet& files) {
  return ReadConfigJson(files, &ParseQwen2VLConfig);
}

}  // namespace ocular::qwen2vl

#include "models/qwen2vl/config3.h"

#include <algorithm>
#include <cmath>

#include "models/qwen2vl/config_shared.h"

namespace ocular::qwen2vl {

namespace {

using config_internal::Json;
using config_internal::kMaxHeadDim;
using config_internal::kMaxHidden;
using config_internal::kMaxIntermediate;
using config_internal::kMaxLayers;
using config_internal::kMaxPositions;
using config_internal::Section;
using config_internal::Shown;

Status ParseVision(const Section& s, Vision3Config* c) {
  // Qwen3VLVisionMLP: linear_fc2(ACT2FN[hidden_act](linear_fc1(x))); released: gelu_pytorch_tanh.
  OCULAR_RETURN_IF_ERROR(s.RequireDefault("hidden_act", "gelu_pytorch_tanh",
                                          "the ViT MLP is linear_fc2(gelu_tanh(linear_fc1(x)))"));
  OCULAR_RETURN_IF_ERROR(s.Int("depth", 1, kMaxLayers, &c->depth));
  OCULAR_RETURN_IF_ERROR(s.Int("hidden_size", 1, kMaxHidden, &c->hidden_size));
  OCULAR_RETURN_IF_ERROR(s.Int("intermediate_size", 1, kMaxIntermediate, &c->intermediate_size));
  OCULAR_RETURN_IF_ERROR(config_shared::ParsePatchGrid(s, c));
  OCULAR_RETURN_IF_ERROR(s.Int("out_hidden_size", 1, kMaxHidden, &c->out_hidden_size));
  OCULAR_RETURN_IF_ERROR(
      s.Int("num_position_embeddings", 1, kMaxPositions, &c->num_position_embeddings));
  return s.IntList("deepstack_visual_indexes", 0, kMaxLayers - 1, &c->deepstack_visual_indexes);
}

// rope_scaling of Qwen3VLTextConfig: {"rope_type": "default", "mrope_section": [t, h, w],
// "mrope_interleaved": true}. Qwen3VLTextRotaryEmbedding always interleaves
// (apply_interleaved_mrope), reads rope_scaling.get("rope_type", "default") and
// get("mrope_section", [24, 20, 20]); mrope_interleaved is not read. rope_config_validation
// fails without "rope_type" unless the legacy "type" is one it has no validator for ("mrope").
Status ParseRope(const Section& s, const std::string& source, Text3Config* c) {
  OCULAR_ASSIGN_OR_RETURN(const Json* rs, s.Object("rope_scaling"));
  if (rs == nullptr) {
    return s.Fail(StatusCode::kDataLoss, s.Key("rope_scaling"),
                  " is missing (Qwen3-VL's M-RoPE reads it; transformers fails without it)");
  }
  const Section r(*rs, source, s.Key("rope_scaling"));
  std::string rope_type, type;
  OCULAR_RETURN_IF_ERROR(r.String("rope_type", &rope_type));
  OCULAR_RETURN_IF_ERROR(r.String("type", &type));
  if (rope_type.empty() && type != "mrope") {
    return s.Fail(StatusCode::kDataLoss, s.Key("rope_scaling"), " = ", Shown(*rs),
                  " has no rope_type (transformers' rope_config_validation requires it)");
  }
  if (!rope_type.empty() && rope_type != "default") {
    return s.Fail(StatusCode::kUnimplemented, s.Key("rope_scaling"), " = ", Shown(*rs),
                  " is not supported (M-RoPE with default frequencies)");
  }
  OCULAR_RETURN_IF_ERROR(config_shared::ParseMropeSection(s, r, 0, false, &c->mrope_section));
  return config_shared::KnownRopeKeys(s, *rs,
                                      {"type", "rope_type", "mrope_section", "mrope_interleaved"});
}

Status ParseText(const Section& s, const std::string& source, Text3Config* c) {
  OCULAR_RETURN_IF_ERROR(config_shared::ParseText(s, c));
  OCULAR_RETURN_IF_ERROR(s.Int("head_dim", 2, kMaxHeadDim, &c->head_dim));
  OCULAR_RETURN_IF_ERROR(s.Bool("attention_bias", &c->attention_bias));
  return ParseRope(s, source, c);
}

}  // namespace

int Vision3Config::grid_per_side() const {
  return static_cast<int>(std::sqrt(static_cast<double>(num_position_embeddings)));
}

Status Vision3Config::Validate() const {
  const config_internal::RuleError fail("vision_config");
  OCULAR_RETURN_IF_ERROR(
      config_shared::CheckVitShape("hidden_size", hidden_size, num_heads, in_channels));
  for (size_t k = 0; k < deepstack_visual_indexes.size(); ++k) {
    const int i = deepstack_visual_indexes[k];
    if (std::find(deepstack_visual_indexes.begin(), deepstack_visual_indexes.begin() + k, i) !=
        deepstack_visual_indexes.begin() + k) {
      return fail(StatusCode::kUnimplemented, "deepstack_visual_indexes names block ", i,
                  " twice (transformers then runs only its first merger)");
    }
    if (i >= depth) {
      return fail(StatusCode::kDataLoss, "deepstack_visual_indexes names block ", i,
                  " of a ViT of depth ", depth);
    }
  }
  return Status::Ok();
}

Status Text3Config::Validate() const {
  const config_internal::RuleError fail("text_config");
  if (num_attention_heads % num_key_value_heads != 0 || head_dim % 2 != 0) {
    return fail("num_attention_heads (", num_attention_heads,
                ") must be divisible by num_key_value_heads (", num_key_value_heads,
                ") and head_dim (", head_dim, ") even");
  }
  // apply_interleaved_mrope takes any sections: its slices stop at head_dim / 2 (and so does
  // InterleavedMrope); the temporal axis keeps the rest.
  return Status::Ok();
}

Status Qwen3VLConfig::Validate() const {
  OCULAR_RETURN_IF_ERROR(config_shared::ValidateParts(*this));
  if (vision.out_hidden_size != text.hidden_size) {
    return Error(StatusCode::kDataLoss, "config", "vision_config.out_hidden_size (",
                 vision.out_hidden_size, ") must be the text hidden_size (", text.hidden_size,
                 "): the merger's output replaces token embeddings");
  }
  if (vision.deepstack() > text.num_hidden_layers) {
    return Error(StatusCode::kUnimplemented, "config", vision.deepstack(),
                 " deepstack_visual_indexes for ", text.num_hidden_layers,
                 " decoder layers: each DeepStack feature is added after its own decoder layer");
  }
  return Status::Ok();
}

Qwen2VLConfig Qwen3VLConfig::ProcessorConfig() const {
  Qwen2VLConfig c;
  c.model_type = model_type;
  c.vision.patch_size = vision.patch_size;
  c.vision.temporal_patch_size = vision.temporal_patch_size;
  c.vision.spatial_merge_size = vision.spatial_merge_size;
  c.image_token_id = image_token_id;
  c.video_token_id = video_token_id;
  c.vision_start_token_id = vision_start_token_id;
  c.vision_end_token_id = vision_end_token_id;
  return c;
}

StatusOr<Qwen3VLConfig> ParseQwen3VLConfig(const std::string& json_text,
                                           const std::string& source) {
  OCULAR_ASSIGN_OR_RETURN(Json j, ParseJson(json_text, source, "config"));
  if (!j.is_object()) return Error(StatusCode::kDataLoss, "config", source, ": not a JSON object");
  const Section top(j, source, "");
  Qwen3VLConfig c;
  OCULAR_RETURN_IF_ERROR(top.String("model_type", &c.model_type));
  if (c.model_type != "qwen3_vl") {
    return top.Fail(StatusCode::kUnimplemented, "model_type '", c.model_type.substr(0, 40),
                    "' is not supported (qwen3_vl; the MoE qwen3_vl_moe is not implemented)");
  }
  OCULAR_RETURN_IF_ERROR(config_shared::ParseTop(top, &c));
  const Json empty = Json::object();
  OCULAR_ASSIGN_OR_RETURN(const Json* vc, top.Object("vision_config"));
  OCULAR_RETURN_IF_ERROR(
      ParseVision(Section(vc ? *vc : empty, source, "vision_config"), &c.vision));
  OCULAR_ASSIGN_OR_RETURN(const Json* tc, top.Object("text_config"));
  const Section text(tc ? *tc : empty, source, "text_config");
  OCULAR_RETURN_IF_ERROR(ParseText(text, source, &c.text));
  // tie_embeddings_and_encoder_decoder reads get_text_config(decoder=True).tie_word_embeddings:
  // text_config's own (Qwen3VLTextConfig's default false; the top level's is not read).
  OCULAR_RETURN_IF_ERROR(text.Bool("tie_word_embeddings", &c.tie_word_embeddings));
  return config_internal::Validated(std::move(c), source);
}

StatusOr<Qwen3VLConfig> LoadQwen3VLConfig(const FileSet& files) {
  return config_internal::ReadConfigJson(files, &ParseQwen3VLConfig);
}

}  // namespace ocular::qwen2vl

#include "models/gemma3/config.h"

#include <cmath>

#include "core/file_io.h"
#include "models/config_section.h"

namespace ocular::gemma3 {

namespace {

using namespace config_internal;  // NOLINT: the shared config.json readers

// rope_scaling: null, {"rope_type": "default"} or {"rope_type": "linear", "factor": f}
// (Gemma 3 4B/12B/27B: linear, factor 8). Other types change the frequencies otherwise.
Status ParseRopeScaling(const Section& s, Gemma3TextConfig* c) {
  return s.RopeScaling("linear", [&](const std::string& type, const Section& r) -> StatusOr<bool> {
    if (type != "linear") return false;
    float factor = 0;
    OCULAR_RETURN_IF_ERROR(r.Float("factor", 0, true, kMaxScalar, &factor));
    if (!(factor > 0)) {
      return r.Fail(StatusCode::kDataLoss, r.Described(), ": linear scaling needs a factor > 0");
    }
    c->rope_scaling_factor = factor;
    return true;
  });
}

// layer_types, else the sliding_window_pattern rule (configuration_gemma3.py: sliding unless
// (i + 1) % pattern == 0; pattern 6 by default).
Status ParseLayerTypes(const Section& s, GemmaTextConfig* tp) {
  GemmaTextConfig& t = *tp;
  t.layer_is_sliding.assign(t.num_hidden_layers, false);
  if (const Json* lt = s.Find("layer_types")) {
    if (!lt->is_array() || lt->size() != static_cast<size_t>(t.num_hidden_layers)) {
      return s.Fail(StatusCode::kDataLoss, s.Key("layer_types"), " = ", Shown(*lt),
                    " must list one type per layer (num_hidden_layers = ", t.num_hidden_layers,
                    ")");
    }
    for (int i = 0; i < t.num_hidden_layers; ++i) {
      const Json& e = (*lt)[i];
      if (!e.is_string() || (e != "sliding_attention" && e != "full_attention")) {
        return s.Fail(StatusCode::kUnimplemented, s.Key("layer_types"), "[", i, "] = ", Shown(e),
                      " is not supported (sliding_attention, full_attention)");
      }
      t.layer_is_sliding[i] = e == "sliding_attention";
    }
  } else {
    int pattern = 6;
    OCULAR_RETURN_IF_ERROR(s.Int("sliding_window_pattern", 1, kMaxLayers, &pattern));
    for (int i = 0; i < t.num_hidden_layers; ++i) t.layer_is_sliding[i] = (i + 1) % pattern != 0;
  }
  return Status::Ok();
}

// Gemma3TextConfig (configuration_gemma3.py), defaults as its __init__.
Status ParseText(const Section& s, Gemma3TextConfig* c) {
  GemmaTextConfig& t = c->gemma;
  t = GemmaTextConfig{};
  static_cast<DecoderSizes&>(t) =
      DecoderSizes{262208, 2304, 9216, 26, 8, 4, 131072, 1e-6f, 1000000.0f};
  t.model_type = "gemma3_text";
  t.head_dim = 256;
  t.query_pre_attn_scalar = 256;
  t.sliding_window = 4096;
  OCULAR_RETURN_IF_ERROR(ExpectModelType(s, "gemma3_text"));
  OCULAR_RETURN_IF_ERROR(
      s.RequireDefault("attention_bias", false, "q/k/v/o projections have no bias"));
  OCULAR_RETURN_IF_ERROR(s.RequireDefault("use_bidirectional_attention", false,
                                          "the decoder is causal (EmbeddingGemma is not)"));
  OCULAR_RETURN_IF_ERROR(ParseDecoderSizes(s, &t));
  OCULAR_RETURN_IF_ERROR(s.Int("head_dim", 2, kMaxHeadDim, &t.head_dim));
  OCULAR_RETURN_IF_ERROR(
      s.Float("rope_local_base_freq", 1, true, kMaxScalar, &c->rope_local_base_freq));
  OCULAR_RETURN_IF_ERROR(s.Activation("hidden_activation", &t.hidden_act));
  OCULAR_RETURN_IF_ERROR(
      s.Float("query_pre_attn_scalar", 0, true, kMaxScalar, &t.query_pre_attn_scalar));
  OCULAR_RETURN_IF_ERROR(s.Int("sliding_window", 1, kMaxPositions, &t.sliding_window));
  // Gemma3TextConfig defaults both softcaps to None (0 here).
  OCULAR_RETURN_IF_ERROR(
      s.Float("attn_logit_softcapping", 0, false, kMaxScalar, &t.attn_logit_softcapping));
  OCULAR_RETURN_IF_ERROR(
      s.Float("final_logit_softcapping", 0, false, kMaxScalar, &t.final_logit_softcapping));
  OCULAR_RETURN_IF_ERROR(s.Int("pad_token_id", 0, kMaxVocab, &c->pad_token_id));
  OCULAR_RETURN_IF_ERROR(TokenId(s, "bos_token_id", &c->bos_token_id));
  OCULAR_RETURN_IF_ERROR(TokenId(s, "eos_token_id", &c->eos_token_id, &c->eos_token_ids));

  OCULAR_RETURN_IF_ERROR(ParseRopeScaling(s, c));
  return ParseLayerTypes(s, &t);
}

}  // namespace

float Gemma3TextConfig::attention_scale() const {
  return 1.0f / std::sqrt(gemma.query_pre_attn_scalar);
}

Status Gemma3TextConfig::Validate() const {
  OCULAR_RETURN_IF_ERROR(gemma.Validate());
  const RuleError fail("text_config");
  if (!(gemma.query_pre_attn_scalar > 0)) return fail("query_pre_attn_scalar must be > 0");
  if (gemma.sliding_window < 1) return fail("sliding_window must be >= 1");
  if (gemma.layer_is_sliding.size() != static_cast<size_t>(gemma.num_hidden_layers)) {
    return fail("layer_types needs one entry per layer");
  }
  if (!(rope_local_base_freq > 1) || !(rope_scaling_factor > 0)) {
    return fail("rope_local_base_freq must be > 1 and the rope_scaling factor > 0");
  }
  for (auto [name, id] :
       {std::pair{"bos_token_id", bos_token_id}, std::pair{"eos_token_id", eos_token_id}}) {
    if (id < 0 || id >= gemma.vocab_size) {
      return fail(name, " (", id, ") must be a token id below vocab_size (", gemma.vocab_size, ")");
    }
  }
  for (int id : eos_token_ids) {
    if (id < 0 || id >= gemma.vocab_size) {
      return fail("eos_token_id (", id, ") must be a token id below vocab_size (", gemma.vocab_size,
                  ")");
    }
  }
  return Status::Ok();
}

int Gemma3Config::tokens_per_side() const {
  // int(mm_tokens_per_image ** 0.5)
  int s = static_cast<int>(std::sqrt(static_cast<double>(mm_tokens_per_image)));
  while ((s + 1) * (s + 1) <= mm_tokens_per_image) ++s;
  while (s * s > mm_tokens_per_image) --s;
  return s;
}

Status Gemma3Config::Validate() const {
  OCULAR_RETURN_IF_ERROR(text.Validate());
  if (!has_vision) return Status::Ok();
  OCULAR_RETURN_IF_ERROR(vision.Validate());
  const int side = tokens_per_side(), patches = vision.image_size / vision.patch_size;
  if (side * side != mm_tokens_per_image || side < 1 || patches % side != 0) {
    // Gemma3MultiModalProjector pools patches_per_image^2 patches with kernel = stride =
    // patches // side: only an exact square grid gives mm_tokens_per_image rows.
    return Error(StatusCode::kUnimplemented, "config", "mm_tokens_per_image (", mm_tokens_per_image,
                 ") must be a square whose side divides the ", patches, " patches per image side");
  }
  for (auto [name, id] : {std::pair{"image_token_index", image_token_index},
                          std::pair{"boi_token_index", boi_token_index},
                          std::pair{"eoi_token_index", eoi_token_index}}) {
    if (id < 0 || id >= kMaxVocab) {
      return Error(StatusCode::kDataLoss, "config", name, " (", id, ") is not a token id");
    }
  }
  return Status::Ok();
}

StatusOr<Gemma3Config> ParseGemma3Config(const std::string& json_text, const std::string& source) {
  OCULAR_ASSIGN_OR_RETURN(Json j, ParseObject(json_text, source));
  const Section top(j, source, "");
  Gemma3Config c;
  OCULAR_RETURN_IF_ERROR(top.String("model_type", &c.model_type));
  OCULAR_RETURN_IF_ERROR(top.TorchDtype(&c.torch_dtype));
  if (c.model_type == "gemma3_text") {
    OCULAR_RETURN_IF_ERROR(ParseText(top, &c.text));
  } else if (c.model_type == "gemma3") {
    c.has_vision = true;
    OCULAR_ASSIGN_OR_RETURN(const Json* tc, top.Object("text_config"));
    const Json empty = Json::object();
    OCULAR_RETURN_IF_ERROR(ParseText(Section(tc ? *tc : empty, source, "text_config"), &c.text));
    OCULAR_ASSIGN_OR_RETURN(const Json* vc, top.Object("vision_config"));
    if (vc != nullptr) {
      OCULAR_RETURN_IF_ERROR(ParseVision(Section(*vc, source, "vision_config"), &c.vision));
    }
    OCULAR_RETURN_IF_ERROR(
        top.Int("mm_tokens_per_image", 1, kMaxPositions, &c.mm_tokens_per_image));
    for (auto [key, out] : {std::pair{"boi_token_index", &c.boi_token_index},
                            std::pair{"eoi_token_index", &c.eoi_token_index},
                            std::pair{"image_token_index", &c.image_token_index}}) {
      OCULAR_RETURN_IF_ERROR(top.Int(key, 0, kMaxVocab, out));
    }
    // The top-level ids (Gemma3Config kwargs) override nothing in the text model; EOS is
    // read from there when present, as generate() does.
    OCULAR_RETURN_IF_ERROR(
        TokenId(top, "eos_token_id", &c.text.eos_token_id, &c.text.eos_token_ids));
    OCULAR_RETURN_IF_ERROR(TokenId(top, "bos_token_id", &c.text.bos_token_id));
  } else {
    return top.Fail(StatusCode::kUnimplemented, "model_type '", c.model_type.substr(0, 40),
                    "' is not supported (gemma3, gemma3_text)");
  }
  return Validated(std::move(c), source);
}

StatusOr<Gemma3Config> LoadGemma3Config(const FileSet& files) {
  return ReadConfigJson(files, &ParseGemma3Config);
}

}  // namespace ocular::gemma3

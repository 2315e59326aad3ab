#include "models/mllama/config.h"

#include <algorithm>

#include "core/file_io.h"
#include "models/config_section.h"

namespace ocular::mllama {

namespace {

using namespace config_internal;  // NOLINT: the shared config.json readers

constexpr int kMaxTiles = 64;

Status ParseVision(const Section& s, VisionConfig* c) {
  OCULAR_RETURN_IF_ERROR(ExpectModelType(s, "mllama_vision_model"));
  OCULAR_RETURN_IF_ERROR(s.Int("hidden_size", 1, kMaxHidden, &c->hidden_size));
  OCULAR_RETURN_IF_ERROR(s.Activation("hidden_act", &c->hidden_act));
  OCULAR_RETURN_IF_ERROR(s.Int("num_hidden_layers", 1, kMaxLayers, &c->num_hidden_layers));
  OCULAR_RETURN_IF_ERROR(s.Int("num_global_layers", 0, kMaxLayers, &c->num_global_layers));
  // save_pretrained writes "attention_heads" (the attribute); __init__ takes num_attention_heads.
  OCULAR_RETURN_IF_ERROR(s.Int("num_attention_heads", 1, kMaxHeads, &c->num_attention_heads));
  OCULAR_RETURN_IF_ERROR(s.Int("attention_heads", 1, kMaxHeads, &c->num_attention_heads));
  OCULAR_RETURN_IF_ERROR(s.Int("num_channels", 1, 16, &c->num_channels));
  OCULAR_RETURN_IF_ERROR(s.Int("intermediate_size", 1, kMaxIntermediate, &c->intermediate_size));
  OCULAR_RETURN_IF_ERROR(s.Int("vision_output_dim", 1, kMaxHidden * 64, &c->vision_output_dim));
  OCULAR_RETURN_IF_ERROR(s.Int("image_size", 1, kMaxImageSize, &c->image_size));
  OCULAR_RETURN_IF_ERROR(s.Int("patch_size", 1, kMaxImageSize, &c->patch_size));
  OCULAR_RETURN_IF_ERROR(s.Float("norm_eps", 0, true, 1, &c->norm_eps));
  OCULAR_RETURN_IF_ERROR(s.Int("max_num_tiles", 1, kMaxTiles, &c->max_num_tiles));
  OCULAR_RETURN_IF_ERROR(
      s.IntList("intermediate_layers_indices", 0, kMaxLayers, &c->intermediate_layers_indices));
  c->supported_aspect_ratios = SupportedAspectRatios(c->max_num_tiles);
  if (const Json* v = s.Find("supported_aspect_ratios")) {
    std::vector<std::pair<int, int>> given;
    bool ok = v->is_array();
    for (size_t i = 0; ok && i < v->size(); ++i) {
      const Json& e = (*v)[i];
      ok = e.is_array() && e.size() == 2 && e[0].is_number_integer() && e[1].is_number_integer();
      if (ok) given.emplace_back(e[0].get<int>(), e[1].get<int>());
    }
    if (!ok) {
      return s.Fail(StatusCode::kDataLoss, s.Key("supported_aspect_ratios"), " = ", Shown(*v),
                    " must be a list of [tiles, tiles] pairs");
    }
    // MllamaImageProcessor numbers aspect ratios from max_image_tiles alone
    // (convert_aspect_ratios_to_ids): another list would index other embedding rows.
    if (given != c->supported_aspect_ratios) {
      return s.Fail(StatusCode::kUnimplemented, s.Key("supported_aspect_ratios"), " = ", Shown(*v),
                    " is not supported (only the list get_all_supported_aspect_ratios(",
                    c->max_num_tiles, ") gives, which the image processor's ids index)");
    }
  }
  return Status::Ok();
}

Status ParseText(const Section& s, TextConfig* c) {
  OCULAR_RETURN_IF_ERROR(ExpectModelType(s, "mllama_text_model"));
  OCULAR_RETURN_IF_ERROR(
      s.RequireDefault("hidden_act", "silu", "the MLP is SwiGLU: silu(gate) * up"));
  OCULAR_RETURN_IF_ERROR(s.RequireDefault("tie_word_embeddings", false,
                                          "lm_head is its own matrix, as in every release"));
  OCULAR_RETURN_IF_ERROR(ParseDecoderSizes(s, c));
  OCULAR_RETURN_IF_ERROR(
      s.IntList("cross_attention_layers", 0, kMaxLayers, &c->cross_attention_layers));
  OCULAR_RETURN_IF_ERROR(TokenId(s, "bos_token_id", &c->bos_token_id));
  OCULAR_RETURN_IF_ERROR(TokenId(s, "eos_token_id", &c->eos_token_id, &c->eos_token_ids));
  OCULAR_RETURN_IF_ERROR(TokenId(s, "pad_token_id", &c->pad_token_id));
  return s.RopeScaling("llama3", [&](const std::string& type, const Section& r) -> StatusOr<bool> {
    if (type != "llama3") return false;
    c->rope_factor = 8;
    OCULAR_RETURN_IF_ERROR(r.Float("factor", 0, true, kMaxScalar, &c->rope_factor));
    OCULAR_RETURN_IF_ERROR(r.Float("low_freq_factor", 0, true, kMaxScalar, &c->low_freq_factor));
    OCULAR_RETURN_IF_ERROR(r.Float("high_freq_factor", 0, true, kMaxScalar, &c->high_freq_factor));
    OCULAR_RETURN_IF_ERROR(r.Int("original_max_position_embeddings", 1, kMaxPositions,
                                 &c->original_max_position_embeddings));
    if (!(c->high_freq_factor > c->low_freq_factor)) {
      return r.Fail(StatusCode::kDataLoss, r.Described(),
                    ": high_freq_factor must exceed low_freq_factor");
    }
    return true;
  });
}

}  // namespace

std::vector<std::pair<int, int>> SupportedAspectRatios(int max_tiles) {
  std::vector<std::pair<int, int>> out;
  for (int a = 1; a <= max_tiles; ++a) {
    for (int b = 1; b <= max_tiles; ++b) {
      if (a * b <= max_tiles) out.emplace_back(a, b);
    }
  }
  return out;
}

bool TextConfig::IsCross(int layer) const {
  return std::find(cross_attention_layers.begin(), cross_attention_layers.end(), layer) !=
         cross_attention_layers.end();
}

Status VisionConfig::Validate() const {
  const RuleError fail("vision_config");
  if (hidden_size % num_attention_heads != 0) {
    return fail(StatusCode::kDataLoss, "hidden_size (", hidden_size,
                ") must be divisible by attention_heads (", num_attention_heads, ")");
  }
  if (image_size < patch_size || image_size % patch_size != 0) {
    return fail(StatusCode::kDataLoss, "image_size (", image_size,
                ") must be a positive multiple of patch_size (", patch_size, ")");
  }
  if (num_channels != 3) return fail(StatusCode::kUnimplemented, "num_channels must be 3 (RGB)");
  // patches() = g^2 + 1 is never a multiple of 8 (squares are 0, 1 or 4 mod 8), so the vision
  // tower always pads (_prepare_aspect_ratio_attention_mask's -pad_patches slice needs that).
  for (int i : intermediate_layers_indices) {
    if (i >= num_hidden_layers) {
      return fail(StatusCode::kDataLoss, "intermediate_layers_indices has ", i,
                  ", past the last of ", num_hidden_layers, " layers");
    }
  }
  const int64_t want = int64_t{hidden_size} * (1 + intermediate_layers_indices.size());
  if (vision_output_dim != want) {
    return fail(StatusCode::kDataLoss, "vision_output_dim (", vision_output_dim,
                ") must be hidden_size * (1 + len(intermediate_layers_indices)) = ", want);
  }
  return Status::Ok();
}

Status TextConfig::Validate() const {
  const RuleError fail("text_config");
  OCULAR_RETURN_IF_ERROR(CheckHeads(hidden_size, num_attention_heads, num_key_value_heads, fail));
  if (head_dim() % 2 != 0) return fail("head_dim (", head_dim(), ") must be even for RoPE");
  for (int l : cross_attention_layers) {
    if (l >= num_hidden_layers) {
      return fail("cross_attention_layers has ", l, ", past the last of ", num_hidden_layers,
                  " layers");
    }
  }
  for (auto [name, id] :
       {std::pair{"bos_token_id", bos_token_id}, std::pair{"eos_token_id", eos_token_id}}) {
    if (id >= vocab_size + 8) {
      return fail(name, " (", id, ") is past the embedding table (", vocab_size + 8, " rows)");
    }
  }
  for (int id : eos_token_ids) {
    if (id >= vocab_size + 8) {
      return fail("eos_token_id (", id, ") is past the embedding table (", vocab_size + 8,
                  " rows)");
    }
  }
  return Status::Ok();
}

Status MllamaConfig::Validate() const {
  OCULAR_RETURN_IF_ERROR(vision.Validate());
  OCULAR_RETURN_IF_ERROR(text.Validate());
  if (image_token_index < 0 || image_token_index >= text.vocab_size + 8) {
    return Error(StatusCode::kDataLoss, "config", "image_token_index (", image_token_index,
                 ") is past the embedding table (", text.vocab_size + 8, " rows)");
  }
  return Status::Ok();
}

StatusOr<MllamaConfig> ParseMllamaConfig(const std::string& json_text, const std::string& source) {
  OCULAR_ASSIGN_OR_RETURN(Json j, ParseObject(json_text, source));
  const Section top(j, source, "");
  MllamaConfig c;
  std::string model_type;
  OCULAR_RETURN_IF_ERROR(top.String("model_type", &model_type));
  if (model_type != "mllama") {
    return top.Fail(StatusCode::kUnimplemented, "model_type '", model_type.substr(0, 40),
                    "' is not supported (mllama)");
  }
  OCULAR_RETURN_IF_ERROR(top.TorchDtype(&c.torch_dtype));
  OCULAR_RETURN_IF_ERROR(top.Int("image_token_index", 0, kMaxVocab, &c.image_token_index));
  const Json empty = Json::object();
  OCULAR_ASSIGN_OR_RETURN(const Json* vc, top.Object("vision_config"));
  OCULAR_RETURN_IF_ERROR(
      ParseVision(Section(vc ? *vc : empty, source, "vision_config"), &c.vision));
  OCULAR_ASSIGN_OR_RETURN(const Json* tc, top.Object("text_config"));
  OCULAR_RETURN_IF_ERROR(ParseText(Section(tc ? *tc : empty, source, "text_config"), &c.text));
  return Validated(std::move(c), source);
}

StatusOr<MllamaConfig> LoadMllamaConfig(const FileSet& files) {
  return ReadConfigJson(files, &ParseMllamaConfig);
}

}  // namespace ocular::mllama

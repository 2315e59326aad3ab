#include "models/config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"

namespace ocular {

namespace {

using Json = nlohmann::json;

// Reads `key` into `out` if present; type errors become a Status naming the key.
template <typename T>
Status Get(const Json& j, const char* key, T* out, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return Error(StatusCode::kInvalidArgument, "config", source, ": '", key, "' must be a string");
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return Error(StatusCode::kInvalidArgument, "config", source, ": '", key, "' must be a boolean");
  } else {
    if (!it->is_number()) return Error(StatusCode::kInvalidArgument, "config", source, ": '", key, "' must be a number");
    if constexpr (std::is_integral_v<T>) {
      double v = it->get<double>();
      if (v != std::floor(v) || v < -2147483648.0 || v > 2147483647.0) {
        return Error(StatusCode::kInvalidArgument, "config", source, ": '", key, "' must be an integer");
      }
    }
  }
  *out = it->get<T>();
  return Status::Ok();
}

Status GetActivation(const Json& j, const char* key, Activation* out, const std::string& source) {
  std::string name;
  OCULAR_RETURN_IF_ERROR(Get(j, key, &name, source));
  if (name.empty()) return Status::Ok();
  if (name == "gelu_pytorch_tanh" || name == "gelu_new" || name == "gelu_fast") {
    *out = Activation::kGeluTanh;
  } else if (name == "gelu") {
    *out = Activation::kGeluErf;
  } else {
    return Error(StatusCode::kUnimplemented, "config", source, ": activation '", name,
                 "' is not supported (gelu_pytorch_tanh, gelu)");
  }
  return Status::Ok();
}

Status ParseVision(const Json& j, SiglipVisionConfig* v, const std::string& src) {
  OCULAR_RETURN_IF_ERROR(Get(j, "hidden_size", &v->hidden_size, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "intermediate_size", &v->intermediate_size, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "num_hidden_layers", &v->num_hidden_layers, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "num_attention_heads", &v->num_attention_heads, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "num_channels", &v->num_channels, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "image_size", &v->image_size, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "patch_size", &v->patch_size, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "layer_norm_eps", &v->layer_norm_eps, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "vision_use_head", &v->vision_use_head, src));
  return GetActivation(j, "hidden_act", &v->hidden_act, src);
}

Status ParseText(const Json& j, GemmaTextConfig* t, const std::string& src) {
  OCULAR_RETURN_IF_ERROR(Get(j, "model_type", &t->model_type, src));
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
    return Error(StatusCode::kUnimplemented, "config", src, ": text_config.model_type '",
                 t->model_type, "' is not supported (gemma, gemma2)");
  }
  OCULAR_RETURN_IF_ERROR(Get(j, "vocab_size", &t->vocab_size, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "hidden_size", &t->hidden_size, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "intermediate_size", &t->intermediate_size, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "num_hidden_layers", &t->num_hidden_layers, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "num_attention_heads", &t->num_attention_heads, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "num_key_value_heads", &t->num_key_value_heads, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "head_dim", &t->head_dim, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "max_position_embeddings", &t->max_position_embeddings, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "rms_norm_eps", &t->rms_norm_eps, src));
  OCULAR_RETURN_IF_ERROR(Get(j, "rope_theta", &t->rope_theta, src));
  if (auto rs = j.find("rope_scaling"); rs != j.end() && !rs->is_null()) {
    return Error(StatusCode::kUnimplemented, "config", src, ": rope_scaling is not supported for Gemma");
  }
  // Gemma 1 reads hidden_act; Gemma 2 reads hidden_activation (modeling_gemma{,2}.py MLP).
  OCULAR_RETURN_IF_ERROR(GetActivation(j, t->is_gemma2() ? "hidden_activation" : "hidden_act",
                                       &t->hidden_act, src));
  if (t->is_gemma2()) {
    OCULAR_RETURN_IF_ERROR(Get(j, "query_pre_attn_scalar", &t->query_pre_attn_scalar, src));
    OCULAR_RETURN_IF_ERROR(Get(j, "sliding_window", &t->sliding_window, src));
    // null softcaps mean "disabled".
    auto cap = [&](const char* key, float* out) -> Status {
      auto it = j.find(key);
      if (it != j.end() && it->is_null()) {
        *out = 0;
        return Status::Ok();
      }
      return Get(j, key, out, src);
    };
    OCULAR_RETURN_IF_ERROR(cap("attn_logit_softcapping", &t->attn_logit_softcapping));
    OCULAR_RETURN_IF_ERROR(cap("final_logit_softcapping", &t->final_logit_softcapping));
    t->layer_is_sliding.assign(t->num_hidden_layers, false);
    auto lt = j.find("layer_types");
    if (lt != j.end() && lt->is_array()) {
      if (static_cast<int>(lt->size()) != t->num_hidden_layers) {
        return Error(StatusCode::kInvalidArgument, "config", src, ": layer_types has ", lt->size(),
                     " entries, num_hidden_layers is ", t->num_hidden_layers);
      }
      for (int i = 0; i < t->num_hidden_layers; ++i) {
        const Json& e = (*lt)[i];
        if (!e.is_string() || (e != "sliding_attention" && e != "full_attention")) {
          return Error(StatusCode::kUnimplemented, "config", src, ": layer_types[", i,
                       "] must be sliding_attention or full_attention");
        }
        t->layer_is_sliding[i] = e == "sliding_attention";
      }
    } else {
      // configuration_gemma2.py: sliding on even layer indices.
      for (int i = 0; i < t->num_hidden_layers; ++i) t->layer_is_sliding[i] = (i + 1) % 2 == 1;
    }
  }
  return Status::Ok();
}

}  // namespace

float GemmaTextConfig::attention_scale() const {
  const float s = is_gemma2() ? query_pre_attn_scalar : static_cast<float>(head_dim);
  return 1.0f / std::sqrt(s);
}

Status SiglipVisionConfig::Validate() const {
  if (hidden_size <= 0 || num_attention_heads <= 0 || hidden_size % num_attention_heads ||
      intermediate_size <= 0 || num_hidden_layers < 0 || patch_size <= 0 ||
      image_size < patch_size || image_size % patch_size || num_channels != 3) {
    return Error(StatusCode::kInvalidArgument, "config",
                 "vision_config is inconsistent: hidden_size ", hidden_size, ", heads ",
                 num_attention_heads, ", image_size ", image_size, ", patch_size ", patch_size,
                 ", channels ", num_channels);
  }
  if (vision_use_head) {
    return Error(StatusCode::kUnimplemented, "config", "vision_use_head=true is not supported");
  }
  return Status::Ok();
}

Status GemmaTextConfig::Validate() const {
  if (hidden_size <= 0 || num_hidden_layers <= 0 || num_attention_heads <= 0 ||
      num_key_value_heads <= 0 || num_attention_heads % num_key_value_heads || head_dim <= 0 ||
      head_dim % 2 || intermediate_size <= 0 || vocab_size <= 0) {
    return Error(StatusCode::kInvalidArgument, "config", "text_config is inconsistent: hidden ",
                 hidden_size, ", heads ", num_attention_heads, "/", num_key_value_heads,
                 " kv, head_dim ", head_dim);
  }
  if (is_gemma2() && (query_pre_attn_scalar <= 0 || sliding_window < 0)) {
    return Error(StatusCode::kInvalidArgument, "config",
                 "gemma2 needs query_pre_attn_scalar > 0 and sliding_window >= 0");
  }
  return Status::Ok();
}

Status PaliGemmaConfig::Validate() const {
  OCULAR_RETURN_IF_ERROR(vision.Validate());
  OCULAR_RETURN_IF_ERROR(text.Validate());
  if (image_token_index < 0 || image_token_index >= text.vocab_size) {
    return Error(StatusCode::kInvalidArgument, "config", "image_token_index ", image_token_index,
                 " outside the vocabulary (", text.vocab_size, ")");
  }
  return Status::Ok();
}

StatusOr<PaliGemmaConfig> ParsePaliGemmaConfig(const std::string& json_text,
                                               const std::string& source) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Error(StatusCode::kInvalidArgument, "config", source, ": not a JSON object");
  }
  PaliGemmaConfig c;
  std::string model_type;
  OCULAR_RETURN_IF_ERROR(Get(j, "model_type", &model_type, source));
  if (model_type != "paligemma") {
    return Error(StatusCode::kUnimplemented, "config", source, ": model_type '", model_type,
                 "' is not supported (supported: paligemma)");
  }
  OCULAR_RETURN_IF_ERROR(Get(j, "torch_dtype", &c.torch_dtype, source));
  OCULAR_RETURN_IF_ERROR(Get(j, "dtype", &c.torch_dtype, source));
  OCULAR_RETURN_IF_ERROR(Get(j, "image_token_index", &c.image_token_index, source));
  OCULAR_RETURN_IF_ERROR(Get(j, "image_token_id", &c.image_token_index, source));
  OCULAR_RETURN_IF_ERROR(Get(j, "vocab_size", &c.vocab_size, source));
  OCULAR_RETURN_IF_ERROR(Get(j, "projection_dim", &c.projection_dim, source));
  OCULAR_RETURN_IF_ERROR(Get(j, "pad_token_id", &c.pad_token_id, source));
  OCULAR_RETURN_IF_ERROR(Get(j, "bos_token_id", &c.bos_token_id, source));
  OCULAR_RETURN_IF_ERROR(Get(j, "eos_token_id", &c.eos_token_id, source));

  auto vc = j.find("vision_config");
  if (vc != j.end() && vc->is_object()) {
    OCULAR_RETURN_IF_ERROR(ParseVision(*vc, &c.vision, source));
  } else {
    // PaliGemmaConfig's own defaults when vision_config is absent.
    c.vision.intermediate_size = 4096;
    c.vision.hidden_size = 1152;
    c.vision.patch_size = 14;
    c.vision.image_size = 224;
    c.vision.num_hidden_layers = 27;
    c.vision.num_attention_heads = 16;
  }
  auto tc = j.find("text_config");
  if (tc != j.end() && tc->is_object()) {
    OCULAR_RETURN_IF_ERROR(ParseText(*tc, &c.text, source));
  } else {
    c.text.hidden_size = 2048;
    c.text.num_hidden_layers = 18;
    c.text.intermediate_size = 16384;
    c.text.num_attention_heads = 8;
    c.text.num_key_value_heads = 1;
    c.text.vocab_size = c.vocab_size;
  }
  OCULAR_RETURN_IF_ERROR(c.Validate());
  return c;
}

StatusOr<PaliGemmaConfig> LoadPaliGemmaConfig(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  OCULAR_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParsePaliGemmaConfig(text, path);
}

}  // namespace ocular

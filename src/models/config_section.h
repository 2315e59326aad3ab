// Internal to models/: reading one section of a config.json with ocular's error conventions
// (shared by the family configs: config.cc, gemma3/config.cc, mllama/config.cc).
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "core/file_set.h"
#include "models/config.h"
#include "ocular/status.h"

namespace ocular::config_internal {

using Json = nlohmann::json;

// Upper bounds: far above any released PaliGemma (SigLIP So400m: hidden 1152, 27 layers;
// Gemma 2 27B: hidden 4608, 46 layers, vocab 256000) and low enough that every size product the
// engine forms fits in int64 and no allocation is attempted from a nonsensical header.
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHidden = 65536;
constexpr int64_t kMaxIntermediate = 1 << 20;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 4096;
constexpr int64_t kMaxVocab = 1 << 24;
constexpr int64_t kMaxPositions = 1 << 20;
constexpr int64_t kMaxImageSize = 16384;  // as preprocessor_config.json's size
constexpr double kMaxScalar = 1e12;

// A JSON value as it appears in an error: short, never a 300-digit number or a whole object.
inline std::string Shown(const Json& v) { return ShortJson(v, 40); }

// Reads one section of config.json ("", "text_config", "vision_config"). Every error names the
// file and the dotted key: "[config] dir/config.json: text_config.num_hidden_layers = -1 ...".
// Codes: wrong type or below a field's minimum → kDataLoss (a corrupt file, exit 4); above
// ocular's maximum → kResourceExhausted (exit 6); a value the engine does not implement →
// kUnimplemented (exit 5).
class Section {
 public:
  Section(const Json& j, const std::string& source, std::string name)
      : j_(j), source_(source), name_(std::move(name)) {}

  std::string Key(const char* key) const { return name_.empty() ? key : name_ + "." + key; }

  template <typename... Args>
  Status Fail(StatusCode code, const Args&... args) const {
    return Error(code, "config", source_, ": ", args...);
  }

  // The value of `key`, or nullptr when absent or null (the field keeps its default).
  const Json* Find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  bool IsNull(const char* key) const {
    auto it = j_.find(key);
    return it != j_.end() && it->is_null();
  }

  // An integer in [lo, hi].
  Status Int(const char* key, int64_t lo, int64_t hi, int* out) const {
    const Json* v = Find(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_number() ||
        (v->is_number_float() && v->get<double>() != std::floor(v->get<double>()))) {
      return Fail(StatusCode::kDataLoss, Key(key), " must be an integer, got ", Shown(*v));
    }
    const double d = v->get<double>();  // exact for every value in range
    if (d < static_cast<double>(lo)) {
      return Fail(StatusCode::kDataLoss, Key(key), " = ", Shown(*v), " is below the minimum ", lo);
    }
    if (d > static_cast<double>(hi)) {
      return Fail(StatusCode::kResourceExhausted, Key(key), " = ", Shown(*v),
                  " is over ocular's limit of ", hi);
    }
    *out = static_cast<int>(v->get<int64_t>());
    return Status::Ok();
  }

  // A finite number in (lo, hi] if lo_exclusive, else [lo, hi].
  Status Float(const char* key, double lo, bool lo_exclusive, double hi, float* out) const {
    const Json* v = Find(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_number()) {
      return Fail(StatusCode::kDataLoss, Key(key), " must be a number, got ", Shown(*v));
    }
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || (lo_exclusive && d == lo) || d > hi) {
      return Fail(StatusCode::kDataLoss, Key(key), " = ", Shown(*v), " is outside ",
                  lo_exclusive ? "(" : "[", lo, ", ", hi, "]");
    }
    *out = static_cast<float>(d);
    return Status::Ok();
  }

  Status String(const char* key, std::string* out) const {
    const Json* v = Find(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_string()) {
      return Fail(StatusCode::kDataLoss, Key(key), " must be a string, got ", Shown(*v));
    }
    *out = v->get<std::string>();
    return Status::Ok();
  }

  Status Bool(const char* key, bool* out) const {
    const Json* v = Find(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_boolean()) {
      return Fail(StatusCode::kDataLoss, Key(key), " must be true or false, got ", Shown(*v));
    }
    *out = v->get<bool>();
    return Status::Ok();
  }

  // A key that changes the math in transformers but that ocular implements only at its default
  // value: any other value is refused rather than ignored. `what` says what the default means.
  Status RequireDefault(const char* key, const Json& expected, const char* what) const {
    const Json* v = Find(key);
    if (v == nullptr || *v == expected) return Status::Ok();
    return Fail(StatusCode::kUnimplemented, Key(key), " = ", Shown(*v), " is not supported (", what,
                ")");
  }

  Status Activation(const char* key, ocular::Activation* out) const {
    std::string name;
    OCULAR_RETURN_IF_ERROR(String(key, &name));
    if (name.empty()) return Status::Ok();
    // transformers' ACT2FN: gelu_pytorch_tanh, gelu_new and gelu_fast are the tanh approximation;
    // gelu is the exact erf form. Everything else (quick_gelu, relu, silu, ...) is other math.
    if (name == "gelu_pytorch_tanh" || name == "gelu_new" || name == "gelu_fast") {
      *out = Activation::kGeluTanh;
    } else if (name == "gelu") {
      *out = Activation::kGeluErf;
    } else {
      return Fail(StatusCode::kUnimplemented, Key(key), " = '", name.substr(0, 40),
                  "' is not supported (gelu_pytorch_tanh, gelu_new, gelu_fast, gelu)");
    }
    return Status::Ok();
  }

  // rope_scaling's type: "rope_type", or the backward-compatible "type" ("" if neither).
  Status RopeType(std::string* type) const {
    OCULAR_RETURN_IF_ERROR(String("rope_type", type));
    return type->empty() ? String("type", type) : Status::Ok();
  }

  // "rope_scaling": absent, null or of type "default" (nothing to read); else `read(type, r)`
  // (-> StatusOr<bool>) reads the object `r` of a type the family takes and returns true, or
  // returns false for one it does not: kUnimplemented "... is not supported (null, default or
  // `others`)".
  template <typename Read>
  Status RopeScaling(const char* others, const Read& read) const {
    OCULAR_ASSIGN_OR_RETURN(const Json* rs, Object("rope_scaling"));
    if (rs == nullptr) return Status::Ok();
    const Section r(*rs, source_, Key("rope_scaling"));
    std::string type;
    OCULAR_RETURN_IF_ERROR(r.RopeType(&type));
    if (type == "default") return Status::Ok();
    OCULAR_ASSIGN_OR_RETURN(const bool taken, read(type, r));
    if (taken) return Status::Ok();
    return r.Fail(StatusCode::kUnimplemented, r.Described(), " is not supported (null, default or ",
                  others, ")");
  }

  // "<section> = <its JSON, short>", for an error about the section as a whole.
  std::string Described() const { return name_ + " = " + Shown(j_); }

  // The checkpoint's dtype: "torch_dtype", or "dtype" (its name since transformers 4.56), which
  // wins when both are present. Informational.
  Status TorchDtype(std::string* out) const {
    OCULAR_RETURN_IF_ERROR(String("torch_dtype", out));
    return String("dtype", out);
  }

  // A list of integers in [lo, hi] (absent or null: unchanged).
  Status IntList(const char* key, int64_t lo, int64_t hi, std::vector<int>* out) const {
    const Json* v = Find(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_array() || v->size() > static_cast<size_t>(kMaxLayers)) {
      return Fail(StatusCode::kDataLoss, Key(key), " must be a list of integers, got ", Shown(*v));
    }
    out->clear();
    for (const Json& e : *v) {
      if (!e.is_number_integer() || e.get<int64_t>() < lo || e.get<int64_t>() > hi) {
        return Fail(StatusCode::kDataLoss, Key(key), " = ", Shown(*v), " must list integers in [",
                    lo, ", ", hi, "]");
      }
      out->push_back(e.get<int>());
    }
    return Status::Ok();
  }

  // A nested object (null or absent: false). Anything else is a corrupt file.
  StatusOr<const Json*> Object(const char* key) const {
    const Json* v = Find(key);
    if (v == nullptr) return static_cast<const Json*>(nullptr);
    if (!v->is_object()) {
      return Fail(StatusCode::kDataLoss, Key(key), " must be an object, got ", Shown(*v));
    }
    return v;
  }

 private:
  const Json& j_;
  const std::string& source_;
  std::string name_;
};

// The error of a rule a config's Validate() checks in `section` ("text_config"):
// "[config] text_config: ..." with kDataLoss, or with the code given first (kUnimplemented: a
// value ocular does not implement).
class RuleError {
 public:
  explicit RuleError(const char* section) : section_(section) {}
  template <typename... Args>
  Status operator()(StatusCode code, const Args&... args) const {
    return Error(code, "config", section_, ": ", args...);
  }
  template <typename... Args>
  Status operator()(const Args&... args) const {
    return Error(StatusCode::kDataLoss, "config", section_, ": ", args...);
  }

 private:
  const char* section_;
};

// A parsed config after its Validate(): the rule that failed, "[config] rule", as
// "[config] <source>: rule".
template <typename Config>
StatusOr<Config> Validated(Config c, const std::string& source) {
  const Status valid = c.Validate();
  if (valid.ok()) return c;
  std::string rule = valid.message();
  if (rule.rfind("[config] ", 0) == 0) rule = rule.substr(9);
  return Error(valid.code(), "config", source, ": ", rule);
}

// files' config.json through parse(text, where it was read).
template <typename Config>
StatusOr<Config> ReadConfigJson(const FileSet& files,
                                StatusOr<Config> (*parse)(const std::string&, const std::string&)) {
  OCULAR_ASSIGN_OR_RETURN(std::string text,
                          files.Read("config.json", kMaxConfigFileBytes, "config"));
  return parse(text, files.Where("config.json"));
}

// config.json text as a JSON object: kDataLoss (malformed JSON with line and column, or not
// an object) naming `source`.
inline StatusOr<Json> ParseObject(const std::string& json_text, const std::string& source) {
  OCULAR_ASSIGN_OR_RETURN(Json j, ParseJson(json_text, source, "config"));
  if (!j.is_object()) return Error(StatusCode::kDataLoss, "config", source, ": not a JSON object");
  return j;
}

// The sizes every family's decoder config names alike (LlamaConfig's fields, in range).
// `kv_heads_default_heads`: an absent num_key_value_heads is num_attention_heads (the class
// default of Qwen2's configs), not the struct's default.
template <typename TextConfig>
Status ParseDecoderSizes(const Section& s, TextConfig* t, bool kv_heads_default_heads = false) {
  OCULAR_RETURN_IF_ERROR(s.Int("vocab_size", 1, kMaxVocab, &t->vocab_size));
  OCULAR_RETURN_IF_ERROR(s.Int("hidden_size", 1, kMaxHidden, &t->hidden_size));
  OCULAR_RETURN_IF_ERROR(s.Int("intermediate_size", 1, kMaxIntermediate, &t->intermediate_size));
  OCULAR_RETURN_IF_ERROR(s.Int("num_hidden_layers", 1, kMaxLayers, &t->num_hidden_layers));
  OCULAR_RETURN_IF_ERROR(s.Int("num_attention_heads", 1, kMaxHeads, &t->num_attention_heads));
  if (kv_heads_default_heads) t->num_key_value_heads = t->num_attention_heads;
  OCULAR_RETURN_IF_ERROR(s.Int("num_key_value_heads", 1, kMaxHeads, &t->num_key_value_heads));
  OCULAR_RETURN_IF_ERROR(
      s.Int("max_position_embeddings", 1, kMaxPositions, &t->max_position_embeddings));
  OCULAR_RETURN_IF_ERROR(s.Float("rms_norm_eps", 0, true, 1, &t->rms_norm_eps));
  return s.Float("rope_theta", 1, true, kMaxScalar, &t->rope_theta);
}

// hidden_size = heads * head_dim, heads a multiple of kv_heads (GQA), for the decoders whose
// head_dim is hidden_size / heads. `fail` makes the error.
template <typename Fail>
Status CheckHeads(int hidden_size, int heads, int kv_heads, const Fail& fail) {
  if (hidden_size % heads != 0 || heads % kv_heads != 0) {
    return fail("hidden_size (", hidden_size, ") must be divisible by num_attention_heads (", heads,
                "), and that by num_key_value_heads (", kv_heads, ")");
  }
  return Status::Ok();
}

// A nested config's model_type: absent, or `expected` (another one is kUnimplemented).
inline Status ExpectModelType(const Section& s, const char* expected) {
  std::string model_type;
  OCULAR_RETURN_IF_ERROR(s.String("model_type", &model_type));
  if (!model_type.empty() && model_type != expected) {
    return s.Fail(StatusCode::kUnimplemented, s.Key("model_type"), " = '", model_type.substr(0, 40),
                  "' is not supported (", expected, ")");
  }
  return Status::Ok();
}

inline Status ParseVision(const Section& s, SiglipVisionConfig* v) {
  OCULAR_RETURN_IF_ERROR(ExpectModelType(s, "siglip_vision_model"));
  OCULAR_RETURN_IF_ERROR(s.Int("hidden_size", 1, kMaxHidden, &v->hidden_size));
  OCULAR_RETURN_IF_ERROR(s.Int("intermediate_size", 1, kMaxIntermediate, &v->intermediate_size));
  OCULAR_RETURN_IF_ERROR(s.Int("num_hidden_layers", 0, kMaxLayers, &v->num_hidden_layers));
  OCULAR_RETURN_IF_ERROR(s.Int("num_attention_heads", 1, kMaxHeads, &v->num_attention_heads));
  OCULAR_RETURN_IF_ERROR(s.Int("num_channels", 1, 4, &v->num_channels));
  OCULAR_RETURN_IF_ERROR(s.Int("image_size", 1, kMaxImageSize, &v->image_size));
  OCULAR_RETURN_IF_ERROR(s.Int("patch_size", 1, kMaxImageSize, &v->patch_size));
  OCULAR_RETURN_IF_ERROR(s.Float("layer_norm_eps", 0, true, 1, &v->layer_norm_eps));
  OCULAR_RETURN_IF_ERROR(s.Bool("vision_use_head", &v->vision_use_head));
  return s.Activation("hidden_act", &v->hidden_act);
}

// A token id, or a list of them (eos_token_id: [1, 106] in released configs): `out` is the
// first, `all` (if given) every one.
inline Status TokenId(const Section& s, const char* key, int* out,
                      std::vector<int>* all = nullptr) {
  const Json* v = s.Find(key);
  if (v != nullptr && v->is_array()) {
    if (v->empty() || v->size() > 64) {
      return s.Fail(StatusCode::kDataLoss, s.Key(key), " = ", Shown(*v),
                    " must be a token id or a list of them");
    }
    std::vector<int> ids;
    for (const Json& e : *v) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= kMaxVocab) {
        return s.Fail(StatusCode::kDataLoss, s.Key(key), " = ", Shown(*v),
                      " must be a token id or a list of them");
      }
      ids.push_back(e.get<int>());
    }
    *out = ids[0];
    if (all != nullptr) *all = std::move(ids);
    return Status::Ok();
  }
  const bool present = v != nullptr;
  OCULAR_RETURN_IF_ERROR(s.Int(key, 0, kMaxVocab, out));
  if (all != nullptr && present) *all = {*out};
  return Status::Ok();
}

}  // namespace ocular::config_internal

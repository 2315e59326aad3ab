#include "io/gguf_meta.h"

namespace ocular {

StatusOr<int64_t> GgufMeta::Required(std::string_view key, int64_t max) const {
  OCULAR_ASSIGN_OR_RETURN(uint64_t v, g_.GetUint(key));
  if (v == 0 || v > static_cast<uint64_t>(max)) {
    return Corrupt("metadata '", key, "' = ", v, " is out of range [1, ", max, "]");
  }
  return static_cast<int64_t>(v);
}

StatusOr<double> GgufMeta::OptionalFloat(std::string_view key, double fallback) const {
  if (g_.Find(key) == nullptr) return fallback;
  return g_.GetFloat(key);
}

StatusOr<bool> GgufMeta::OptionalBool(std::string_view key, bool fallback) const {
  const GgufValue* v = g_.Find(key);
  if (v == nullptr) return fallback;
  if (v->type != GgufType::kBool) return Corrupt("metadata '", key, "' is not a bool");
  return v->u != 0;
}

StatusOr<int32_t> GgufMeta::OptionalId(std::string_view key, int64_t n) const {
  if (g_.Find(key) == nullptr) return -1;
  OCULAR_ASSIGN_OR_RETURN(uint64_t id, g_.GetUint(key));
  if (id >= static_cast<uint64_t>(n)) {
    return Corrupt("metadata '", key, "' = ", id, " is outside the vocabulary of ", n, " tokens");
  }
  return static_cast<int32_t>(id);
}

int64_t GgufMeta::TokenId(std::string_view piece) const {
  const GgufValue* tokens = g_.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr) return -1;
  for (size_t i = 0; i < tokens->strings.size(); ++i) {
    if (tokens->strings[i] == piece) return static_cast<int64_t>(i);
  }
  return -1;
}

Status GgufMeta::CheckKeys(const GgufKeys& known,
                           const std::function<bool(std::string_view)>& checked,
                           std::string_view what) const {
  for (const auto& [key, value] : g_.metadata()) {
    if (checked(key) && !known.contains(key)) {
      return Refuse("metadata '", key, "' is not implemented for ", what);
    }
  }
  return Status::Ok();
}

StatusOr<int64_t> GgufMeta::VocabRows() const {
  const GgufTensor* embed = g_.FindTensor("token_embd.weight");
  if (embed == nullptr || embed->ne.size() != 2) return Corrupt("no 2-D tensor token_embd.weight");
  return static_cast<int64_t>(embed->ne[1]);
}

Status GgufMeta::SetTokenIds(std::initializer_list<std::pair<const char*, const char*>> pieces,
                             std::string_view model, nlohmann::ordered_json* c) const {
  for (auto [key, piece] : pieces) {
    const int64_t id = TokenId(piece);
    if (id < 0) {
      return Refuse("the vocabulary (tokenizer.ggml.tokens) has no ", piece, ", which ", model,
                    "'s image prompt needs");
    }
    (*c)[key] = id;
  }
  return Status::Ok();
}

GgufKeys PrefixedKeys(std::string_view prefix, std::initializer_list<const char*> names) {
  GgufKeys keys;
  for (const char* name : names) keys.insert(std::string(prefix) + name);
  return keys;
}

GgufKeys VocabKeys(std::initializer_list<const char*> extra) {
  GgufKeys keys = PrefixedKeys(
      "tokenizer.ggml.",
      {"model", "pre", "tokens", "token_type", "bos_token_id", "eos_token_id", "unknown_token_id",
       "padding_token_id", "eot_token_id", "add_bos_token", "add_eos_token", "add_sep_token"});
  keys.merge(PrefixedKeys("tokenizer.ggml.", extra));
  keys.insert("tokenizer.chat_template");
  return keys;
}

GgufKeys LlmKeys(std::string_view arch, std::initializer_list<const char*> extra) {
  const std::string prefix = std::string(arch) + ".";
  GgufKeys keys = PrefixedKeys(
      prefix, {"context_length", "embedding_length", "block_count", "feed_forward_length",
               "attention.head_count", "attention.head_count_kv",
               "attention.layer_norm_rms_epsilon", "rope.freq_base"});
  keys.merge(PrefixedKeys(prefix, extra));
  return keys;
}

Status SetLlmConfig(const GgufMeta& g, std::string_view arch, double rope_theta,
                    nlohmann::ordered_json* c) {
  const std::string a(arch);
  nlohmann::ordered_json& j = *c;
  OCULAR_ASSIGN_OR_RETURN(j["vocab_size"], g.VocabRows());
  OCULAR_ASSIGN_OR_RETURN(j["hidden_size"], g.Required(a + ".embedding_length"));
  OCULAR_ASSIGN_OR_RETURN(j["intermediate_size"], g.Required(a + ".feed_forward_length"));
  OCULAR_ASSIGN_OR_RETURN(j["num_hidden_layers"], g.Required(a + ".block_count"));
  OCULAR_ASSIGN_OR_RETURN(j["num_attention_heads"], g.Required(a + ".attention.head_count"));
  OCULAR_ASSIGN_OR_RETURN(j["num_key_value_heads"], g.Required(a + ".attention.head_count_kv"));
  OCULAR_ASSIGN_OR_RETURN(j["max_position_embeddings"], g.Required(a + ".context_length"));
  OCULAR_ASSIGN_OR_RETURN(j["rms_norm_eps"],
                          g.file().GetFloat(a + ".attention.layer_norm_rms_epsilon"));
  OCULAR_ASSIGN_OR_RETURN(j["rope_theta"], g.OptionalFloat(a + ".rope.freq_base", rope_theta));
  return Status::Ok();
}

}  // namespace ocular

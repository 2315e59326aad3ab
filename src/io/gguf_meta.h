// The metadata rules every reader of llama.cpp's files shares (a text GGUF's hyperparameters,
// its vocabulary, an mmproj file): errors that name the file, bounded integers, optional values
// with their defaults, and a key nothing reads refused rather than ignored (it would change
// what llama.cpp computes).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "io/gguf.h"
#include "ocular/status.h"

namespace ocular {

// A set of metadata keys, looked up by string_view.
using GgufKeys = std::set<std::string, std::less<>>;

// Reads one file's metadata; errors carry `tag` ("gguf", "mmproj") and the file's origin.
class GgufMeta {
 public:
  explicit GgufMeta(const GgufFile& g, const char* tag = "gguf") : g_(g), tag_(tag) {}

  // kUnimplemented: what the file asks for that ocular does not do.
  template <typename... Args>
  Status Refuse(const Args&... what) const {
    return Error(StatusCode::kUnimplemented, tag_, g_.origin(), ": ", what...);
  }
  // kDataLoss: a value the file cannot mean.
  template <typename... Args>
  Status Corrupt(const Args&... what) const {
    return Error(StatusCode::kDataLoss, tag_, g_.origin(), ": ", what...);
  }

  // An unsigned integer key in [1, max]; absent is GetUint's kNotFound.
  StatusOr<int64_t> Required(std::string_view key, int64_t max = int64_t{1} << 31) const;
  // A float key, or `fallback` when the file has none.
  StatusOr<double> OptionalFloat(std::string_view key, double fallback) const;
  // A bool key, or `fallback` when the file has none.
  StatusOr<bool> OptionalBool(std::string_view key, bool fallback) const;
  // A token id key within a vocabulary of n tokens; -1 when the file has none.
  StatusOr<int32_t> OptionalId(std::string_view key, int64_t n) const;
  // The id of `piece` in tokenizer.ggml.tokens; -1 if absent.
  int64_t TokenId(std::string_view piece) const;
  // Refuses the first key `checked` selects that `known` lacks: "metadata 'k' is not
  // implemented for <what>".
  Status CheckKeys(const GgufKeys& known, const std::function<bool(std::string_view)>& checked,
                   std::string_view what) const;

  // c[key] = the id of piece, for each {key, piece}; kUnimplemented naming `model` when the
  // vocabulary lacks one ("..., which <model>'s image prompt needs").
  Status SetTokenIds(std::initializer_list<std::pair<const char*, const char*>> pieces,
                     std::string_view model, nlohmann::ordered_json* c) const;
  // Rows of token_embd.weight (the vocabulary size); kDataLoss when the file has no 2-D one.
  StatusOr<int64_t> VocabRows() const;

  const GgufFile& file() const { return g_; }

 private:
  const GgufFile& g_;
  const char* tag_;
};

// prefix + name for each name.
GgufKeys PrefixedKeys(std::string_view prefix, std::initializer_list<const char*> names);

// The tokenizer.* keys every vocabulary reader reads (gguf-py Keys.Tokenizer: model, pre,
// tokens, token_type, the bos/eos/unknown/padding/eot ids, add_bos/add_eos/add_sep,
// chat_template) and its `extra` tokenizer.ggml.* keys.
GgufKeys VocabKeys(std::initializer_list<const char*> extra);

// "<arch>.<key>" for each of the hyperparameters every llama.cpp LLM writes (gguf-py
// Keys.LLM / Keys.Attention / Keys.Rope: context_length, embedding_length, block_count,
// feed_forward_length, attention.head_count, attention.head_count_kv,
// attention.layer_norm_rms_epsilon, rope.freq_base) and the arch's `extra` keys.
GgufKeys LlmKeys(std::string_view arch, std::initializer_list<const char*> extra);

// The HF text config fields those keys give (convert_hf_to_gguf.py TextModel's inverse):
// vocab_size (token_embd rows), hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, max_position_embeddings, rms_norm_eps, and
// rope_theta (`rope_theta` when the file has no rope.freq_base).
Status SetLlmConfig(const GgufMeta& g, std::string_view arch, double rope_theta,
                    nlohmann::ordered_json* c);

}  // namespace ocular

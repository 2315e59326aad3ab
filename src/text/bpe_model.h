// The BPE model of tokenizer.json, with the semantics of `tokenizers`
// (huggingface/tokenizers · tokenizers/src/models/bpe/{model.rs,word.rs}). Internal.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ocular/status.h"

namespace ocular::text {

class BpeModel {
 public:
  // Parses the "model" object (type "BPE"): vocab, merges (either "a b" strings or [a, b]
  // pairs), unk_token, byte_fallback, fuse_unk, ignore_merges, dropout (must be null or 0),
  // continuing_subword_prefix, end_of_word_suffix.
  static StatusOr<BpeModel> FromJson(const nlohmann::json& model);

  // Appends the ids of one pre-token. REQUIRES: `word` is valid UTF-8.
  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  int32_t TokenToId(std::string_view token) const;  // -1 if absent
  const std::string* IdToToken(int32_t id) const;   // nullptr if absent
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void MergeAll(std::vector<int32_t>* symbols) const;

  // Transparent hashing: lookups by string_view allocate nothing.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> id_to_token_;  // by id; "" for gaps
  std::vector<bool> has_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::string prefix_;     // continuing_subword_prefix
  std::string suffix_;     // end_of_word_suffix
  int32_t byte_ids_[256];  // "<0xNN>" ids, -1 when absent
};

}  // namespace ocular::text

// The normalizers, pre-tokenizers and decoders of tokenizer.json, with the semantics of
// huggingface/tokenizers · tokenizers/src/{normalizers,pre_tokenizers,decoders}/. Internal.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ocular/status.h"

namespace ocular::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // REQUIRES: `s` is valid UTF-8. Returns valid UTF-8.
  virtual std::string Normalize(std::string s) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits each piece further (in place). Empty pieces may remain; callers drop them.
  virtual void PreTokenize(std::vector<std::string>* pieces) const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // decode_chain: tokens in, tokens out; the final text is their concatenation.
  virtual void DecodeChain(std::vector<std::string>* tokens) const = 0;
};

// Each returns nullptr for a JSON null (no component), an error for malformed or
// unsupported ones.
StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const nlohmann::json& j);
StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const nlohmann::json& j);
StatusOr<std::unique_ptr<Decoder>> ParseDecoder(const nlohmann::json& j);

// GPT-2's reversible byte → printable-character table (bytes_to_unicode), as UTF-8.
const std::string& ByteLevelChar(unsigned char b);

}  // namespace ocular::text

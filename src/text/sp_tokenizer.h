// Tokenizer over a SentencePiece model (tokenizer.model), via libsentencepiece. Internal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/tokenizer.h"

namespace ocular::text {

// `atomic`: (content, id) pairs matched in the text before SentencePiece runs, leftmost and
// longest first (tokenizer_config.json's added_tokens_decoder, as HF's slow tokenizers split
// on added tokens; llama.cpp's parse_special on CONTROL / USER_DEFINED pieces).
StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(
    std::string_view model_proto, std::vector<std::pair<std::string, int32_t>> atomic = {});

// One piece of a SentencePiece model with its score and kind, as llama.cpp's converter reads
// them (convert_hf_to_gguf.py _create_vocab_sentencepiece): kind in llama.cpp's token types
// (gguf-py TokenType: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte).
struct SentencePiece {
  std::string piece;
  float score = 0;
  int32_t type = 1;
};

// Every piece of `model_proto` in id order. kInvalidArgument if it is not a model.
StatusOr<std::vector<SentencePiece>> SentencePieces(std::string_view model_proto);

}  // namespace ocular::text

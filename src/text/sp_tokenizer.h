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

}  // namespace ocular::text

// Tokenizer over a SentencePiece model (tokenizer.model), via libsentencepiece. Internal.
#pragma once

#include <memory>
#include <string_view>

#include "text/tokenizer.h"

namespace ocular::text {

StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(std::string_view model_proto);

}  // namespace ocular::text

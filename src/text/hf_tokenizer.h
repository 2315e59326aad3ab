// Tokenizer over a tokenizer.json (see tokenizer.h for what is supported). Internal.
#pragma once

#include <memory>
#include <string_view>

#include "text/tokenizer.h"

namespace ocular::text {

StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(std::string_view json,
                                                     std::string_view config_json);

}  // namespace ocular::text

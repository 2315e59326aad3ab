// tokenizer.json's post_processor, for one sequence with add_special_tokens=True
// (huggingface/tokenizers · tokenizers/src/processors/): the special ids it puts around the
// sequence's ids. Internal.
//
//   TemplateProcessing  `single` (or, given two encodings inside a Sequence, `pair`): one
//                       encoding per piece, SpecialToken pieces being their special_tokens
//                       entry's ids
//   BertProcessing      [cls] e [sep] for the first encoding, e [sep] for later ones
//   RobertaProcessing   [cls] e [sep], then [sep] e [sep] (offset options: no id changes)
//   ByteLevel           no id changes (trim_offsets moves offsets only)
//   Sequence            each processor on the encodings the previous one left; then merged
//   null                nothing
// Anything else is kUnimplemented naming the type, as is a chain where the text would not
// appear exactly once or where tokenizers panics (a template given three encodings).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "ocular/status.h"

namespace ocular::text {

struct SpecialTokensAround {
  std::vector<int32_t> prefix;  // before the sequence
  std::vector<int32_t> suffix;  // after it
};

StatusOr<SpecialTokensAround> ParsePostProcessor(const nlohmann::json& j);

}  // namespace ocular::text

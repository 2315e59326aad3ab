// The sampler's TokenConstraint (runtime/sampler.h) over a grammar (text/grammar_matcher.h):
// what GenerateOptions::json_schema / json_object / regex compile to.
#pragma once

#include <memory>
#include <vector>

#include "ocular/engine.h"
#include "runtime/sampler.h"
#include "text/grammar_matcher.h"
#include "text/tokenizer.h"

namespace ocular {

// The bytes of every id the model can emit (`vocab` logits rows; ids the tokenizer does not
// know, and special tokens, get none). Built once per engine.
std::shared_ptr<const grammar::TokenVocabulary> GrammarVocabulary(const Tokenizer& tok,
                                                                  int32_t vocab);

// The constraint `o` asks for, or null when it asks for none. Errors (kInvalidArgument): more
// than one of json_schema / json_object / regex, or one the compilers refuse.
StatusOr<std::shared_ptr<TokenConstraint>> MakeGrammarConstraint(
    const GenerateOptions& o, std::shared_ptr<const grammar::TokenVocabulary> vocab,
    const std::vector<int32_t>& eos_ids);

}  // namespace ocular

// The vocabulary of a GGUF file converted by llama.cpp ("tokenizer.ggml.*" metadata) as the
// side files an HF directory would have, so the tokenizer code reads it unchanged:
//   tokenizer.model        a SentencePiece ModelProto (BPE, byte fallback) built from
//                          tokens / scores / token_type, the model llama.cpp's SPM tokenizer
//                          runs (llama.cpp src/llama-vocab.cpp, LLAMA_VOCAB_TYPE_SPM: merge the
//                          adjacent pair of highest score, bytes for what no piece covers)
//   tokenizer_config.json  add_bos_token, the special tokens, "added_tokens_decoder" (the
//                          CONTROL and USER_DEFINED pieces, matched atomically in the text as
//                          llama.cpp does with parse_special) and "chat_template" when the file
//                          has tokenizer.chat_template.
// Only tokenizer.ggml.model "llama" (SentencePiece) is read; other vocabularies, unknown
// tokenizer.* keys and options ocular does not implement (add_eos_token, a precompiled
// normalizer) are refused with kUnimplemented, never ignored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "ocular/status.h"

namespace ocular {

struct GgufVocab {
  std::string tokenizer_model;        // SentencePiece ModelProto bytes
  std::string tokenizer_json;         // byte-level BPE vocabularies: io/gguf_bpe_vocab.h
  std::string tokenizer_config_json;  // text
  int32_t bos_id = -1, eos_id = -1, pad_id = -1;
  // End-of-generation ids besides eos, as llama.cpp's vocabulary marks them: eot_token_id and
  // the pieces "<end_of_turn>" / "<|eot_id|>" / "<|im_end|>" / "<|end|>" when present.
  std::vector<int32_t> extra_eog_ids;
  int64_t vocab_size = 0;
};

StatusOr<GgufVocab> ReadGgufVocab(const GgufFile& gguf);

}  // namespace ocular

// The byte-level BPE vocabulary of a GGUF file converted by llama.cpp (tokenizer.ggml.model
// "gpt2": Qwen2, Qwen2-VL, ...) as the side files an HF directory would have:
//   tokenizer.json         a tokenizers BPE model: vocab from tokenizer.ggml.tokens (the pieces
//                          are stored byte-level encoded, as in HF's vocab), merges from
//                          tokenizer.ggml.merges, the pre-tokenizer tokenizer.ggml.pre names
//                          (llama.cpp src/llama-vocab.cpp LLAMA_VOCAB_PRE_TYPE_*: its regex in
//                          the form of the model's tokenizer.json) followed by ByteLevel, a
//                          ByteLevel decoder, and the CONTROL / USER_DEFINED tokens as
//                          added_tokens (special = CONTROL), matched atomically in the text
//   tokenizer_config.json  add_bos_token (llama.cpp's default for gpt2 vocabularies: false),
//                          the special tokens, added_tokens_decoder, chat_template
// The file records no normalizer: none is applied, as llama.cpp does (Qwen2's tokenizer.json
// has NFC, which changes only text that is not already NFC).
// Only tokenizer.ggml.pre "qwen2" is read; another pre-tokenizer, unknown tokenizer.* keys
// and add_eos_token / add_sep_token are refused (kUnimplemented), never ignored.
#pragma once

#include "io/gguf.h"
#include "io/gguf_vocab.h"
#include "ocular/status.h"

namespace ocular {

// GgufVocab with tokenizer_json set (tokenizer_model empty).
StatusOr<GgufVocab> ReadGgufBpeVocab(const GgufFile& gguf);

}  // namespace ocular

// Gemma 3 from a GGUF file converted by llama.cpp (convert_hf_to_gguf.py, Gemma3Model): the
// side files a loader reads, built from the file's metadata.
//   config.json            Gemma3TextConfig from the "gemma3.*" keys, with llama.cpp's
//                          rules for what the file leaves out (llama.cpp src/models/gemma3.cpp):
//                          a global layer every 6th (sliding_window_pattern), local RoPE base
//                          10000, attention scale 1/sqrt(head_dim) except for the 62-layer
//                          27B (hidden/heads), the vocabulary as many as token_embd's rows
//   tokenizer.model, tokenizer_config.json   io/gguf_vocab.h
// eos_token_id lists eos and the end-of-turn ids llama.cpp stops on (<end_of_turn>).
// Only the text model (Gemma3ForCausalLM) is read: llama.cpp keeps the vision tower in a
// separate mmproj file, which ocular does not read. Unknown "gemma3.*" keys are refused.
#pragma once

#include <memory>
#include <string>

#include "core/file_set.h"
#include "io/gguf.h"
#include "io/gguf_vocab.h"
#include "ocular/status.h"

namespace ocular::gemma3 {

// The config.json text for `gguf`'s gemma3.* metadata.
StatusOr<std::string> ConfigJsonFromLlamaCpp(const GgufFile& gguf, const GgufVocab& vocab);

// config.json + the vocabulary's files. kUnimplemented for a key or value ocular does not read.
StatusOr<std::unique_ptr<FileSet>> LlamaCppFiles(const GgufFile& gguf);

}  // namespace ocular::gemma3

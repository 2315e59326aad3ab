// Llama 3.2 Vision's tensors in a GGUF file. The text decoder uses the names of llama.cpp's
// mllama architecture (LLM_ARCH_MLLAMA of the unmerged llama.cpp port that ollama shipped:
// token_embd, blk.N.attn_q, blk.N.cross_attn_k_proj, blk.N.cross_attn_attn_gate, ...); the
// vision tower and projector, which llama.cpp keeps in a separate file, use ocular's own names
// after ollama's mllama converter (v.blk.N.attn_q, v.global.blk.N.attn_gate, mm.0) with the
// values as HF stores them. docs/quantization.md lists them all.
#pragma once

#include <string>
#include <vector>

#include "io/gguf_source.h"
#include "models/mllama/config.h"

namespace ocular::mllama {

// The GGUF name of the tensor HF calls `hf` (the legacy module names ForEachTensor visits);
// "" for a name outside the table.
std::string GgufTensorName(const std::string& hf);

// The table for every tensor of `cfg`'s model, for GgufSource.
std::vector<GgufName> GgufNames(const MllamaConfig& cfg);

}  // namespace ocular::mllama

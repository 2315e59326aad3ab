// PaliGemma's tensors in a GGUF file. The Gemma / Gemma 2 text decoder uses llama.cpp's
// names (token_embd, blk.N.attn_q, ...); the SigLIP tower and projector, which llama.cpp
// keeps in a separate mmproj file, use ocular's own names in the same style
// (v.blk.N.attn_q, mm.linear); docs/quantization.md lists them all.
#pragma once

#include <string>
#include <vector>

#include "io/gguf_source.h"
#include "models/config.h"

namespace ocular::paligemma {

// The GGUF name of the tensor HF calls `hf` (legacy module names, as weights.cc visits
// them); "" for a name outside the table.
std::string GgufTensorName(const std::string& hf, bool gemma2);

// The table for every tensor of `cfg`'s model, for GgufSource. ocular's files store norms
// as they are in HF (no llama.cpp plus-one).
std::vector<GgufName> GgufNames(const PaliGemmaConfig& cfg);

}  // namespace ocular::paligemma

// Gemma 3's tensors in a GGUF file: llama.cpp's gemma3 names for the decoder (token_embd,
// blk.N.attn_q, attn_q_norm, post_attention_norm, ffn_norm, post_ffw_norm, ..., output_norm),
// ocular's PaliGemma-style names for SigLIP (v.*, models/paligemma/gguf_names.h) and llama.cpp
// clip's names for the projector (mm.input_projection.weight, mm.soft_emb_norm.weight).
#pragma once

#include <string>
#include <vector>

#include "io/gguf_source.h"
#include "models/gemma3/config.h"

namespace ocular::gemma3 {

// The GGUF name of the tensor HF calls `hf` (as gemma3.cc visits them); "" if unknown.
std::string GgufTensorName(const std::string& hf);

// The table for every tensor of `cfg`'s model, for GgufSource. `llamacpp`: the file was
// converted by llama.cpp, whose Gemma3Model stores every "*norm.weight" as 1 + w
// (convert_hf_to_gguf.py norm_shift); ocular's own files store the norms as in HF.
std::vector<GgufName> GgufNames(const Gemma3Config& cfg, bool llamacpp = false);

}  // namespace ocular::gemma3

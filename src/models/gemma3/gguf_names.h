// Gemma 3's tensors in a GGUF file: llama.cpp's gemma3 names for the decoder (token_embd,
// blk.N.attn_q, attn_q_norm, post_attention_norm, ffn_norm, post_ffw_norm, ..., output_norm),
// ocular's PaliGemma-style names for SigLIP (v.*, models/paligemma/gguf_names.h) and llama.cpp
// clip's names for the projector (mm.input_projection.weight, mm.soft_emb_norm.weight).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/gguf_source.h"
#include "io/model_files.h"
#include "models/gemma3/config.h"

namespace ocular::gemma3 {

// The GGUF name of the tensor HF calls `hf` (as gemma3.cc visits them); "" if unknown.
std::string GgufTensorName(const std::string& hf);

// The table for every tensor of `cfg`'s model, for GgufSource. `llamacpp`: the files were
// converted by llama.cpp, whose Gemma3Model stores the decoder's "*norm.weight" as 1 + w
// (convert_hf_to_gguf.py norm_shift) and whose Gemma3VisionModel stores mm.soft_emb_norm as
// 1 + w too (SigLIP's LayerNorms as in HF); ocular's own files store the norms as in HF.
std::vector<GgufName> GgufNames(const Gemma3Config& cfg, bool llamacpp = false);

// The tensors of a GGUF model by HF name: ocular's own file, llama.cpp's text file, or
// llama.cpp's text file and its mmproj file (files.mmproj), the decoder from the first and
// the vision tower and projector from the second. clip.cpp reads mmproj files of older
// converters whose v.blk.N.ffn_up / ffn_down hold fc2 / fc1 (swapped, told by shape:
// ffn_down's rows as long as the hidden size); so does this.
std::unique_ptr<TensorSource> GgufTensors(const ModelFiles& files, const Gemma3Config& cfg);

}  // namespace ocular::gemma3

// Gemma 3 written as llama.cpp's two files (`ocular quantize --mmproj-out`): the text GGUF of
// architecture "gemma3" and the mmproj of projector type "gemma3", with the metadata, tensor
// names and stored values that llama.cpp's convert_hf_to_gguf.py (llama-cpp-python 0.3.36's
// vendor/llama.cpp: conversion/gemma.py Gemma3Model, Gemma3VisionModel; conversion/base.py
// _create_vocab_sentencepiece; gguf-py vocab.py SpecialVocab) writes for the same HF
// directory, so llama.cpp runs the files and ocular reads them back as the same model
// (models/gemma3/llamacpp_gguf.h):
//   text     gemma3.* from text_config; tokenizer.ggml.* "llama" from tokenizer.model (pieces,
//            scores, kinds), added_tokens.json and tokenizer_config.json's added_tokens_decoder
//            (CONTROL when special), padded to vocab_size with [PADn]; the special ids from
//            tokenizer_config.json's *_token in tokenizer.json's added tokens, else config.json;
//            add_bos / add_eos / add_sep from tokenizer.json's TemplateProcessing, else
//            tokenizer_config.json; the chat template; add_space_prefix false
//   mmproj   clip.* from vision_config and preprocessor_config.json (image_mean / image_std),
//            clip.vision.projector.scale_factor when the pooling is not 4
//   tensors  the decoder's norms and mm.soft_emb_norm stored as 1 + w (f32); v.patch_embd and
//            v.position_embd f32, mm.input_projection f16, as the converter forces them
// What the layout cannot express is refused (kUnimplemented, naming the key): a
// query_pre_attn_scalar other than llama.cpp's rule, layer types other than every 6th global
// (or all global), attn_logit_softcapping, an untied output projection, a text-only model, a
// vision_use_head, sep / cls / mask special tokens.
#pragma once

#include <optional>
#include <string>

#include "core/file_set.h"
#include "io/gguf.h"
#include "ocular/status.h"

namespace ocular::gemma3 {

// Adds the text file's and the mmproj's metadata (general.* aside) for the HF files `side`.
Status AddLlamaCppMetadata(const FileSet& side, GgufWriter* text, GgufWriter* mmproj);

// Where and how the tensor of GGUF name `name` (ocular's Gemma 3 names, which are llama.cpp's)
// is written.
struct LlamaCppTensorRule {
  bool mmproj = false;            // in the mmproj file (v.*, mm.*), else in the text file
  bool plus_one = false;          // stored as 1 + w
  std::optional<WFormat> forced;  // the converter's fixed format, whatever the type asked
};
LlamaCppTensorRule LlamaCppTensor(const std::string& name);

}  // namespace ocular::gemma3

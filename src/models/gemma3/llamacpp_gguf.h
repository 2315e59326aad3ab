// Gemma 3 from a GGUF file converted by llama.cpp (convert_hf_to_gguf.py, Gemma3Model): the
// side files a loader reads, built from the file's metadata.
//   config.json            Gemma3TextConfig from the "gemma3.*" keys, with llama.cpp's
//                          rules for what the file leaves out (llama.cpp src/models/gemma3.cpp):
//                          a global layer every 6th (sliding_window_pattern), local RoPE base
//                          10000, attention scale 1/sqrt(head_dim) except for the 62-layer
//                          27B (hidden/heads), the vocabulary as many as token_embd's rows
//   tokenizer.model, tokenizer_config.json   io/gguf_vocab.h
// eos_token_id lists eos and the end-of-turn ids llama.cpp stops on (<end_of_turn>).
// Unknown "gemma3.*" keys are refused.
//
// With llama.cpp's mmproj file of projector type "gemma3" (io/mmproj.h), the pair is the
// multimodal model (Gemma3ForConditionalGeneration):
//   config.json            text_config as above; vision_config (SigLIP) from clip.vision.*;
//                          mm_tokens_per_image = (image_size / patch_size / scale_factor)^2
//                          (scale_factor 4 when the file has none, as clip.cpp); the
//                          <start_of_image> / <end_of_image> / <image_soft_token> ids from
//                          the text file's vocabulary
//   preprocessor_config.json  Gemma3ImageProcessor with the mmproj's image_size, image_mean
//                          and image_std; what llama.cpp's metadata cannot say is the
//                          reference's (transformers' Gemma3ImageProcessor as google/gemma-3-*
//                          ship it): PIL bilinear resize of the whole image to the square (no
//                          letterbox), rescale 1/255, RGB, no pan-and-scan by default
// A pair whose sizes disagree (projection_dim vs the text hidden size) is refused
// (kUnimplemented, naming the keys).
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

// config.json + the vocabulary's files (+ preprocessor_config.json with `mmproj`, which may be
// null). kUnimplemented for a key or value ocular does not read.
StatusOr<std::unique_ptr<FileSet>> LlamaCppFiles(const GgufFile& gguf,
                                                 const GgufFile* mmproj = nullptr);

}  // namespace ocular::gemma3

// Converting a model to a GGUF file with quantized weights (`ocular quantize`).
//
//   ocular::QuantizeOptions o;
//   o.input = "paligemma2-3b-pt-224";  o.output = "pg2-q4_k_m.gguf";  o.type = "q4_k_m";
//   auto report = ocular::QuantizeModel(o);
//
// The GGUF holds the weights plus the model's config, tokenizer and preprocessor files, so
// Engine::Load and every CLI command take it in place of the directory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ocular/status.h"

namespace ocular {

struct QuantizeOptions {
  // An HF model directory, or llama.cpp's text GGUF (architecture gemma3 or qwen2vl, f32 /
  // f16 / bf16), which is re-quantized: its metadata kept, its matrices in `type`'s recipe.
  std::string input;
  std::string output;  // the GGUF file to write (written as output.partial, then renamed)
  // llama.cpp's layout (Gemma 3 from an HF directory): `output` is written as llama.cpp's text
  // GGUF (architecture gemma3) and this path as its mmproj (projector gemma3, clip.* metadata),
  // as llama.cpp's convert_hf_to_gguf.py (+ --mmproj) and llama-quantize would write them; the
  // mmproj in f16 (f32 with type or vision "f32"). Empty: ocular's one-file layout.
  std::string mmproj_output;
  // With a llama.cpp text GGUF as `input`: the pair's mmproj, to check that the pair loads
  // (Qwen2-VL's text file loads only with it). It is not rewritten.
  std::string mmproj;
  // The text decoder's weights: "q8_0", "q4_0", "q4_k_m" (llama.cpp's recipe: Q4_K, with
  // Q6_K for the output projection and for attn_v / ffn_down in the layers that need more
  // bits), or the float formats "f32", "bf16", "f16".
  std::string type = "q8_0";
  // The image path: the vision tower and projector, and Llama 3.2 Vision's cross-attention
  // K/V projections (run once per image): "keep" (as stored), "f32", "bf16", "f16" or "q8_0".
  std::string vision = "keep";
  int threads = 0;  // 0: number of physical cores
  // Called after each tensor: (tensors done, tensors in all, bytes read so far).
  std::function<void(int done, int total)> progress;
};

struct QuantizedTensor {
  std::string name;            // GGUF name
  std::vector<int64_t> shape;  // HF order
  std::string format;          // as written: "q4_k", "q6_k", "q8_0", "bf16", ...
  std::string wanted;          // the format the recipe asked for, if a fallback was used
  uint64_t bytes = 0;
};

struct QuantizeReport {
  std::vector<QuantizedTensor> tensors;
  uint64_t input_bytes = 0, output_bytes = 0;
  int fallbacks = 0;  // tensors whose rows do not fit the recipe's block (see `wanted`)
};

// Errors: kInvalidArgument (bad option, output path is an input, an ocular GGUF, an mmproj or
// an already quantized file as input), kNotFound, kDataLoss and kUnimplemented as Engine::Load
// for the input; kUnimplemented for what llama.cpp's layout cannot express (naming it).
StatusOr<QuantizeReport> QuantizeModel(const QuantizeOptions& options);

}  // namespace ocular

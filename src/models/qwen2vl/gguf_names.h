// Qwen2-VL's, Qwen2.5-VL's and Qwen3-VL's tensors in a GGUF file written by `ocular quantize`:
// llama.cpp's names for the decoder (its qwen2vl / qwen3vl text architectures: token_embd,
// blk.N.attn_q, attn_q_norm, ffn_norm, ..., output_norm, output), the vision tower under "v."
// and the mergers under "mm." with the rest of HF's name kept (llama.cpp keeps those in a
// separate mmproj file, models/qwen2vl/llamacpp_gguf.h reads those).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/gguf_source.h"
#include "models/model.h"
#include "models/weights.h"

namespace ocular::qwen2vl {

// The GGUF name of the tensor HF calls `hf` (legacy "model.layers.N", "visual." or new
// "model.language_model.", "model.visual." spellings, as qwen2vl.cc / qwen3vl.cc visit them);
// "" if unknown.
std::string GgufTensorName(const std::string& hf);

// Walks a model's tensors (the family's ForEachTensor on scratch weights).
using TensorWalk = std::function<Status(const TensorVisitor&)>;

// The table for every tensor `walk` visits, for GgufSource.
std::vector<GgufName> GgufNames(const TensorWalk& walk);

// A tensor's shape in the file: as HF's, except the Conv3d patch embedding
// [D, C, temporal, P, P], over GGUF's 4 dimensions, which is stored as the matrix the model
// multiplies by, [D, C * temporal * P * P].
Shape GgufShape(const Shape& shape);

// The tensors of an `ocular quantize` file by HF name and HF shape (GgufSource through
// GgufNames, shapes through GgufShape).
std::unique_ptr<TensorSource> GgufTensors(std::shared_ptr<const GgufFile> file,
                                          const TensorWalk& walk);

// VlModel::ForEachWeight: each tensor `walk` visits under its GGUF name. Errors: a tensor
// without one (kInternal, tagged `tag`).
Status ForEachGgufWeight(const TensorWalk& walk, const VlModel::WeightVisitor& fn, const char* tag);

}  // namespace ocular::qwen2vl

// PaliGemma 1 and 2: SigLIP -> linear projector -> Gemma / Gemma 2 decoder with a
// bidirectional image+prompt prefix. Reference: transformers/models/paligemma/modeling_paligemma.py
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/checkpoint.h"
#include "models/config.h"
#include "models/kv_cache.h"
#include "models/layers.h"
#include "models/tracer.h"
#include "models/weights.h"

namespace ocular {

class ThreadPool;

class PaliGemma {
 public:
  // Loads config.json and the safetensors weights of an HF PaliGemma directory. Weights stay
  // memory-mapped in their stored dtype. Every tensor's presence and shape is checked.
  static StatusOr<std::unique_ptr<PaliGemma>> Load(const std::string& dir);

  const PaliGemmaConfig& config() const { return cfg_; }
  // The dtype the weights are stored in (F32, BF16 or F16). A bf16 model computes with bf16
  // activation rounding, as HF runs it in torch.bfloat16 (models/layers.h Numerics).
  DType weight_dtype() const { return dtype_; }
  size_t weight_bytes() const { return ckpt_.TotalBytes(); }
  // Bytes of the decoder weights and output projection: what one decode step streams.
  size_t text_weight_bytes() const;

  // pixel_values [n, 3, R, R] -> image features [n, N, H] = projector(SigLIP(x)) / sqrt(H).
  // Taps: vision.*, projector.
  Tensor EncodeImages(ThreadPool& pool, const Tensor& pixel_values, Tracer* tracer) const;

  // Input embeddings [T, H] for `ids`, already multiplied by the normalizer sqrt(H) (HF scales
  // text AND image rows). Rows whose id is image_token_index take the image feature rows in
  // order. Errors: id outside the vocabulary, image token count != feature rows.
  // Taps: decoder.inputs_embeds (before the normalizer), decoder.embed_scaled.
  StatusOr<Tensor> Embed(const std::vector<int32_t>& ids, const Tensor* image_features,
                         Tracer* tracer) const;

  // Runs the decoder on embeddings x[span.count, H] in place, appending K/V to `cache`;
  // returns the final-normed hidden states. Taps: decoder.layers.{i}, decoder.norm.
  Tensor Decode(ThreadPool& pool, Tensor x, const Span& span, KvCache& cache,
                Tracer* tracer) const;

  // logits [rows, V] = hidden · lm_headᵀ (no final softcap unless enabled below, as HF).
  Tensor Logits(ThreadPool& pool, const float* hidden, int64_t rows) const;

  KvCache NewCache(int64_t capacity) const;

  // Gemma 2's final_logit_softcapping, which HF's PaliGemma does not apply. Default off.
  void set_apply_final_softcap(bool on) { apply_final_softcap_ = on; }

 private:
  PaliGemmaConfig cfg_;
  Checkpoint ckpt_;
  PaliGemmaWeights w_;
  DType dtype_ = DType::kF32;
  bool apply_final_softcap_ = false;
  Numerics nx_;  // bf16 rounding for bf16 checkpoints, as the reference computes them
};

}  // namespace ocular

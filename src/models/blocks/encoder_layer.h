// The pre-norm encoder layer of the vision towers, configured by data:
//   x = x + [gate_attn *] attn(norm1(x))     (EncoderAttention: no cache, no RoPE)
//   x = x + [gate_ffn *] mlp(norm2(x))
// References: modeling_siglip.py SiglipEncoderLayer, modeling_mllama.py
// MllamaVisionEncoderLayer (the gated global layers: tanh(gate) scales each branch).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/exec.h"
#include "models/blocks/attention.h"
#include "models/blocks/mlp.h"
#include "models/blocks/norm.h"

namespace ocular::blocks {

struct EncoderLayerSpec {
  AttentionSpec attn;
  MlpSpec mlp;
  NormKind norm = NormKind::kLayer;
  float eps = 1e-6f;
};

struct EncoderLayerWeights {
  AttentionWeights attn;
  MlpWeights mlp;
  const TensorView* norm1_w = nullptr;  // layer_norm1 / input_layernorm
  const TensorView* norm1_b = nullptr;
  const TensorView* norm2_w = nullptr;  // layer_norm2 / post_attention_layernorm
  const TensorView* norm2_b = nullptr;
  bool gated = false;  // scale each branch by its gate
  float attn_gate = 1, ffn_gate = 1;
};

// The ViT layer of SigLIP and mllama's vision tower: LayerNorm(eps), multi-head attention
// (heads of hidden / heads, scale head_dim^-0.5), a two-layer MLP with activation `act`.
EncoderLayerSpec VitLayerSpec(int64_t hidden, int64_t heads, int64_t inner, MlpAct act, float eps);

// The weights of a ViT layer in HF's names (norm1 = layer_norm1 / input_layernorm); biases
// nullable.
struct VitLayerNames {
  const TensorView *ln1_w, *ln1_b, *ln2_w, *ln2_b;
  const Matrix *q, *k, *v, *o;
  const TensorView *q_b, *k_b, *v_b, *o_b;
  const Matrix* fc1;
  const TensorView* fc1_b;
  const Matrix* fc2;
  const TensorView* fc2_b;
};
EncoderLayerWeights VitLayerView(const VitLayerNames& n);

// One layer in place on x[rows, hidden] (one image's rows), keys as `mask` says.
// `pos`: the rows' positions when the attention has RoPE (EncoderAttention).
void EncoderLayer(const Exec& ex, const EncoderLayerSpec& s, const EncoderLayerWeights& w, float* x,
                  int64_t rows, const EncoderMask& mask, const Positions* pos = nullptr);
// Arena bytes EncoderLayer takes (key_order: the mask reorders keys).
size_t EncoderLayerBytes(const EncoderLayerSpec& s, int64_t rows, bool key_order, int threads);

}  // namespace ocular::blocks

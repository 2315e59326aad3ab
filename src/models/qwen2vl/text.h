// The decoder side both Qwen-VL families share: Qwen2-VL / Qwen2.5-VL's Qwen2 decoder (q/k/v
// biases) and Qwen3-VL's Qwen3 decoder (q/k RMSNorm per head, biases if attention_bias) are
// one Llama-style layer (blocks::LlamaLayerSpec) with M-RoPE, the same embedding with image
// pads replaced by feature rows, the same final norm and output projection. What differs is
// data (QwenText); what is a family's own (Qwen3-VL's DeepStack additions) is a hook.
// References: transformers 4.57.1 models/qwen2_vl/modeling_qwen2_vl.py (Qwen2VLDecoderLayer,
// Qwen2VLModel.get_placeholder_mask), models/qwen3_vl/modeling_qwen3_vl.py
// (Qwen3VLTextDecoderLayer, Qwen3VLTextModel).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/function_ref.h"
#include "core/matrix.h"
#include "core/tensor.h"
#include "kernels/exec.h"
#include "models/blocks/decoder_layer.h"
#include "models/config.h"
#include "models/model.h"
#include "models/tracer.h"
#include "models/weights.h"

namespace ocular::qwen2vl {

struct Qwen2VLConfig;
struct Qwen3VLConfig;

// The text config fields the shared decoder reads, in HF's names, from either family's config.
struct QwenText : DecoderSizes {
  int head_dim_ = 0;
  int eos_token_id = -1;
  bool qkv_bias = false;  // q/k/v_proj biases (Qwen2; Qwen3 attention_bias)
  bool o_bias = false;    // o_proj bias (Qwen3 attention_bias)
  bool qk_norm = false;   // q_norm / k_norm (Qwen3)
  bool tie_word_embeddings = false;
  int image_token_id = -1;
  std::string prefix;  // of the decoder's tensors: "model." or "model.language_model."

  int head_dim() const { return head_dim_; }
};
QwenText TextOf(const Qwen2VLConfig& cfg);
QwenText TextOf(const Qwen3VLConfig& cfg);

struct TextLayerWeights {
  TensorView input_norm;          // [H]
  Matrix q_w;                     // [Hq*d, H]
  Matrix k_w, v_w;                // [Hkv*d, H]
  Matrix o_w;                     // [H, Hq*d]
  TensorView q_b, k_b, v_b, o_b;  // [Hq*d], [Hkv*d], [Hkv*d], [H] (when the config has them)
  TensorView q_norm, k_norm;      // [d] (Qwen3)
  TensorView post_attn_norm;      // [H] the pre-MLP norm
  Matrix gate_w, up_w;            // [I, H]
  Matrix down_w;                  // [H, I]
};

struct TextWeights {
  Matrix embed;    // [V, H]
  Matrix lm_head;  // [V, H]; == embed when tie_word_embeddings
  std::vector<TextLayerWeights> layers;
  TensorView final_norm;  // [H]
};

// The decoder's tensors in module order: embed_tokens, each layer (input_layernorm, q/k/v/o
// with their biases, q_norm/k_norm, post_attention_layernorm, mlp), norm, lm_head unless tied.
Status VisitText(const QwenText& t, TextWeights* w, const TensorVisitor& fn);

// A decoder layer: Llama's RMSNorm, GQA scaled head_dim^-0.5, SwiGLU, the given M-RoPE, and
// (qk_norm) RMSNorm over each head of q and k before the rotary.
blocks::DecoderLayerSpec TextLayerSpec(const QwenText& t, const blocks::RopeSpec& rope);

// The decoder's part of the spec: sizes, one global-attention layer per decoder layer, eos.
void SetTextSpec(const QwenText& t, ModelSpec* spec);

// Arena bytes of a decoder step (a layer, or the logits) of shape `s`.
size_t TextBytes(const QwenText& t, const blocks::RopeSpec& rope, const WorkspaceShape& s);

// x = embed_tokens(ids), each image pad's row replaced by the next feature row's first H floats
// (rows `feature_stride` floats apart; masked_scatter). Without features (a decode step that
// sampled a pad) a pad is embedded as any token, as transformers. Errors (tag: "qwen2_vl"): an id
// outside the vocabulary; with features, pads != feature_rows. Tap: decoder.inputs_embeds.
Status EmbedText(const Exec& ex, const QwenText& t, const Matrix& embed,
                 std::span<const int32_t> ids, const float* features, int64_t feature_rows,
                 int64_t feature_stride, const std::string& tag, float* x, Tracer* tracer);

// Decoder layers [begin, end) on x in place, after_layer(i) after layer i's tap; end ==
// num_hidden_layers also applies the final norm. Taps: decoder.layers.{i} (and their sub-taps),
// decoder.norm.
void ForwardText(const Exec& ex, const QwenText& t, const blocks::RopeSpec& rope,
                 const TextWeights& w, const Batch& batch, float* x, Tracer* tracer, int begin,
                 int end, FunctionRef<void(int)> after_layer);

// logits[rows, V] = lm_head(hidden).
void TextLogits(const Exec& ex, const QwenText& t, const TextWeights& w, const float* hidden,
                int64_t rows, float* logits);

// The decoder is the text weights (all but the vision tower and the embedding table);
// legacy_names: also try the names transformers >= 4.52 saves (Qwen2-VL).
BindRules QwenBindRules(const std::string& tag, const std::string& model, bool legacy_names);

// One third of a fused qkv projection: rows [first, first + n) of m, entries [first, first +
// n) of v.
Matrix Rows(const Matrix& m, int64_t first, int64_t n);
TensorView Slice(const TensorView& v, int64_t first, int64_t n);

}  // namespace ocular::qwen2vl

#include "models/mllama/gguf_names.h"

#include <cstring>

#include "models/gguf_rename.h"
#include "models/mllama/weights.h"

namespace ocular::mllama {

namespace {

using gguf_rename::Rename;
using gguf_rename::RenameLayer;

// Within a text decoder layer: llama.cpp's mllama names (llm_tensor CROSS_ATTN_*; the gates
// have no ".weight" suffix there either).
constexpr Rename kTextLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"cross_attn.q_proj.weight", "cross_attn_q_proj.weight"},
    {"cross_attn.k_proj.weight", "cross_attn_k_proj.weight"},
    {"cross_attn.v_proj.weight", "cross_attn_v_proj.weight"},
    {"cross_attn.o_proj.weight", "cross_attn_o_proj.weight"},
    {"cross_attn.q_norm.weight", "cross_attn_q_norm.weight"},
    {"cross_attn.k_norm.weight", "cross_attn_k_norm.weight"},
    {"cross_attn_attn_gate", "cross_attn_attn_gate"},
    {"cross_attn_mlp_gate", "cross_attn_mlp_gate"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};
// Within a vision encoder layer (local or global): ollama's converter's names.
constexpr Rename kVisionLayer[] = {
    {"input_layernorm.", "attn_norm."},
    {"post_attention_layernorm.", "ffn_norm."},
    {"self_attn.q_proj.", "attn_q."},
    {"self_attn.k_proj.", "attn_k."},
    {"self_attn.v_proj.", "attn_v."},
    {"self_attn.o_proj.", "attn_output."},
    {"mlp.fc1.", "ffn_up."},
    {"mlp.fc2.", "ffn_down."},
    {"gate_attn", "attn_gate"},
    {"gate_ffn", "ffn_gate"},
};
// Whole-model tensors, by prefix (longest first where one prefix extends another).
constexpr Rename kWhole[] = {
    {"language_model.model.embed_tokens.weight", "token_embd.weight"},
    {"language_model.model.norm.weight", "output_norm.weight"},
    {"language_model.lm_head.weight", "output.weight"},
    {"vision_model.patch_embedding.weight", "v.patch_embd.weight"},
    {"vision_model.class_embedding", "v.class_embd"},
    {"vision_model.gated_positional_embedding.tile_embedding.weight",
     "v.tile_position_embd.weight"},
    {"vision_model.gated_positional_embedding.embedding", "v.position_embd.weight"},
    {"vision_model.gated_positional_embedding.gate", "v.position_embd.gate"},
    {"vision_model.pre_tile_positional_embedding.embedding.weight",
     "v.pre_tile_position_embd.weight"},
    {"vision_model.pre_tile_positional_embedding.gate", "v.pre_tile_position_embd.gate"},
    {"vision_model.post_tile_positional_embedding.embedding.weight",
     "v.post_tile_position_embd.weight"},
    {"vision_model.post_tile_positional_embedding.gate", "v.post_tile_position_embd.gate"},
    {"vision_model.layernorm_pre.", "v.pre_ln."},
    {"vision_model.layernorm_post.", "v.post_ln."},
    {"multi_modal_projector.", "mm.0."},
};

}  // namespace

std::string GgufTensorName(const std::string& hf) {
  if (std::string s = gguf_rename::RenamePrefix(hf, kWhole); !s.empty()) return s;
  if (std::string s = RenameLayer(hf, "language_model.model.layers.", "blk.", kTextLayer);
      !s.empty()) {
    return s;
  }
  if (std::string s =
          RenameLayer(hf, "vision_model.global_transformer.layers.", "v.global.blk.", kVisionLayer);
      !s.empty()) {
    return s;
  }
  return RenameLayer(hf, "vision_model.transformer.layers.", "v.blk.", kVisionLayer);
}

std::vector<GgufName> GgufNames(const MllamaConfig& cfg) {
  return gguf_rename::CollectNames<Weights>(
      cfg, [](const std::string& hf) { return GgufTensorName(hf); });
}

}  // namespace ocular::mllama

#include "models/paligemma/gguf_names.h"

#include <cstring>
#include <span>

#include "models/gguf_rename.h"
#include "models/weights.h"

namespace ocular::paligemma {

namespace {

using gguf_rename::Rename;
using gguf_rename::RenameLayer;

// Within a decoder layer: llama.cpp's llm_tensor names (gguf-py's TensorNameMap).
constexpr Rename kGemmaLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},      {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"}, {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},           {"mlp.down_proj.weight", "ffn_down.weight"},
};
// Gemma's post_attention_layernorm is the norm before the MLP (llama.cpp: ffn_norm); Gemma 2
// has four norms per layer.
constexpr Rename kGemma1Norms[] = {{"post_attention_layernorm.weight", "ffn_norm.weight"}};
constexpr Rename kGemma2Norms[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};
// Within a SigLIP encoder layer (ocular's names, after llama.cpp's clip conventions).
constexpr Rename kSiglipLayer[] = {
    {"layer_norm1.", "ln1."},         {"layer_norm2.", "ln2."},
    {"self_attn.q_proj.", "attn_q."}, {"self_attn.k_proj.", "attn_k."},
    {"self_attn.v_proj.", "attn_v."}, {"self_attn.out_proj.", "attn_out."},
    {"mlp.fc1.", "ffn_up."},          {"mlp.fc2.", "ffn_down."},
};
constexpr Rename kWhole[] = {
    {"language_model.model.embed_tokens.weight", "token_embd.weight"},
    {"language_model.model.norm.weight", "output_norm.weight"},
    {"language_model.lm_head.weight", "output.weight"},
    {"vision_tower.vision_model.embeddings.patch_embedding.", "v.patch_embd."},
    {"vision_tower.vision_model.embeddings.position_embedding.", "v.position_embd."},
    {"vision_tower.vision_model.post_layernorm.", "v.post_ln."},
    {"multi_modal_projector.linear.", "mm.linear."},
};

}  // namespace

std::string GgufTensorName(const std::string& hf, bool gemma2) {
  if (std::string out = gguf_rename::RenamePrefix(hf, kWhole); !out.empty()) return out;
  const std::span<const Rename> norms =
      gemma2 ? std::span<const Rename>(kGemma2Norms) : std::span<const Rename>(kGemma1Norms);
  if (std::string out = RenameLayer(hf, "language_model.model.layers.", "blk.", kGemmaLayer, norms);
      !out.empty()) {
    return out;
  }
  return RenameLayer(hf, "vision_tower.vision_model.encoder.layers.", "v.blk.", kSiglipLayer);
}

std::vector<GgufName> GgufNames(const PaliGemmaConfig& cfg) {
  const bool gemma2 = cfg.text.is_gemma2();
  return gguf_rename::CollectNames<PaliGemmaWeights>(
      cfg, [gemma2](const std::string& hf) { return GgufTensorName(hf, gemma2); });
}

}  // namespace ocular::paligemma

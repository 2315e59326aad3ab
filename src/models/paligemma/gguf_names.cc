#include "models/paligemma/gguf_names.h"

#include <cstring>
#include <span>

#include "models/gguf_rename.h"
#include "models/weights.h"

namespace ocular::paligemma {

namespace {

using gguf_rename::Rename;
using gguf_rename::RenameLayer;

constexpr Rename kSiglipLayer[] = {
    {"layer_norm1.", "ln1."},         {"layer_norm2.", "ln2."},
    {"self_attn.q_proj.", "attn_q."}, {"self_attn.k_proj.", "attn_k."},
    {"self_attn.v_proj.", "attn_v."}, {"self_attn.out_proj.", "attn_out."},
    {"mlp.fc1.", "ffn_up."},          {"mlp.fc2.", "ffn_down."},
};
constexpr Rename kWhole[] = {
    {"language_model.lm_head.weight", "output.weight"},
    {"vision_tower.vision_model.embeddings.patch_embedding.", "v.patch_embd."},
    {"vision_tower.vision_model.embeddings.position_embedding.", "v.position_embd."},
    {"vision_tower.vision_model.post_layernorm.", "v.post_ln."},
    {"multi_modal_projector.linear.", "mm.linear."},
};

}  // namespace

std::string GgufTensorName(const std::string& hf, bool gemma2) {
  if (std::string out = gguf_rename::RenamePrefix(hf, kWhole); !out.empty()) return out;
  // Gemma's post_attention_layernorm is the norm before the MLP (llama.cpp: ffn_norm); Gemma 2
  // has four norms per layer.
  const std::span<const Rename> norms = gemma2
                                            ? std::span<const Rename>(gguf_rename::kSandwichNorms)
                                            : std::span<const Rename>(gguf_rename::kPreMlpNorm);
  if (std::string out = gguf_rename::RenameDecoder(hf, {"language_model.model."}, norms);
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

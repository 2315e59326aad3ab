#include "models/paligemma/gguf_names.h"

#include <cstring>
#include <span>

#include "models/weights.h"

namespace ocular::paligemma {

namespace {

struct Rename {
  const char* hf;
  const char* gguf;
};

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

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// "<prefix><i>.<rest>" -> "<out_prefix><i>.<renamed rest>" through `table`, prefix matches.
std::string RenameLayer(const std::string& hf, const std::string& prefix, const char* out_prefix,
                        std::span<const Rename> table, std::span<const Rename> extra = {}) {
  if (!StartsWith(hf, prefix)) return "";
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string index = hf.substr(prefix.size(), dot - prefix.size());
  const std::string rest = hf.substr(dot + 1);
  auto apply = [&](const Rename& r) -> std::string {
    return StartsWith(rest, r.hf)
               ? out_prefix + index + "." + r.gguf + rest.substr(std::strlen(r.hf))
               : "";
  };
  for (const Rename& r : table) {
    if (std::string out = apply(r); !out.empty()) return out;
  }
  for (const Rename& r : extra) {
    if (std::string out = apply(r); !out.empty()) return out;
  }
  return "";
}

}  // namespace

std::string GgufTensorName(const std::string& hf, bool gemma2) {
  for (const Rename& r : kWhole) {
    if (StartsWith(hf, r.hf)) return r.gguf + hf.substr(std::strlen(r.hf));
  }
  const std::span<const Rename> norms =
      gemma2 ? std::span<const Rename>(kGemma2Norms) : std::span<const Rename>(kGemma1Norms);
  if (std::string out = RenameLayer(hf, "language_model.model.layers.", "blk.", kGemmaLayer, norms);
      !out.empty()) {
    return out;
  }
  return RenameLayer(hf, "vision_tower.vision_model.encoder.layers.", "v.blk.", kSiglipLayer);
}

std::vector<GgufName> GgufNames(const PaliGemmaConfig& cfg) {
  std::vector<GgufName> out;
  PaliGemmaWeights scratch;
  const bool gemma2 = cfg.text.is_gemma2();
  (void)ForEachTensor(cfg, &scratch, [&](const std::string& name, const Shape&, WeightSlot, bool) {
    out.push_back({name, GgufTensorName(name, gemma2), false});
    return Status::Ok();
  });
  return out;
}

}  // namespace ocular::paligemma

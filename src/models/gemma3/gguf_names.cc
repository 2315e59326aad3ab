#include "models/gemma3/gguf_names.h"

#include <cstring>

#include "models/gemma3/gemma3.h"
#include "models/gguf_rename.h"
#include "models/paligemma/gguf_names.h"

namespace ocular::gemma3 {

namespace {

using gguf_rename::Rename;
using gguf_rename::StartsWith;

// Within a decoder layer (gguf-py TensorNameMap, MODEL_ARCH.GEMMA3).
constexpr Rename kLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

}  // namespace

std::string GgufTensorName(const std::string& hf) {
  if (hf == "multi_modal_projector.mm_input_projection_weight") return "mm.input_projection.weight";
  if (hf == "multi_modal_projector.mm_soft_emb_norm.weight") return "mm.soft_emb_norm.weight";
  if (StartsWith(hf, "vision_tower.")) return paligemma::GgufTensorName(hf, /*gemma2=*/true);
  std::string rest;
  for (const char* prefix : {"language_model.model.", "model."}) {
    if (StartsWith(hf, prefix)) {
      rest = hf.substr(std::strlen(prefix));
      break;
    }
  }
  if (rest == "embed_tokens.weight") return "token_embd.weight";
  if (rest == "norm.weight") return "output_norm.weight";
  return gguf_rename::RenameLayer(rest, "layers.", "blk.", kLayer);
}

std::vector<GgufName> GgufNames(const Gemma3Config& cfg, bool llamacpp) {
  std::vector<GgufName> out;
  Gemma3Weights scratch;
  (void)ForEachTensor(cfg, &scratch, [&](const std::string& name, const Shape&, WeightSlot, bool) {
    out.push_back({name, GgufTensorName(name), llamacpp && name.ends_with("norm.weight")});
    return Status::Ok();
  });
  return out;
}

}  // namespace ocular::gemma3

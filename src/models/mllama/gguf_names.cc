#include "models/mllama/gguf_names.h"

#include <cstring>

#include "models/mllama/weights.h"

namespace ocular::mllama {

namespace {

struct Rename {
  const char* hf;
  const char* gguf;
};

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

bool StartsWith(const std::string& s, const char* prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

// "<prefix><i>.<rest>" -> "<out><i>.<renamed rest>" through `table` (prefix matches on rest).
std::string RenameLayer(const std::string& hf, const char* prefix, const char* out,
                        const Rename* begin, const Rename* end) {
  if (!StartsWith(hf, prefix)) return "";
  const size_t from = std::strlen(prefix), dot = hf.find('.', from);
  if (dot == std::string::npos) return "";
  const std::string index = hf.substr(from, dot - from), rest = hf.substr(dot + 1);
  for (const Rename* r = begin; r != end; ++r) {
    if (StartsWith(rest, r->hf))
      return out + index + "." + r->gguf + rest.substr(std::strlen(r->hf));
  }
  return "";
}

}  // namespace

std::string GgufTensorName(const std::string& hf) {
  for (const Rename& r : kWhole) {
    if (StartsWith(hf, r.hf)) return r.gguf + hf.substr(std::strlen(r.hf));
  }
  if (std::string s = RenameLayer(hf, "language_model.model.layers.", "blk.",
                                  std::begin(kTextLayer), std::end(kTextLayer));
      !s.empty()) {
    return s;
  }
  if (std::string s = RenameLayer(hf, "vision_model.global_transformer.layers.", "v.global.blk.",
                                  std::begin(kVisionLayer), std::end(kVisionLayer));
      !s.empty()) {
    return s;
  }
  return RenameLayer(hf, "vision_model.transformer.layers.", "v.blk.", std::begin(kVisionLayer),
                     std::end(kVisionLayer));
}

std::vector<GgufName> GgufNames(const MllamaConfig& cfg) {
  std::vector<GgufName> out;
  Weights scratch;
  (void)ForEachTensor(cfg, &scratch, [&](const std::string& name, const Shape&, WeightSlot, bool) {
    out.push_back({name, GgufTensorName(name), false});
    return Status::Ok();
  });
  return out;
}

}  // namespace ocular::mllama

#include "models/weights.h"

namespace ocular {

namespace {

// HF module tree of PaliGemmaForConditionalGeneration (checkpoint names as released on the
// hub; transformers >= 4.52 also saves "model.*" names, resolved in paligemma.cc).
Status VisitSiglip(const SiglipVisionConfig& c, SiglipWeights* w, const TensorVisitor& fn) {
  const int64_t D = c.hidden_size, Iv = c.intermediate_size, P = c.patch_size;
  const std::string e = "vision_tower.vision_model.embeddings.";
  OCULAR_RETURN_IF_ERROR(fn(e + "patch_embedding.weight", &w->patch_w, {D, c.num_channels, P, P}, true));
  OCULAR_RETURN_IF_ERROR(fn(e + "patch_embedding.bias", &w->patch_b, {D}, true));
  OCULAR_RETURN_IF_ERROR(fn(e + "position_embedding.weight", &w->pos, {c.num_patches(), D}, true));
  w->layers.resize(c.num_hidden_layers);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "vision_tower.vision_model.encoder.layers." + std::to_string(i) + ".";
    SiglipLayerWeights& l = w->layers[i];
    struct Item {
      const char* name;
      TensorView* view;
      Shape shape;
    };
    const Item items[] = {
        {"layer_norm1.weight", &l.ln1_w, {D}},        {"layer_norm1.bias", &l.ln1_b, {D}},
        {"self_attn.q_proj.weight", &l.q_w, {D, D}},  {"self_attn.q_proj.bias", &l.q_b, {D}},
        {"self_attn.k_proj.weight", &l.k_w, {D, D}},  {"self_attn.k_proj.bias", &l.k_b, {D}},
        {"self_attn.v_proj.weight", &l.v_w, {D, D}},  {"self_attn.v_proj.bias", &l.v_b, {D}},
        {"self_attn.out_proj.weight", &l.o_w, {D, D}}, {"self_attn.out_proj.bias", &l.o_b, {D}},
        {"layer_norm2.weight", &l.ln2_w, {D}},        {"layer_norm2.bias", &l.ln2_b, {D}},
        {"mlp.fc1.weight", &l.fc1_w, {Iv, D}},        {"mlp.fc1.bias", &l.fc1_b, {Iv}},
        {"mlp.fc2.weight", &l.fc2_w, {D, Iv}},        {"mlp.fc2.bias", &l.fc2_b, {D}},
    };
    for (const Item& it : items) OCULAR_RETURN_IF_ERROR(fn(p + it.name, it.view, it.shape, true));
  }
  const std::string post = "vision_tower.vision_model.post_layernorm.";
  OCULAR_RETURN_IF_ERROR(fn(post + "weight", &w->post_ln_w, {D}, true));
  return fn(post + "bias", &w->post_ln_b, {D}, true);
}

Status VisitGemma(const GemmaTextConfig& c, GemmaWeights* w, const TensorVisitor& fn) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t q = int64_t{c.num_attention_heads} * c.head_dim;
  const int64_t kv = int64_t{c.num_key_value_heads} * c.head_dim;
  const std::string m = "language_model.model.";
  OCULAR_RETURN_IF_ERROR(fn(m + "embed_tokens.weight", &w->embed, {V, H}, true));
  w->layers.resize(c.num_hidden_layers);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = m + "layers." + std::to_string(i) + ".";
    GemmaLayerWeights& l = w->layers[i];
    OCULAR_RETURN_IF_ERROR(fn(p + "input_layernorm.weight", &l.input_norm, {H}, true));
    OCULAR_RETURN_IF_ERROR(fn(p + "self_attn.q_proj.weight", &l.q_w, {q, H}, true));
    OCULAR_RETURN_IF_ERROR(fn(p + "self_attn.k_proj.weight", &l.k_w, {kv, H}, true));
    OCULAR_RETURN_IF_ERROR(fn(p + "self_attn.v_proj.weight", &l.v_w, {kv, H}, true));
    OCULAR_RETURN_IF_ERROR(fn(p + "self_attn.o_proj.weight", &l.o_w, {H, q}, true));
    OCULAR_RETURN_IF_ERROR(fn(p + "post_attention_layernorm.weight", &l.post_attn_norm, {H}, true));
    if (c.is_gemma2()) {
      OCULAR_RETURN_IF_ERROR(fn(p + "pre_feedforward_layernorm.weight", &l.pre_ffw_norm, {H}, true));
      OCULAR_RETURN_IF_ERROR(fn(p + "post_feedforward_layernorm.weight", &l.post_ffw_norm, {H}, true));
    }
    OCULAR_RETURN_IF_ERROR(fn(p + "mlp.gate_proj.weight", &l.gate_w, {I, H}, true));
    OCULAR_RETURN_IF_ERROR(fn(p + "mlp.up_proj.weight", &l.up_w, {I, H}, true));
    OCULAR_RETURN_IF_ERROR(fn(p + "mlp.down_proj.weight", &l.down_w, {H, I}, true));
  }
  OCULAR_RETURN_IF_ERROR(fn(m + "norm.weight", &w->final_norm, {H}, true));
  return fn("language_model.lm_head.weight", &w->lm_head, {V, H}, false);
}

}  // namespace

Status ForEachTensor(const PaliGemmaConfig& cfg, PaliGemmaWeights* w, const TensorVisitor& fn) {
  OCULAR_RETURN_IF_ERROR(VisitSiglip(cfg.vision, &w->vision, fn));
  const int64_t H = cfg.text.hidden_size, D = cfg.vision.hidden_size;
  OCULAR_RETURN_IF_ERROR(fn("multi_modal_projector.linear.weight", &w->proj_w, {H, D}, true));
  OCULAR_RETURN_IF_ERROR(fn("multi_modal_projector.linear.bias", &w->proj_b, {H}, true));
  return VisitGemma(cfg.text, &w->text, fn);
}

}  // namespace ocular

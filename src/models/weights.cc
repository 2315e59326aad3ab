#include "models/weights.h"

#include <set>

namespace ocular {

Status VisitItems(const std::string& prefix, std::initializer_list<WeightItem> items,
                  const TensorVisitor& fn) {
  for (const WeightItem& it : items) {
    OCULAR_RETURN_IF_ERROR(fn(prefix + it.name, it.shape, it.slot, true));
  }
  return Status::Ok();
}

// HF module tree of PaliGemmaForConditionalGeneration (checkpoint names as released on the
// hub; transformers >= 4.52 also saves "model.*" names, resolved in paligemma.cc).
Status VisitSiglip(const SiglipVisionConfig& c, SiglipWeights* w, const TensorVisitor& fn) {
  const int64_t D = c.hidden_size, Iv = c.intermediate_size, P = c.patch_size;
  const std::string e = "vision_tower.vision_model.embeddings.";
  OCULAR_RETURN_IF_ERROR(
      fn(e + "patch_embedding.weight", {D, c.num_channels, P, P}, Mat(&w->patch_w), true));
  OCULAR_RETURN_IF_ERROR(fn(e + "patch_embedding.bias", {D}, Vec(&w->patch_b), true));
  OCULAR_RETURN_IF_ERROR(
      fn(e + "position_embedding.weight", {c.num_patches(), D}, Vec(&w->pos), true));
  w->layers.resize(c.num_hidden_layers);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "vision_tower.vision_model.encoder.layers." + std::to_string(i) + ".";
    SiglipLayerWeights& l = w->layers[i];
    OCULAR_RETURN_IF_ERROR(VisitItems(p,
                                      {
                                          {"layer_norm1.weight", Vec(&l.ln1_w), {D}},
                                          {"layer_norm1.bias", Vec(&l.ln1_b), {D}},
                                          {"self_attn.q_proj.weight", Mat(&l.q_w), {D, D}},
                                          {"self_attn.q_proj.bias", Vec(&l.q_b), {D}},
                                          {"self_attn.k_proj.weight", Mat(&l.k_w), {D, D}},
                                          {"self_attn.k_proj.bias", Vec(&l.k_b), {D}},
                                          {"self_attn.v_proj.weight", Mat(&l.v_w), {D, D}},
                                          {"self_attn.v_proj.bias", Vec(&l.v_b), {D}},
                                          {"self_attn.out_proj.weight", Mat(&l.o_w), {D, D}},
                                          {"self_attn.out_proj.bias", Vec(&l.o_b), {D}},
                                          {"layer_norm2.weight", Vec(&l.ln2_w), {D}},
                                          {"layer_norm2.bias", Vec(&l.ln2_b), {D}},
                                          {"mlp.fc1.weight", Mat(&l.fc1_w), {Iv, D}},
                                          {"mlp.fc1.bias", Vec(&l.fc1_b), {Iv}},
                                          {"mlp.fc2.weight", Mat(&l.fc2_w), {D, Iv}},
                                          {"mlp.fc2.bias", Vec(&l.fc2_b), {D}},
                                      },
                                      fn));
  }
  const std::string post = "vision_tower.vision_model.post_layernorm.";
  OCULAR_RETURN_IF_ERROR(fn(post + "weight", {D}, Vec(&w->post_ln_w), true));
  return fn(post + "bias", {D}, Vec(&w->post_ln_b), true);
}

namespace {

Status VisitGemma(const GemmaTextConfig& c, GemmaWeights* w, const TensorVisitor& fn) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t q = int64_t{c.num_attention_heads} * c.head_dim;
  const int64_t kv = int64_t{c.num_key_value_heads} * c.head_dim;
  const std::string m = "language_model.model.";
  OCULAR_RETURN_IF_ERROR(fn(m + "embed_tokens.weight", {V, H}, Mat(&w->embed), true));
  w->layers.resize(c.num_hidden_layers);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = m + "layers." + std::to_string(i) + ".";
    GemmaLayerWeights& l = w->layers[i];
    OCULAR_RETURN_IF_ERROR(fn(p + "input_layernorm.weight", {H}, Vec(&l.input_norm), true));
    OCULAR_RETURN_IF_ERROR(fn(p + "self_attn.q_proj.weight", {q, H}, Mat(&l.q_w), true));
    OCULAR_RETURN_IF_ERROR(fn(p + "self_attn.k_proj.weight", {kv, H}, Mat(&l.k_w), true));
    OCULAR_RETURN_IF_ERROR(fn(p + "self_attn.v_proj.weight", {kv, H}, Mat(&l.v_w), true));
    OCULAR_RETURN_IF_ERROR(fn(p + "self_attn.o_proj.weight", {H, q}, Mat(&l.o_w), true));
    OCULAR_RETURN_IF_ERROR(
        fn(p + "post_attention_layernorm.weight", {H}, Vec(&l.post_attn_norm), true));
    if (c.is_gemma2()) {
      OCULAR_RETURN_IF_ERROR(
          fn(p + "pre_feedforward_layernorm.weight", {H}, Vec(&l.pre_ffw_norm), true));
      OCULAR_RETURN_IF_ERROR(
          fn(p + "post_feedforward_layernorm.weight", {H}, Vec(&l.post_ffw_norm), true));
    }
    OCULAR_RETURN_IF_ERROR(fn(p + "mlp.gate_proj.weight", {I, H}, Mat(&l.gate_w), true));
    OCULAR_RETURN_IF_ERROR(fn(p + "mlp.up_proj.weight", {I, H}, Mat(&l.up_w), true));
    OCULAR_RETURN_IF_ERROR(fn(p + "mlp.down_proj.weight", {H, I}, Mat(&l.down_w), true));
  }
  OCULAR_RETURN_IF_ERROR(fn(m + "norm.weight", {H}, Vec(&w->final_norm), true));
  return fn("language_model.lm_head.weight", {V, H}, Mat(&w->lm_head), false);
}

}  // namespace

Status ForEachTensor(const PaliGemmaConfig& cfg, PaliGemmaWeights* w, const TensorVisitor& fn) {
  OCULAR_RETURN_IF_ERROR(VisitSiglip(cfg.vision, &w->vision, fn));
  const int64_t H = cfg.text.hidden_size, D = cfg.vision.hidden_size;
  OCULAR_RETURN_IF_ERROR(fn("multi_modal_projector.linear.weight", {H, D}, Mat(&w->proj_w), true));
  OCULAR_RETURN_IF_ERROR(fn("multi_modal_projector.linear.bias", {H}, Vec(&w->proj_b), true));
  return VisitGemma(cfg.text, &w->text, fn);
}

StatusOr<BoundWeights> BindTensors(const TensorSource& src, const BindRules& rules,
                                   const std::function<Status(const TensorVisitor&)>& for_each) {
  BoundWeights out;
  std::set<std::string> used, formats;
  std::set<DType> dtypes, float_dtypes;
  Status s = for_each(
      [&](const std::string& name, const Shape& shape, WeightSlot slot, bool required) -> Status {
        for (const std::string& cand : rules.candidates(name)) {
          if (!src.Has(cand)) continue;
          used.insert(cand);
          size_t bytes;
          if (slot.matrix) {
            OCULAR_ASSIGN_OR_RETURN(*slot.matrix, src.GetMatrix(cand, shape));
            OCULAR_RETURN_IF_ERROR(src.PlaceMatrix(slot.matrix, cand));
            const WFormat f = slot.matrix->format;
            formats.insert(WFormatName(f));
            const bool is_float = f == WFormat::kF32 || f == WFormat::kBF16 || f == WFormat::kF16;
            const DType d = f == WFormat::kBF16  ? DType::kBF16
                            : f == WFormat::kF16 ? DType::kF16
                                                 : DType::kF32;
            dtypes.insert(d);
            if (is_float) float_dtypes.insert(d);
            out.quantized |= !is_float;
            bytes = slot.matrix->bytes();
          } else {
            OCULAR_ASSIGN_OR_RETURN(*slot.vector, src.Get(cand, shape));
            bytes = slot.vector->nbytes();
          }
          out.weight_bytes += bytes;
          if (rules.is_text(name)) out.text_weight_bytes += bytes;
          return Status::Ok();
        }
        if (!required) return Status::Ok();
        return Error(StatusCode::kDataLoss, "checkpoint", src.origin(), ": missing tensor '", name,
                     "'");
      });
  OCULAR_RETURN_IF_ERROR(s);
  for (const std::string& name : src.Names()) {
    if (!used.count(name)) {
      return Error(StatusCode::kUnimplemented, rules.tag, src.origin(), ": tensor '", name,
                   "' is not used by ocular's ", rules.model,
                   "; this checkpoint needs a configuration ocular does not implement");
    }
  }
  out.weight_dtype = dtypes.size() == 1 ? *dtypes.begin() : DType::kF32;
  // bf16 beside f16: ocular quantize writes f16 where no block format fits a bf16 row.
  float_dtypes.erase(DType::kF16);
  out.float_dtype = float_dtypes.size() == 1 ? *float_dtypes.begin() : DType::kF32;
  for (const std::string& f : formats)
    out.weight_formats += (out.weight_formats.empty() ? "" : "+") + f;
  return out;
}

}  // namespace ocular

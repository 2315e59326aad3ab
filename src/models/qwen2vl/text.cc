#include "models/qwen2vl/text.h"

#include <algorithm>

#include "core/check.h"
#include "kernels/ops.h"
#include "models/blocks/norm.h"
#include "models/blocks/scratch.h"
#include "models/qwen2vl/config.h"
#include "models/qwen2vl/config3.h"

namespace ocular::qwen2vl {

namespace {

// The fields both families' configs name alike (Qwen2VLTextConfig, Qwen3VLTextConfig).
template <typename Config>
QwenText CommonText(const Config& cfg) {
  QwenText t;
  static_cast<DecoderSizes&>(t) = cfg.text;
  t.eos_token_id = cfg.text.eos_token_id;
  t.tie_word_embeddings = cfg.tie_word_embeddings;
  t.image_token_id = cfg.image_token_id;
  return t;
}

}  // namespace

QwenText TextOf(const Qwen2VLConfig& cfg) {
  QwenText t = CommonText(cfg);
  t.head_dim_ = cfg.text.head_dim();
  t.qkv_bias = true;    // Qwen2Attention: q/k/v_proj bias=True, o_proj bias=False
  t.prefix = "model.";  // the released checkpoints' legacy names
  return t;
}

QwenText TextOf(const Qwen3VLConfig& cfg) {
  QwenText t = CommonText(cfg);
  t.head_dim_ = cfg.text.head_dim;
  t.qkv_bias = t.o_bias = cfg.text.attention_bias;
  t.qk_norm = true;
  t.prefix = "model.language_model.";
  return t;
}

namespace {

Status VisitLayer(const QwenText& t, const std::string& pre, TextLayerWeights* l,
                  const TensorVisitor& fn) {
  const int64_t H = t.hidden_size, I = t.intermediate_size, d = t.head_dim();
  const int64_t q = int64_t{t.num_attention_heads} * d, kv = int64_t{t.num_key_value_heads} * d;
  auto visit = [&](const char* name, WeightSlot slot, const Shape& shape) {
    return fn(pre + name, shape, slot, true);
  };
  // A projection's weight and, when the config has one, its bias.
  auto proj = [&](const std::string& name, Matrix* w, TensorView* b, int64_t rows, int64_t cols,
                  bool bias) -> Status {
    OCULAR_RETURN_IF_ERROR(fn(pre + name + ".weight", {rows, cols}, Mat(w), true));
    return bias ? fn(pre + name + ".bias", {rows}, Vec(b), true) : Status::Ok();
  };
  OCULAR_RETURN_IF_ERROR(visit("input_layernorm.weight", Vec(&l->input_norm), {H}));
  OCULAR_RETURN_IF_ERROR(proj("self_attn.q_proj", &l->q_w, &l->q_b, q, H, t.qkv_bias));
  OCULAR_RETURN_IF_ERROR(proj("self_attn.k_proj", &l->k_w, &l->k_b, kv, H, t.qkv_bias));
  OCULAR_RETURN_IF_ERROR(proj("self_attn.v_proj", &l->v_w, &l->v_b, kv, H, t.qkv_bias));
  OCULAR_RETURN_IF_ERROR(proj("self_attn.o_proj", &l->o_w, &l->o_b, H, q, t.o_bias));
  if (t.qk_norm) {
    OCULAR_RETURN_IF_ERROR(visit("self_attn.q_norm.weight", Vec(&l->q_norm), {d}));
    OCULAR_RETURN_IF_ERROR(visit("self_attn.k_norm.weight", Vec(&l->k_norm), {d}));
  }
  return VisitItems(pre,
                    {
                        {"post_attention_layernorm.weight", Vec(&l->post_attn_norm), {H}},
                        {"mlp.gate_proj.weight", Mat(&l->gate_w), {I, H}},
                        {"mlp.up_proj.weight", Mat(&l->up_w), {I, H}},
                        {"mlp.down_proj.weight", Mat(&l->down_w), {H, I}},
                    },
                    fn);
}

blocks::DecoderLayerWeights LayerView(const QwenText& t, const TextLayerWeights& l) {
  blocks::DecoderLayerWeights w;
  const bool b = t.qkv_bias, ob = t.o_bias, n = t.qk_norm;
  w.attn = {&l.q_w,
            &l.k_w,
            &l.v_w,
            &l.o_w,
            b ? &l.q_b : nullptr,
            b ? &l.k_b : nullptr,
            b ? &l.v_b : nullptr,
            ob ? &l.o_b : nullptr,
            n ? &l.q_norm : nullptr,
            n ? &l.k_norm : nullptr};
  w.mlp = {&l.gate_w, nullptr, &l.up_w, &l.down_w, nullptr};
  w.attn_norm = &l.input_norm;
  w.ffn_norm = &l.post_attn_norm;
  return w;
}

}  // namespace

Status VisitText(const QwenText& t, TextWeights* w, const TensorVisitor& fn) {
  const int64_t H = t.hidden_size, V = t.vocab_size;
  OCULAR_RETURN_IF_ERROR(fn(t.prefix + "embed_tokens.weight", {V, H}, Mat(&w->embed), true));
  w->layers.resize(t.num_hidden_layers);
  for (int i = 0; i < t.num_hidden_layers; ++i) {
    OCULAR_RETURN_IF_ERROR(
        VisitLayer(t, t.prefix + "layers." + std::to_string(i) + ".", &w->layers[i], fn));
  }
  OCULAR_RETURN_IF_ERROR(fn(t.prefix + "norm.weight", {H}, Vec(&w->final_norm), true));
  if (t.tie_word_embeddings) return Status::Ok();  // lm_head = embed_tokens
  return fn("lm_head.weight", {V, H}, Mat(&w->lm_head), true);
}

blocks::DecoderLayerSpec TextLayerSpec(const QwenText& t, const blocks::RopeSpec& rope) {
  blocks::DecoderLayerSpec s = blocks::LlamaLayerSpec(t);
  s.attn.rope = rope;
  if (t.qk_norm) s.attn.qk_norm = {blocks::NormKind::kLlamaRms, nullptr, nullptr, t.rms_norm_eps};
  return s;
}

void SetTextSpec(const QwenText& t, ModelSpec* spec) {
  spec->hidden_size = t.hidden_size;
  spec->vocab_size = t.vocab_size;
  spec->max_positions = t.max_position_embeddings;
  spec->kv.kv_dim = int64_t{t.num_key_value_heads} * t.head_dim();
  for (int i = 0; i < t.num_hidden_layers; ++i) {
    ocular::LayerSpec l;
    l.rope_theta = t.rope_theta;
    spec->layers.push_back(l);
    spec->kv.window.push_back(0);
    spec->kv.cross.push_back(0);
  }
  spec->image_token_id = t.image_token_id;
  spec->eos_ids = {t.eos_token_id};
}

size_t TextBytes(const QwenText& t, const blocks::RopeSpec& rope, const WorkspaceShape& s) {
  const size_t layer =
      blocks::DecoderLayerBytes(TextLayerSpec(t, rope), s.rows, s.context, s.threads);
  const size_t logits =
      blocks::FloatBytes(ops::MatMulArenaFloats(s.threads, s.rows, t.hidden_size));
  return std::max(layer, logits);
}

Status EmbedText(const Exec& ex, const QwenText& t, const Matrix& embed,
                 std::span<const int32_t> ids, const float* features, int64_t feature_rows,
                 int64_t feature_stride, const std::string& tag, float* x, Tracer* tracer) {
  const int64_t T = static_cast<int64_t>(ids.size()), H = t.hidden_size, V = embed.rows;
  int64_t pads = 0;
  for (int64_t i = 0; i < T; ++i) {
    if (ids[i] < 0 || ids[i] >= V) {
      return Error(StatusCode::kInvalidArgument, tag, "token id ", ids[i], " at position ", i,
                   " is outside the vocabulary [0, ", V, ")");
    }
    pads += ids[i] == t.image_token_id;
  }
  // get_placeholder_mask checks the count only with image features: a decode step may embed
  // a sampled <|image_pad|> as any token (the processor refuses pads outside an image's tag).
  if (features != nullptr && pads != feature_rows) {
    // "Image features and image tokens do not match"
    return Error(StatusCode::kInvalidArgument, tag, "prompt has ", pads,
                 " image pads but the images produced ", feature_rows, " feature rows");
  }
  // inputs_embeds = embed_tokens(input_ids).masked_scatter(image_mask, image_embeds)
  ops::EmbedRows(ex, embed, ids.data(), T, x, H);
  int64_t next = 0;
  for (int64_t i = 0; i < T && features != nullptr; ++i) {
    if (ids[i] == t.image_token_id) std::copy_n(features + next++ * feature_stride, H, x + i * H);
  }
  Tap(tracer, "decoder.inputs_embeds", x, {T, H});
  return Status::Ok();
}

void ForwardText(const Exec& ex, const QwenText& t, const blocks::RopeSpec& rope,
                 const TextWeights& w, const Batch& batch, float* x, Tracer* tracer, int begin,
                 int end, FunctionRef<void(int)> after_layer) {
  const int64_t H = t.hidden_size;
  OCULAR_CHECK(0 <= begin && begin <= end && end <= t.num_hidden_layers);
  const blocks::DecoderLayerSpec spec = TextLayerSpec(t, rope);
  for (int i = begin; i < end; ++i) {
    // x = x + self_attn(input_layernorm(x)); x = x + mlp(post_attention_layernorm(x))
    blocks::DecoderLayer(ex, spec, LayerView(t, w.layers[i]), i, batch, x,
                         blocks::Taps{tracer, "decoder.layers.", i});
    TapIndexed(tracer, "decoder.layers.", i, x, {batch.rows, H});
    after_layer(i);
  }
  if (end < t.num_hidden_layers) return;
  blocks::ApplyNorm(ex, {blocks::NormKind::kLlamaRms, &w.final_norm, nullptr, t.rms_norm_eps}, x,
                    batch.rows, H, x);
  Tap(tracer, "decoder.norm", x, {batch.rows, H});
}

void TextLogits(const Exec& ex, const QwenText& t, const TextWeights& w, const float* hidden,
                int64_t rows, float* logits) {
  const int64_t H = t.hidden_size;
  ops::MatMul(ex, hidden, rows, H, H, w.lm_head, nullptr, logits, w.lm_head.rows);
}

BindRules QwenBindRules(const std::string& tag, const std::string& model, bool legacy_names) {
  BindRules rules;
  if (legacy_names) {
    // Released checkpoints use the legacy names (model.layers, visual, lm_head); transformers
    // >= 4.52 loads them through _checkpoint_conversion_mapping and may save the new ones.
    rules.candidates = [](const std::string& name) {
      std::vector<std::string> out = {name};
      if (name.starts_with("model.")) out.push_back("model.language_model." + name.substr(6));
      if (name.starts_with("visual.")) out.push_back("model." + name);
      return out;
    };
  } else {
    rules.candidates = [](const std::string& name) { return std::vector<std::string>{name}; };
  }
  rules.is_text = [](const std::string& name) {
    return name.find("visual.") == std::string::npos &&
           name.find("embed_tokens.") == std::string::npos;
  };
  rules.tag = tag;
  rules.model = model;
  return rules;
}

Matrix Rows(const Matrix& m, int64_t first, int64_t n) {
  Matrix out = m;
  out.data = m.row(first);
  out.rows = n;
  return out;
}

TensorView Slice(const TensorView& v, int64_t first, int64_t n) {
  TensorView out = v;
  out.data = static_cast<const std::byte*>(v.data) + first * DTypeSize(v.dtype);
  out.shape = {n};
  return out;
}

}  // namespace ocular::qwen2vl

#include "models/qwen2vl/qwen2vl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/arena.h"
#include "core/check.h"
#include "io/checkpoint.h"
#include "kernels/ops.h"
#include "models/blocks/decoder_layer.h"
#include "models/blocks/norm.h"
#include "models/blocks/scratch.h"
#include "models/qwen2vl/gguf_names.h"
#include "models/qwen2vl/llamacpp_gguf.h"
#include "models/qwen2vl/vision.h"
#include "models/weights.h"

namespace ocular::qwen2vl {

namespace {

Status VisitVision(const Qwen2VLConfig& cfg, VisionWeights* w, const TensorVisitor& fn) {
  const VisionConfig& c = cfg.vision;
  const int64_t D = c.embed_dim, Iv = c.mlp_dim(), Dm = D * c.merge_rows();
  const int64_t p = c.patch_size, H = cfg.text.hidden_size;
  OCULAR_RETURN_IF_ERROR(fn("visual.patch_embed.proj.weight",
                            {D, c.in_channels, c.temporal_patch_size, p, p}, Mat(&w->patch_w),
                            true));
  w->blocks.resize(c.depth);
  for (int i = 0; i < c.depth; ++i) {
    VisionBlockWeights& b = w->blocks[i];
    const std::string pre = "visual.blocks." + std::to_string(i) + ".";
    OCULAR_RETURN_IF_ERROR(VisitItems(pre,
                                      {
                                          {"norm1.weight", Vec(&b.norm1_w), {D}},
                                          {"norm2.weight", Vec(&b.norm2_w), {D}},
                                          {"attn.qkv.weight", Mat(&b.qkv_w), {3 * D, D}},
                                          {"attn.qkv.bias", Vec(&b.qkv_b), {3 * D}},
                                          {"attn.proj.weight", Mat(&b.proj_w), {D, D}},
                                          {"attn.proj.bias", Vec(&b.proj_b), {D}},
                                      },
                                      fn));
    if (c.qwen25) {  // Qwen2RMSNorm norms; Qwen2_5_VLMLP(bias=True)
      OCULAR_RETURN_IF_ERROR(VisitItems(pre,
                                        {
                                            {"mlp.gate_proj.weight", Mat(&b.fc1_w), {Iv, D}},
                                            {"mlp.gate_proj.bias", Vec(&b.fc1_b), {Iv}},
                                            {"mlp.up_proj.weight", Mat(&b.up_w), {Iv, D}},
                                            {"mlp.up_proj.bias", Vec(&b.up_b), {Iv}},
                                            {"mlp.down_proj.weight", Mat(&b.fc2_w), {D, Iv}},
                                            {"mlp.down_proj.bias", Vec(&b.fc2_b), {D}},
                                        },
                                        fn));
      continue;
    }
    OCULAR_RETURN_IF_ERROR(VisitItems(pre,
                                      {
                                          {"norm1.bias", Vec(&b.norm1_b), {D}},
                                          {"norm2.bias", Vec(&b.norm2_b), {D}},
                                          {"mlp.fc1.weight", Mat(&b.fc1_w), {Iv, D}},
                                          {"mlp.fc1.bias", Vec(&b.fc1_b), {Iv}},
                                          {"mlp.fc2.weight", Mat(&b.fc2_w), {D, Iv}},
                                          {"mlp.fc2.bias", Vec(&b.fc2_b), {D}},
                                      },
                                      fn));
  }
  if (!c.qwen25) {
    OCULAR_RETURN_IF_ERROR(fn("visual.merger.ln_q.bias", {D}, Vec(&w->ln_q_b), true));
  }
  return VisitItems("visual.merger.",
                    {
                        {"ln_q.weight", Vec(&w->ln_q_w), {D}},
                        {"mlp.0.weight", Mat(&w->mlp0_w), {Dm, Dm}},
                        {"mlp.0.bias", Vec(&w->mlp0_b), {Dm}},
                        {"mlp.2.weight", Mat(&w->mlp2_w), {H, Dm}},
                        {"mlp.2.bias", Vec(&w->mlp2_b), {H}},
                    },
                    fn);
}

Status VisitText(const Qwen2VLConfig& cfg, Weights* w, const TensorVisitor& fn) {
  const TextConfig& c = cfg.text;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, d = c.head_dim();
  const int64_t q = int64_t{c.num_attention_heads} * d, kv = int64_t{c.num_key_value_heads} * d;
  OCULAR_RETURN_IF_ERROR(fn("model.embed_tokens.weight", {V, H}, Mat(&w->embed), true));
  w->layers.resize(c.num_hidden_layers);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    TextLayerWeights& l = w->layers[i];
    OCULAR_RETURN_IF_ERROR(
        VisitItems("model.layers." + std::to_string(i) + ".",
                   {
                       {"input_layernorm.weight", Vec(&l.input_norm), {H}},
                       {"self_attn.q_proj.weight", Mat(&l.q_w), {q, H}},
                       {"self_attn.q_proj.bias", Vec(&l.q_b), {q}},
                       {"self_attn.k_proj.weight", Mat(&l.k_w), {kv, H}},
                       {"self_attn.k_proj.bias", Vec(&l.k_b), {kv}},
                       {"self_attn.v_proj.weight", Mat(&l.v_w), {kv, H}},
                       {"self_attn.v_proj.bias", Vec(&l.v_b), {kv}},
                       {"self_attn.o_proj.weight", Mat(&l.o_w), {H, q}},
                       {"post_attention_layernorm.weight", Vec(&l.post_attn_norm), {H}},
                       {"mlp.gate_proj.weight", Mat(&l.gate_w), {I, H}},
                       {"mlp.up_proj.weight", Mat(&l.up_w), {I, H}},
                       {"mlp.down_proj.weight", Mat(&l.down_w), {H, I}},
                   },
                   fn));
  }
  OCULAR_RETURN_IF_ERROR(fn("model.norm.weight", {H}, Vec(&w->final_norm), true));
  if (cfg.tie_word_embeddings) return Status::Ok();  // lm_head = embed_tokens
  return fn("lm_head.weight", {V, H}, Mat(&w->lm_head), true);
}

// Released checkpoints use the legacy names (model.layers, visual, lm_head); transformers
// >= 4.52 loads them through _checkpoint_conversion_mapping and may save the new ones.
std::vector<std::string> NameCandidates(const std::string& name) {
  std::vector<std::string> out = {name};
  if (name.starts_with("model.")) out.push_back("model.language_model." + name.substr(6));
  if (name.starts_with("visual.")) out.push_back("model." + name);
  return out;
}

// One third of the fused qkv projection: rows [part * D, (part + 1) * D).
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

// Qwen2VLDecoderLayer: Qwen2RMSNorm (Llama's form), Qwen2VLAttention (q/k/v biases, no o bias,
// GQA, scale head_dim^-0.5, M-RoPE at the prompt's positions, causal), Qwen2MLP
// down(silu(gate(x)) * up(x)).
blocks::DecoderLayerSpec TextLayerSpec(const TextConfig& c, const blocks::RopeSpec& rope) {
  blocks::DecoderLayerSpec s = blocks::LlamaLayerSpec(c);
  s.attn.rope = rope;
  return s;
}

blocks::DecoderLayerWeights LayerView(const TextLayerWeights& l) {
  blocks::DecoderLayerWeights w;
  w.attn = {&l.q_w, &l.k_w, &l.v_w, &l.o_w, &l.q_b, &l.k_b, &l.v_b, nullptr};
  w.mlp = {&l.gate_w, nullptr, &l.up_w, &l.down_w, nullptr};
  w.attn_norm = &l.input_norm;
  w.ffn_norm = &l.post_attn_norm;
  return w;
}

}  // namespace

Status ForEachTensor(const Qwen2VLConfig& cfg, Weights* w, const TensorVisitor& fn) {
  OCULAR_RETURN_IF_ERROR(VisitVision(cfg, &w->vision, fn));
  return VisitText(cfg, w, fn);
}

StatusOr<std::unique_ptr<Qwen2VL>> Qwen2VL::Load(const ModelFiles& files) {
  OCULAR_ASSIGN_OR_RETURN(Qwen2VLConfig cfg, LoadQwen2VLConfig(*files.files));
  std::unique_ptr<Qwen2VL> m(new Qwen2VL());
  OCULAR_ASSIGN_OR_RETURN(m->image_, LoadImageConfig(*files.files));
  std::unique_ptr<TensorSource> source;
  if (files.gguf != nullptr && files.llamacpp) {  // llama.cpp's text GGUF + mmproj
    OCULAR_ASSIGN_OR_RETURN(source, LlamaCppTensors(files, cfg));
  } else {  // an HF directory, or a GGUF written by `ocular quantize` (gguf_names.h)
    Weights scratch;
    OCULAR_ASSIGN_OR_RETURN(source, OpenTensors(files, [&] {
                              return GgufTensors(files.gguf, [&](const TensorVisitor& fn) {
                                return ForEachTensor(cfg, &scratch, fn);
                              });
                            }));
  }
  return Assemble(std::move(m), std::move(cfg), std::move(source));
}

Status Qwen2VL::BindWeights() {
  BindRules rules;
  rules.candidates = NameCandidates;
  rules.is_text = [](const std::string& name) {
    return name.find("visual.") == std::string::npos &&
           name.find("embed_tokens.") == std::string::npos;
  };
  rules.tag = cfg_.model_type;
  rules.model = cfg_.qwen25() ? "Qwen2.5-VL (qwen2_5_vl)" : "Qwen2-VL (qwen2_vl)";
  OCULAR_RETURN_IF_ERROR(BindAll(rules));
  if (cfg_.tie_word_embeddings) w_.lm_head = w_.embed;
  const int64_t D = cfg_.vision.embed_dim;
  for (VisionBlockWeights& b : w_.vision.blocks) {
    // qkv(x).reshape(seq, 3, heads, -1): q, k, v are the thirds of the output rows.
    b.q_w = Rows(b.qkv_w, 0, D);
    b.k_w = Rows(b.qkv_w, D, D);
    b.v_w = Rows(b.qkv_w, 2 * D, D);
    b.q_b = Slice(b.qkv_b, 0, D);
    b.k_b = Slice(b.qkv_b, D, D);
    b.v_b = Slice(b.qkv_b, 2 * D, D);
  }
  const TextConfig& t = cfg_.text;
  text_rope_ = blocks::MultimodalRope(t.head_dim(), t.rope_theta, t.mrope_section);
  // Qwen2VisionTransformerPretrainedModel: VisionRotaryEmbedding(head_dim // 2), theta 10000.
  vision_rope_ = blocks::VisionRope2d(cfg_.vision.head_dim(), 10000.0f);
  return Status::Ok();
}

void Qwen2VL::BuildSpec() {
  const TextConfig& t = cfg_.text;
  const VisionConfig& v = cfg_.vision;
  spec_.family = cfg_.model_type;
  spec_.architecture = cfg_.qwen25() ? "Qwen2.5-VL (qwen2_5_vl)" : "Qwen2-VL (qwen2_vl)";
  spec_.hidden_size = t.hidden_size;
  spec_.vocab_size = t.vocab_size;
  spec_.max_positions = t.max_position_embeddings;
  spec_.kv.kv_dim = int64_t{t.num_key_value_heads} * t.head_dim();
  for (int i = 0; i < t.num_hidden_layers; ++i) {
    ocular::LayerSpec l;
    l.rope_theta = t.rope_theta;
    spec_.layers.push_back(l);
    spec_.kv.window.push_back(0);
    spec_.kv.cross.push_back(0);
  }
  // A typical image for planning and ModelInfo: the largest smart_resize makes, as a square.
  const int64_t patches = image_.max_patches();
  spec_.image_size = static_cast<int>(std::sqrt(static_cast<double>(patches))) * v.patch_size;
  spec_.image_tokens = static_cast<int>(patches / v.merge_rows());
  spec_.image_token_id = cfg_.image_token_id;
  spec_.eos_ids = {t.eos_token_id};
  // Per image of `patches` rows: patch embed, blocks (qkv, proj, MLP, attention), merger.
  const double N = static_cast<double>(patches), D = v.embed_dim, Iv = v.mlp_dim();
  const double Dm = D * v.merge_rows(), K = v.patch_floats();
  const double block = 2 * N * (4 * D * D + 2 * D * Iv) + 2 * 2 * N * N * D;
  spec_.image_gflop = (2 * N * K * D + v.depth * block +
                       2 * (N / v.merge_rows()) * (Dm * Dm + Dm * t.hidden_size)) /
                      1e9;
}

size_t Qwen2VL::WorkspaceBytes(const WorkspaceShape& s) const {
  const TextConfig& t = cfg_.text;
  const size_t encode =
      s.images > 0 ? EncodeBytes(cfg_, s.images * image_.max_patches(), s.threads) : 0;
  const size_t layer =
      blocks::DecoderLayerBytes(TextLayerSpec(t, text_rope_.spec()), s.rows, s.context, s.threads);
  const size_t logits =
      blocks::FloatBytes(ops::MatMulArenaFloats(s.threads, s.rows, t.hidden_size));
  return std::max({encode, layer, logits});
}

void Qwen2VL::EncodeImages(const Exec& ex, std::span<const VisionInput> images, const float* pixels,
                           float* features, Tracer* tracer) const {
  qwen2vl::EncodeImages(ex, cfg_, w_.vision, vision_rope_.spec(), images, pixels, features, tracer);
}

Status Qwen2VL::Embed(const Exec& ex, std::span<const int32_t> ids, const float* features,
                      int64_t feature_rows, float* x, Tracer* tracer) const {
  const int64_t T = static_cast<int64_t>(ids.size()), H = cfg_.text.hidden_size;
  const int64_t V = w_.embed.rows;
  int64_t pads = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (ids[t] < 0 || ids[t] >= V) {
      return Error(StatusCode::kInvalidArgument, "qwen2_vl", "token id ", ids[t], " at position ",
                   t, " is outside the vocabulary [0, ", V, ")");
    }
    pads += ids[t] == cfg_.image_token_id;
  }
  // get_placeholder_mask checks the count only with image features: a decode step embeds a
  // sampled <|image_pad|> as any token (the processor refuses pads outside an image's tag).
  if (features != nullptr && pads != feature_rows) {
    return Error(StatusCode::kInvalidArgument, "qwen2_vl", "prompt has ", pads,
                 " image pads but the images produced ", feature_rows, " feature rows");
  }
  // inputs_embeds = embed_tokens(input_ids).masked_scatter(image_mask, image_embeds)
  ops::EmbedRows(ex, w_.embed, ids.data(), T, x, H);
  int64_t next = 0;
  for (int64_t t = 0; t < T && features != nullptr; ++t) {
    if (ids[t] == cfg_.image_token_id) std::copy_n(features + next++ * H, H, x + t * H);
  }
  Tap(tracer, "decoder.inputs_embeds", x, {T, H});
  return Status::Ok();
}

void Qwen2VL::ForwardLayers(const Exec& ex, const Batch& batch, float* x, Tracer* tracer, int begin,
                            int end) const {
  const TextConfig& t = cfg_.text;
  const int64_t H = t.hidden_size;
  OCULAR_CHECK(0 <= begin && begin <= end && end <= t.num_hidden_layers);
  const blocks::DecoderLayerSpec spec = TextLayerSpec(t, text_rope_.spec());
  for (int i = begin; i < end; ++i) {
    // x = x + self_attn(input_layernorm(x)); x = x + mlp(post_attention_layernorm(x))
    blocks::DecoderLayer(ex, spec, LayerView(w_.layers[i]), i, batch, x,
                         blocks::Taps{tracer, "decoder.layers.", i});
    TapIndexed(tracer, "decoder.layers.", i, x, {batch.rows, H});
  }
  if (end < t.num_hidden_layers) return;
  blocks::ApplyNorm(ex, {blocks::NormKind::kLlamaRms, &w_.final_norm, nullptr, t.rms_norm_eps}, x,
                    batch.rows, H, x);
  Tap(tracer, "decoder.norm", x, {batch.rows, H});
}

void Qwen2VL::Logits(const Exec& ex, const float* hidden, int64_t rows, float* logits) const {
  const int64_t H = cfg_.text.hidden_size;
  ops::MatMul(ex, hidden, rows, H, H, w_.lm_head, nullptr, logits, w_.lm_head.rows);
}

Status Qwen2VL::ForEachWeight(const WeightVisitor& fn) const {
  Weights w = w_;  // views; the visitor only reads them
  return ForEachGgufWeight(
      [&](const TensorVisitor& visit) { return ForEachTensor(cfg_, &w, visit); }, fn, "qwen2_vl");
}

}  // namespace ocular::qwen2vl

#include "models/qwen2vl/qwen3vl.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "io/checkpoint.h"
#include "kernels/ops.h"
#include "models/blocks/decoder_layer.h"
#include "models/blocks/norm.h"
#include "models/blocks/scratch.h"
#include "models/qwen2vl/gguf_names.h"
#include "models/qwen2vl/vision3.h"
#include "models/weights.h"

namespace ocular::qwen2vl {

namespace {

struct Item {
  std::string name;
  WeightSlot slot;
  Shape shape;
};

Status Visit(const std::string& prefix, std::initializer_list<Item> items,
             const TensorVisitor& fn) {
  for (const Item& it : items)
    OCULAR_RETURN_IF_ERROR(fn(prefix + it.name, it.shape, it.slot, true));
  return Status::Ok();
}

// Qwen3VLVisionPatchMerger's tensors; norm over D, or Dm after the shuffle.
Status VisitMerger(const std::string& pre, int64_t norm_dim, int64_t Dm, int64_t H,
                   Merger3Weights* m, const TensorVisitor& fn) {
  return Visit(pre,
               {{"norm.weight", Vec(&m->norm_w), {norm_dim}},
                {"norm.bias", Vec(&m->norm_b), {norm_dim}},
                {"linear_fc1.weight", Mat(&m->fc1_w), {Dm, Dm}},
                {"linear_fc1.bias", Vec(&m->fc1_b), {Dm}},
                {"linear_fc2.weight", Mat(&m->fc2_w), {H, Dm}},
                {"linear_fc2.bias", Vec(&m->fc2_b), {H}}},
               fn);
}

Status VisitVision(const Qwen3VLConfig& cfg, Vision3Weights* w, const TensorVisitor& fn) {
  const Vision3Config& c = cfg.vision;
  const int64_t D = c.hidden_size, Iv = c.intermediate_size, Dm = D * c.merge_rows();
  const int64_t p = c.patch_size, H = cfg.text.hidden_size;
  const std::string pre = "model.visual.";
  OCULAR_RETURN_IF_ERROR(
      Visit(pre,
            {{"patch_embed.proj.weight",
              Mat(&w->patch_w),
              {D, c.in_channels, c.temporal_patch_size, p, p}},
             {"patch_embed.proj.bias", Vec(&w->patch_b), {D}},
             {"pos_embed.weight", Mat(&w->pos_embed), {c.num_position_embeddings, D}}},
            fn));
  w->blocks.resize(c.depth);
  for (int i = 0; i < c.depth; ++i) {
    VisionBlockWeights& b = w->blocks[i];
    OCULAR_RETURN_IF_ERROR(Visit(pre + "blocks." + std::to_string(i) + ".",
                                 {{"norm1.weight", Vec(&b.norm1_w), {D}},
                                  {"norm1.bias", Vec(&b.norm1_b), {D}},
                                  {"norm2.weight", Vec(&b.norm2_w), {D}},
                                  {"norm2.bias", Vec(&b.norm2_b), {D}},
                                  {"attn.qkv.weight", Mat(&b.qkv_w), {3 * D, D}},
                                  {"attn.qkv.bias", Vec(&b.qkv_b), {3 * D}},
                                  {"attn.proj.weight", Mat(&b.proj_w), {D, D}},
                                  {"attn.proj.bias", Vec(&b.proj_b), {D}},
                                  {"mlp.linear_fc1.weight", Mat(&b.fc1_w), {Iv, D}},
                                  {"mlp.linear_fc1.bias", Vec(&b.fc1_b), {Iv}},
                                  {"mlp.linear_fc2.weight", Mat(&b.fc2_w), {D, Iv}},
                                  {"mlp.linear_fc2.bias", Vec(&b.fc2_b), {D}}},
                                 fn));
  }
  OCULAR_RETURN_IF_ERROR(VisitMerger(pre + "merger.", D, Dm, H, &w->merger, fn));
  w->deepstack.resize(c.deepstack());
  for (int k = 0; k < c.deepstack(); ++k) {
    OCULAR_RETURN_IF_ERROR(VisitMerger(pre + "deepstack_merger_list." + std::to_string(k) + ".", Dm,
                                       Dm, H, &w->deepstack[k], fn));
  }
  return Status::Ok();
}

Status VisitLayer(const Text3Config& c, int i, Text3LayerWeights* l, const TensorVisitor& fn) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, d = c.head_dim;
  const int64_t q = int64_t{c.num_attention_heads} * d, kv = int64_t{c.num_key_value_heads} * d;
  const std::string pre = "model.language_model.layers." + std::to_string(i) + ".";
  OCULAR_RETURN_IF_ERROR(Visit(pre,
                               {{"input_layernorm.weight", Vec(&l->input_norm), {H}},
                                {"self_attn.q_proj.weight", Mat(&l->q_w), {q, H}},
                                {"self_attn.k_proj.weight", Mat(&l->k_w), {kv, H}},
                                {"self_attn.v_proj.weight", Mat(&l->v_w), {kv, H}},
                                {"self_attn.o_proj.weight", Mat(&l->o_w), {H, q}},
                                {"self_attn.q_norm.weight", Vec(&l->q_norm), {d}},
                                {"self_attn.k_norm.weight", Vec(&l->k_norm), {d}},
                                {"post_attention_layernorm.weight", Vec(&l->post_attn_norm), {H}},
                                {"mlp.gate_proj.weight", Mat(&l->gate_w), {I, H}},
                                {"mlp.up_proj.weight", Mat(&l->up_w), {I, H}},
                                {"mlp.down_proj.weight", Mat(&l->down_w), {H, I}}},
                               fn));
  if (!c.attention_bias) return Status::Ok();
  return Visit(pre,
               {{"self_attn.q_proj.bias", Vec(&l->q_b), {q}},
                {"self_attn.k_proj.bias", Vec(&l->k_b), {kv}},
                {"self_attn.v_proj.bias", Vec(&l->v_b), {kv}},
                {"self_attn.o_proj.bias", Vec(&l->o_b), {H}}},
               fn);
}

Status ForEachTensor(const Qwen3VLConfig& cfg, Weights3* w, const TensorVisitor& fn) {
  OCULAR_RETURN_IF_ERROR(VisitVision(cfg, &w->vision, fn));
  const Text3Config& c = cfg.text;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  OCULAR_RETURN_IF_ERROR(
      fn("model.language_model.embed_tokens.weight", {V, H}, Mat(&w->embed), true));
  w->layers.resize(c.num_hidden_layers);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    OCULAR_RETURN_IF_ERROR(VisitLayer(c, i, &w->layers[i], fn));
  }
  OCULAR_RETURN_IF_ERROR(fn("model.language_model.norm.weight", {H}, Vec(&w->final_norm), true));
  if (cfg.tie_word_embeddings) return Status::Ok();  // lm_head = embed_tokens
  return fn("lm_head.weight", {V, H}, Mat(&w->lm_head), true);
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

// Qwen3VLTextDecoderLayer: Qwen3VLTextRMSNorm (Llama's form) around Qwen3VLTextAttention
// (q_norm/k_norm RMSNorm over each head before the rotary, GQA, scale head_dim^-0.5,
// biases if attention_bias) and Qwen3VLTextMLP down(silu(gate(x)) * up(x)).
blocks::DecoderLayerSpec TextLayerSpec(const Text3Config& c, const blocks::RopeSpec& rope) {
  blocks::DecoderLayerSpec s;
  s.norm = blocks::NormKind::kLlamaRms;
  s.eps = c.rms_norm_eps;
  blocks::AttentionSpec& a = s.attn;
  a.hidden = c.hidden_size;
  a.heads = c.num_attention_heads;
  a.kv_heads = c.num_key_value_heads;
  a.head_dim = c.head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));  // self.scaling
  a.rope = rope;
  a.qk_norm = {blocks::NormKind::kLlamaRms, nullptr, nullptr, c.rms_norm_eps};
  s.mlp = {c.hidden_size, c.intermediate_size, blocks::MlpAct::kSilu, /*gated=*/true};
  return s;
}

blocks::DecoderLayerWeights LayerView(const Text3Config& c, const Text3LayerWeights& l) {
  blocks::DecoderLayerWeights w;
  const bool b = c.attention_bias;
  w.attn = {&l.q_w,
            &l.k_w,
            &l.v_w,
            &l.o_w,
            b ? &l.q_b : nullptr,
            b ? &l.k_b : nullptr,
            b ? &l.v_b : nullptr,
            b ? &l.o_b : nullptr,
            &l.q_norm,
            &l.k_norm};
  w.mlp = {&l.gate_w, nullptr, &l.up_w, &l.down_w, nullptr};
  w.attn_norm = &l.input_norm;
  w.ffn_norm = &l.post_attn_norm;
  return w;
}

}  // namespace

blocks::AxesRope InterleavedMrope(int64_t head_dim, float theta,
                                  const std::array<int, 3>& mrope_section) {
  blocks::AxesRope out;
  out.inv_freq = blocks::RopeInvFreq(head_dim, theta, {});
  out.axes = 3;
  out.axis_of.assign(static_cast<size_t>(head_dim / 2), 0);
  // freqs_t[..., offset:3*section:3] = freqs[dim, ..., offset:3*section:3], H then W.
  for (int axis = 1; axis <= 2; ++axis) {
    for (int64_t j = axis; j < std::min<int64_t>(3 * mrope_section[axis], head_dim / 2); j += 3) {
      out.axis_of[j] = static_cast<uint8_t>(axis);
    }
  }
  return out;
}

StatusOr<std::unique_ptr<Qwen3VL>> Qwen3VL::Load(const ModelFiles& files) {
  OCULAR_ASSIGN_OR_RETURN(Qwen3VLConfig cfg, LoadQwen3VLConfig(*files.files));
  std::unique_ptr<Qwen3VL> m(new Qwen3VL());
  OCULAR_ASSIGN_OR_RETURN(m->image_, LoadImageConfig(*files.files));
  if (files.gguf != nullptr) {  // written by `ocular quantize` (gguf_names.h)
    Weights3 scratch;
    m->source_ = GgufTensors(
        files.gguf, [&](const TensorVisitor& fn) { return ForEachTensor(cfg, &scratch, fn); });
  } else {
    OCULAR_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(files.path));
    m->source_ = std::make_unique<Checkpoint>(std::move(ckpt));
  }
  m->cfg_ = std::move(cfg);
  OCULAR_RETURN_IF_ERROR(m->BindWeights());
  const Text3Config& t = m->cfg_.text;
  m->text_rope_ = InterleavedMrope(t.head_dim, t.rope_theta, t.mrope_section);
  // Qwen3VLVisionRotaryEmbedding(head_dim // 2), theta 10000, as Qwen2-VL's.
  m->vision_rope_ = blocks::VisionRope2d(m->cfg_.vision.head_dim(), 10000.0f);
  m->BuildSpec();
  return m;
}

Status Qwen3VL::BindWeights() {
  BindRules rules;
  rules.candidates = [](const std::string& name) { return std::vector<std::string>{name}; };
  rules.is_text = [](const std::string& name) {
    return name.find("visual.") == std::string::npos &&
           name.find("embed_tokens.") == std::string::npos;
  };
  rules.tag = "qwen3_vl";
  rules.model = "Qwen3-VL (qwen3_vl)";
  OCULAR_ASSIGN_OR_RETURN(BoundWeights bound,
                          BindTensors(*source_, rules, [&](const TensorVisitor& fn) {
                            return ForEachTensor(cfg_, &w_, fn);
                          }));
  if (cfg_.tie_word_embeddings) w_.lm_head = w_.embed;
  const int64_t D = cfg_.vision.hidden_size;
  for (VisionBlockWeights& b : w_.vision.blocks) {
    // qkv(x).reshape(seq, 3, heads, -1): q, k, v are the thirds of the output rows.
    b.q_w = Rows(b.qkv_w, 0, D);
    b.k_w = Rows(b.qkv_w, D, D);
    b.v_w = Rows(b.qkv_w, 2 * D, D);
    b.q_b = Slice(b.qkv_b, 0, D);
    b.k_b = Slice(b.qkv_b, D, D);
    b.v_b = Slice(b.qkv_b, 2 * D, D);
  }
  spec_.weight_bytes = bound.weight_bytes;
  spec_.text_weight_bytes = bound.text_weight_bytes;
  spec_.weight_dtype = bound.weight_dtype;
  spec_.float_dtype = bound.float_dtype;
  spec_.quantized = bound.quantized;
  spec_.weight_formats = bound.weight_formats;
  return Status::Ok();
}

void Qwen3VL::BuildSpec() {
  const Text3Config& t = cfg_.text;
  const Vision3Config& v = cfg_.vision;
  spec_.family = cfg_.model_type;
  spec_.architecture = "Qwen3-VL (qwen3_vl)";
  spec_.hidden_size = t.hidden_size;
  spec_.vocab_size = t.vocab_size;
  spec_.max_positions = t.max_position_embeddings;
  spec_.kv.kv_dim = int64_t{t.num_key_value_heads} * t.head_dim;
  for (int i = 0; i < t.num_hidden_layers; ++i) {
    ocular::LayerSpec l;
    l.rope_theta = t.rope_theta;
    spec_.layers.push_back(l);
    spec_.kv.window.push_back(0);
    spec_.kv.cross.push_back(0);
  }
  spec_.feature_width = int64_t{t.hidden_size} * (1 + v.deepstack());
  const int64_t patches = image_.max_patches();
  spec_.image_size = static_cast<int>(std::sqrt(static_cast<double>(patches))) * v.patch_size;
  spec_.image_tokens = static_cast<int>(patches / v.merge_rows());
  spec_.image_token_id = cfg_.image_token_id;
  spec_.eos_ids = {t.eos_token_id};
  // Per image of `patches` rows: patch embed, blocks, the merger and DeepStack mergers.
  const double N = static_cast<double>(patches), D = v.hidden_size, Iv = v.intermediate_size;
  const double Dm = D * v.merge_rows(), K = v.patch_floats();
  const double block = 2 * N * (4 * D * D + 2 * D * Iv) + 2 * 2 * N * N * D;
  const double merger = 2 * (N / v.merge_rows()) * (Dm * Dm + Dm * t.hidden_size);
  spec_.image_gflop = (2 * N * K * D + v.depth * block + (1 + v.deepstack()) * merger) / 1e9;
}

size_t Qwen3VL::WorkspaceBytes(const WorkspaceShape& s) const {
  const Text3Config& t = cfg_.text;
  const size_t encode =
      s.images > 0 ? Encode3Bytes(cfg_, s.images * image_.max_patches(), s.threads) : 0;
  const size_t layer =
      blocks::DecoderLayerBytes(TextLayerSpec(t, text_rope_.spec()), s.rows, s.context, s.threads);
  const size_t logits =
      blocks::FloatBytes(ops::MatMulArenaFloats(s.threads, s.rows, t.hidden_size));
  return std::max({encode, layer, logits});
}

void Qwen3VL::EncodeImages(const Exec& ex, std::span<const VisionInput> images, const float* pixels,
                           float* features, Tracer* tracer) const {
  Encode3(ex, cfg_, w_.vision, vision_rope_.spec(), images, pixels, features, tracer);
}

Status Qwen3VL::Embed(const Exec& ex, std::span<const int32_t> ids, const float* features,
                      int64_t feature_rows, float* x, Tracer* tracer) const {
  const int64_t T = static_cast<int64_t>(ids.size()), H = cfg_.text.hidden_size;
  const int64_t V = w_.embed.rows, W = spec_.feature_floats();
  int64_t pads = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (ids[t] < 0 || ids[t] >= V) {
      return Error(StatusCode::kInvalidArgument, "qwen3_vl", "token id ", ids[t], " at position ",
                   t, " is outside the vocabulary [0, ", V, ")");
    }
    pads += ids[t] == cfg_.image_token_id;
  }
  // get_placeholder_mask checks the count only with image features: a decode step may embed
  // a sampled <|image_pad|> as any token (the processor refuses pads outside an image's tag).
  if (features != nullptr && pads != feature_rows) {
    // "Image features and image tokens do not match"
    return Error(StatusCode::kInvalidArgument, "qwen3_vl", "prompt has ", pads,
                 " image pads but the images produced ", feature_rows, " feature rows");
  }
  // inputs_embeds = embed_tokens(input_ids).masked_scatter(image_mask, image_embeds)
  ops::EmbedRows(ex, w_.embed, ids.data(), T, x, H);
  int64_t next = 0;
  for (int64_t t = 0; t < T && features != nullptr; ++t) {
    if (ids[t] == cfg_.image_token_id) std::copy_n(features + next++ * W, H, x + t * H);
  }
  Tap(tracer, "decoder.inputs_embeds", x, {T, H});
  return Status::Ok();
}

void Qwen3VL::AddDeepstack(const Exec& ex, const Batch& batch, int k, float* x) const {
  const int64_t H = cfg_.text.hidden_size, W = spec_.feature_floats();
  int64_t row = 0;
  for (const SeqChunk& sq : batch.seqs) {
    const int32_t* ids = sq.ids();
    if (ids != nullptr && sq.features != nullptr) {
      // hidden_states[visual_pos_masks, :] += deepstack_visual_embeds[k]
      int64_t next = 0;
      for (int64_t t = 0; t < sq.count; ++t) {
        if (ids[t] != cfg_.image_token_id) continue;
        OCULAR_CHECK(next < sq.feature_rows());
        float* xr = x + (row + t) * H;
        ops::Add(ex, xr, sq.features + next++ * W + H * (1 + k), xr, H);
      }
    }
    row += sq.count;
  }
}

void Qwen3VL::ForwardLayers(const Exec& ex, const Batch& batch, float* x, Tracer* tracer, int begin,
                            int end) const {
  const Text3Config& t = cfg_.text;
  const int64_t H = t.hidden_size;
  OCULAR_CHECK(0 <= begin && begin <= end && end <= t.num_hidden_layers);
  const blocks::DecoderLayerSpec spec = TextLayerSpec(t, text_rope_.spec());
  for (int i = begin; i < end; ++i) {
    blocks::DecoderLayer(ex, spec, LayerView(t, w_.layers[i]), i, batch, x,
                         blocks::Taps{tracer, "decoder.layers.", i});
    TapIndexed(tracer, "decoder.layers.", i, x, {batch.rows, H});
    // Qwen3VLTextModel.forward: layer_idx in range(len(deepstack_visual_embeds))
    if (i < cfg_.vision.deepstack()) AddDeepstack(ex, batch, i, x);
  }
  if (end < t.num_hidden_layers) return;
  blocks::ApplyNorm(ex, {blocks::NormKind::kLlamaRms, &w_.final_norm, nullptr, t.rms_norm_eps}, x,
                    batch.rows, H, x);
  Tap(tracer, "decoder.norm", x, {batch.rows, H});
}

void Qwen3VL::Logits(const Exec& ex, const float* hidden, int64_t rows, float* logits) const {
  const int64_t H = cfg_.text.hidden_size;
  ops::MatMul(ex, hidden, rows, H, H, w_.lm_head, nullptr, logits, w_.lm_head.rows);
}

Status Qwen3VL::ForEachWeight(const WeightVisitor& fn) const {
  Weights3 w = w_;  // views; the visitor only reads them
  return ForEachGgufWeight(
      [&](const TensorVisitor& visit) { return ForEachTensor(cfg_, &w, visit); }, fn, "qwen3_vl");
}

}  // namespace ocular::qwen2vl

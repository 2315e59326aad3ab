#include "models/mllama/mllama.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/arena.h"
#include "core/check.h"
#include "io/checkpoint.h"
#include "io/gguf_source.h"
#include "kernels/ops.h"
#include "models/blocks/scratch.h"
#include "models/mllama/decoder.h"
#include "models/mllama/gguf_names.h"
#include "models/mllama/processor.h"
#include "models/mllama/vision.h"

namespace ocular::mllama {

namespace {

Status VisitVisionLayer(const VisionConfig& c, const std::string& p, bool gated,
                        VisionLayerWeights* l, const TensorVisitor& fn) {
  const int64_t D = c.hidden_size, Iv = c.intermediate_size;
  OCULAR_RETURN_IF_ERROR(VisitItems(p,
                                    {
                                        {"self_attn.q_proj.weight", Mat(&l->q_w), {D, D}},
                                        {"self_attn.k_proj.weight", Mat(&l->k_w), {D, D}},
                                        {"self_attn.v_proj.weight", Mat(&l->v_w), {D, D}},
                                        {"self_attn.o_proj.weight", Mat(&l->o_w), {D, D}},
                                        {"mlp.fc1.weight", Mat(&l->fc1_w), {Iv, D}},
                                        {"mlp.fc1.bias", Vec(&l->fc1_b), {Iv}},
                                        {"mlp.fc2.weight", Mat(&l->fc2_w), {D, Iv}},
                                        {"mlp.fc2.bias", Vec(&l->fc2_b), {D}},
                                        {"input_layernorm.weight", Vec(&l->ln1_w), {D}},
                                        {"input_layernorm.bias", Vec(&l->ln1_b), {D}},
                                        {"post_attention_layernorm.weight", Vec(&l->ln2_w), {D}},
                                        {"post_attention_layernorm.bias", Vec(&l->ln2_b), {D}},
                                    },
                                    fn));
  if (!gated) return Status::Ok();
  return VisitItems(
      p, {{"gate_attn", Vec(&l->gate_attn), {1}}, {"gate_ffn", Vec(&l->gate_ffn), {1}}}, fn);
}

Status VisitVision(const VisionConfig& c, VisionWeights* w, const TensorVisitor& fn) {
  const int64_t D = c.hidden_size, p = c.patch_size, P = c.patches(), T = c.max_num_tiles;
  const int64_t ids = c.max_aspect_ratio_id() + 1;
  const std::string v = "vision_model.";
  OCULAR_RETURN_IF_ERROR(
      VisitItems(v,
                 {
                     {"patch_embedding.weight", Mat(&w->patch_w), {D, c.num_channels, p, p}},
                     {"class_embedding", Vec(&w->class_embedding), {D}},
                     {"gated_positional_embedding.embedding", Vec(&w->pos_embedding), {P, D}},
                     {"gated_positional_embedding.gate", Vec(&w->pos_gate), {1}},
                     {"gated_positional_embedding.tile_embedding.weight",
                      Vec(&w->tile_pos_embedding),
                      {ids, T * P * D}},
                     {"pre_tile_positional_embedding.embedding.weight",
                      Vec(&w->pre_tile_embedding),
                      {ids, T * D}},
                     {"pre_tile_positional_embedding.gate", Vec(&w->pre_tile_gate), {1}},
                     {"post_tile_positional_embedding.embedding.weight",
                      Vec(&w->post_tile_embedding),
                      {ids, T * D}},
                     {"post_tile_positional_embedding.gate", Vec(&w->post_tile_gate), {1}},
                     {"layernorm_pre.weight", Vec(&w->ln_pre_w), {D}},
                     {"layernorm_pre.bias", Vec(&w->ln_pre_b), {D}},
                     {"layernorm_post.weight", Vec(&w->ln_post_w), {D}},
                     {"layernorm_post.bias", Vec(&w->ln_post_b), {D}},
                 },
                 fn));
  w->layers.resize(c.num_hidden_layers);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    OCULAR_RETURN_IF_ERROR(VisitVisionLayer(c, v + "transformer.layers." + std::to_string(i) + ".",
                                            false, &w->layers[i], fn));
  }
  w->global_layers.resize(c.num_global_layers);
  for (int i = 0; i < c.num_global_layers; ++i) {
    OCULAR_RETURN_IF_ERROR(
        VisitVisionLayer(c, v + "global_transformer.layers." + std::to_string(i) + ".", true,
                         &w->global_layers[i], fn));
  }
  return Status::Ok();
}

Status VisitText(const TextConfig& c, Weights* w, const TensorVisitor& fn) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, d = c.head_dim();
  const int64_t q = int64_t{c.num_attention_heads} * d, kv = int64_t{c.num_key_value_heads} * d;
  const std::string m = "language_model.model.";
  OCULAR_RETURN_IF_ERROR(fn(m + "embed_tokens.weight", {V + 8, H}, Mat(&w->embed), true));
  w->layers.resize(c.num_hidden_layers);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    TextLayerWeights& l = w->layers[i];
    l.cross = c.IsCross(i);
    const std::string p = m + "layers." + std::to_string(i) + ".";
    const std::string a = l.cross ? "cross_attn." : "self_attn.";
    OCULAR_RETURN_IF_ERROR(
        VisitItems(p,
                   {
                       {"input_layernorm.weight", Vec(&l.input_norm), {H}},
                       {"post_attention_layernorm.weight", Vec(&l.post_attn_norm), {H}},
                       {"mlp.gate_proj.weight", Mat(&l.gate_w), {I, H}},
                       {"mlp.up_proj.weight", Mat(&l.up_w), {I, H}},
                       {"mlp.down_proj.weight", Mat(&l.down_w), {H, I}},
                   },
                   fn));
    OCULAR_RETURN_IF_ERROR(VisitItems(p + a,
                                      {
                                          {"q_proj.weight", Mat(&l.q_w), {q, H}},
                                          {"k_proj.weight", Mat(&l.k_w), {kv, H}},
                                          {"v_proj.weight", Mat(&l.v_w), {kv, H}},
                                          {"o_proj.weight", Mat(&l.o_w), {H, q}},
                                      },
                                      fn));
    if (l.cross) {
      OCULAR_RETURN_IF_ERROR(VisitItems(p,
                                        {
                                            {"cross_attn.q_norm.weight", Vec(&l.q_norm), {d}},
                                            {"cross_attn.k_norm.weight", Vec(&l.k_norm), {d}},
                                            {"cross_attn_attn_gate", Vec(&l.attn_gate), {1}},
                                            {"cross_attn_mlp_gate", Vec(&l.mlp_gate), {1}},
                                        },
                                        fn));
    }
  }
  OCULAR_RETURN_IF_ERROR(fn(m + "norm.weight", {H}, Vec(&w->final_norm), true));
  return fn("language_model.lm_head.weight", {V, H}, Mat(&w->lm_head), true);
}

// transformers >= 4.52 may save the new module names (_checkpoint_conversion_mapping).
constexpr NameAlias kAliases[] = {
    {"language_model.model.", "model.language_model."},
    {"language_model.lm_head.", "lm_head."},
    {"vision_model.", "model.vision_model."},
    {"multi_modal_projector.", "model.multi_modal_projector."},
};

}  // namespace

Status ForEachTensor(const MllamaConfig& cfg, Weights* w, const TensorVisitor& fn) {
  OCULAR_RETURN_IF_ERROR(VisitVision(cfg.vision, &w->vision, fn));
  const int64_t H = cfg.text.hidden_size, Dv = cfg.vision.vision_output_dim;
  OCULAR_RETURN_IF_ERROR(fn("multi_modal_projector.weight", {H, Dv}, Mat(&w->proj_w), true));
  OCULAR_RETURN_IF_ERROR(fn("multi_modal_projector.bias", {H}, Vec(&w->proj_b), true));
  return VisitText(cfg.text, w, fn);
}

StatusOr<std::unique_ptr<Mllama>> Mllama::Load(const ModelFiles& files) {
  OCULAR_ASSIGN_OR_RETURN(MllamaConfig cfg, LoadMllamaConfig(*files.files));
  // A GGUF file is one written by `ocular quantize` (llama.cpp has no mllama files).
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<TensorSource> source, OpenTensors(files, [&] {
                            return std::make_unique<GgufSource>(files.gguf, GgufNames(cfg));
                          }));
  return Assemble(std::unique_ptr<Mllama>(new Mllama()), std::move(cfg), std::move(source));
}

Status Mllama::BindWeights() {
  BindRules rules;
  rules.candidates = [](const std::string& name) { return AliasedNames(name, kAliases); };
  // What a decode step streams: the decoder and the output projection; not the embedding
  // (a row per token is looked up) nor the cross-attention K/V projections (run once per
  // image, at the prefill).
  rules.is_text = [](const std::string& name) {
    return name.find("vision_model.") == std::string::npos &&
           name.find("multi_modal_projector.") == std::string::npos &&
           name.find("embed_tokens.") == std::string::npos &&
           name.find("cross_attn.k_proj.") == std::string::npos &&
           name.find("cross_attn.v_proj.") == std::string::npos;
  };
  rules.tag = "mllama";
  rules.model = "Llama 3.2 Vision (mllama)";
  OCULAR_RETURN_IF_ERROR(BindAll(rules));
  inv_freq_ = RopeInvFreq(cfg_.text);
  return Status::Ok();
}

void Mllama::BuildSpec() {
  const TextConfig& t = cfg_.text;
  const VisionConfig& v = cfg_.vision;
  spec_.family = "mllama";
  spec_.architecture = "Llama 3.2 Vision (mllama)";
  spec_.hidden_size = t.hidden_size;
  spec_.vocab_size = t.vocab_size;
  spec_.max_positions = t.max_position_embeddings;
  spec_.kv.kv_dim = int64_t{t.num_key_value_heads} * t.head_dim();
  for (int i = 0; i < t.num_hidden_layers; ++i) {
    const bool cross = t.IsCross(i);
    LayerSpec l;
    l.kind = cross ? LayerKind::kCrossAttention : LayerKind::kSelfAttention;
    l.rope_theta = cross ? 0 : t.rope_theta;
    spec_.layers.push_back(l);
    spec_.kv.window.push_back(0);
    spec_.kv.cross.push_back(cross ? 1 : 0);
  }
  spec_.image_size = v.image_size;
  spec_.image_tokens = static_cast<int>(ImageFeatureRows(v));  // for the cross layers, not ids
  spec_.image_token_id = cfg_.image_token_index;
  if (t.eos_token_ids.empty()) {
    spec_.eos_ids = {t.eos_token_id};
  } else {
    spec_.eos_ids.assign(t.eos_token_ids.begin(), t.eos_token_ids.end());
  }
  // Per image: T tiles of Pp rows through local + global layers, then the projector.
  const double rows = static_cast<double>(v.max_num_tiles) * v.padded_patches(), D = v.hidden_size;
  const double I = v.intermediate_size, K = 3.0 * v.patch_size * v.patch_size;
  const double per_layer = 2 * rows * (4 * D * D + 2 * D * I) + 2 * 2 * rows * rows * D;
  spec_.image_gflop = (2 * rows * K * D + (v.num_hidden_layers + v.num_global_layers) * per_layer +
                       2.0 * v.max_num_tiles * v.patches() * v.vision_output_dim * t.hidden_size) /
                      1e9;
}

size_t Mllama::WorkspaceBytes(const WorkspaceShape& s) const {
  const size_t encode = s.images > 0 ? EncodeBytes(cfg_, s.images, s.threads) : 0;
  const int64_t images = std::max<int64_t>(s.images, MllamaProcessor::kMaxImages);
  const size_t forward = LayerBytes(cfg_, s.rows, s.context, images, s.threads);
  const size_t logits =
      blocks::FloatBytes(ops::MatMulArenaFloats(s.threads, s.rows, cfg_.text.hidden_size));
  return std::max({encode, forward, logits});
}

void Mllama::EncodeImages(const Exec& ex, std::span<const VisionInput> images, const float* pixels,
                          float* features, Tracer* tracer) const {
  mllama::EncodeImages(ex, cfg_, w_, images, pixels, features, tracer);
}

std::unique_ptr<SequenceState> Mllama::NewState() const { return std::make_unique<CrossState>(); }

Status Mllama::Embed(const Exec& ex, std::span<const int32_t> ids, const float* features,
                     int64_t feature_rows, float* x, Tracer*) const {
  const int64_t T = static_cast<int64_t>(ids.size()), H = cfg_.text.hidden_size;
  const int64_t rows = w_.embed.rows, per_image = ImageFeatureRows(cfg_.vision);
  int64_t images = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (ids[t] < 0 || ids[t] >= rows) {
      return Error(StatusCode::kDataLoss, "mllama", "token id ", ids[t], " at position ", t,
                   " is outside the embedding table [0, ", rows, ")");
    }
    images += ids[t] == cfg_.image_token_index;
  }
  if (features != nullptr && images * per_image != feature_rows) {
    return Error(StatusCode::kInvalidArgument, "mllama", "prompt has ", images,
                 " image tokens but the features hold ", feature_rows / per_image, " images");
  }
  if (features == nullptr && images > 0) {  // (a decode step's sampled id is never one)
    return Error(StatusCode::kInvalidArgument, "mllama", "prompt has ", images,
                 " image tokens but no images were given");
  }
  if (images > MllamaProcessor::kMaxImages) {
    return Error(StatusCode::kInvalidArgument, "mllama", images,
                 " images in one prompt; ocular's mllama takes at most ",
                 MllamaProcessor::kMaxImages);
  }
  ops::EmbedRows(ex, w_.embed, ids.data(), T, x, H);
  return Status::Ok();
}

void Mllama::ForwardLayers(const Exec& ex, const Batch& batch, float* x, Tracer* tracer, int begin,
                           int end) const {
  const TextConfig& t = cfg_.text;
  const int64_t H = t.hidden_size;
  OCULAR_CHECK(0 <= begin && begin <= end && end <= t.num_hidden_layers);
  bool images = false;  // HF skips the cross layers when no sequence has image K/V
  for (const SeqChunk& s : batch.seqs) {
    images = images || s.features != nullptr ||
             (s.state != nullptr && static_cast<const CrossState*>(s.state)->keys > 0);
  }
  const DecoderContext dc{&cfg_, &w_, inv_freq_.data(), &kv_computed_, tracer};
  for (int i = begin; i < end; ++i) {
    if (w_.layers[i].cross) {
      if (!images) continue;
      CrossAttentionLayer(ex, dc, i, batch, x);
    } else {
      SelfAttentionLayer(ex, dc, i, batch, x);
    }
    TapIndexed(tracer, "decoder.layers.", i, x, {batch.rows, H});
  }
  if (end < t.num_hidden_layers) return;
  blocks::ApplyNorm(ex, TextNorm(t, &w_.final_norm), x, batch.rows, H, x);
  Tap(tracer, "decoder.norm", x, {batch.rows, H});
}

void Mllama::Logits(const Exec& ex, const float* hidden, int64_t rows, float* logits) const {
  const int64_t H = cfg_.text.hidden_size;
  ops::MatMul(ex, hidden, rows, H, H, w_.lm_head, nullptr, logits, w_.lm_head.rows);
}

Status Mllama::ForEachWeight(const WeightVisitor& fn) const {
  return VisitUnderGgufNames([](const std::string& hf) { return GgufTensorName(hf); }, fn);
}

}  // namespace ocular::mllama

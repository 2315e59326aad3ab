#include "models/gemma3/gemma3.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/arena.h"
#include "core/check.h"
#include "core/half.h"
#include "io/checkpoint.h"
#include "io/gguf_source.h"
#include "kernels/ops.h"
#include "models/blocks/scratch.h"
#include "models/gemma3/gguf_names.h"
#include "models/layers.h"
#include "models/siglip.h"

namespace ocular::gemma3 {

namespace {

// The decoder's tensors under `m` ("model." for Gemma3ForCausalLM, "language_model.model."
// for the legacy names of Gemma3ForConditionalGeneration).
Status VisitText(const Gemma3TextConfig& tc, const std::string& m, Gemma3Weights* w,
                 const TensorVisitor& fn) {
  const GemmaTextConfig& c = tc.gemma;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, d = c.head_dim;
  const int64_t q = int64_t{c.num_attention_heads} * d, kv = int64_t{c.num_key_value_heads} * d;
  OCULAR_RETURN_IF_ERROR(fn(m + "embed_tokens.weight", {V, H}, Mat(&w->embed), true));
  w->layers.resize(c.num_hidden_layers);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = m + "layers." + std::to_string(i) + ".";
    Gemma3LayerWeights& L = w->layers[i];
    GemmaLayerWeights& l = L.gemma;
    OCULAR_RETURN_IF_ERROR(
        VisitItems(p,
                   {
                       {"input_layernorm.weight", Vec(&l.input_norm), {H}},
                       {"self_attn.q_proj.weight", Mat(&l.q_w), {q, H}},
                       {"self_attn.k_proj.weight", Mat(&l.k_w), {kv, H}},
                       {"self_attn.v_proj.weight", Mat(&l.v_w), {kv, H}},
                       {"self_attn.o_proj.weight", Mat(&l.o_w), {H, q}},
                       {"self_attn.q_norm.weight", Vec(&L.q_norm), {d}},
                       {"self_attn.k_norm.weight", Vec(&L.k_norm), {d}},
                       {"post_attention_layernorm.weight", Vec(&l.post_attn_norm), {H}},
                       {"pre_feedforward_layernorm.weight", Vec(&l.pre_ffw_norm), {H}},
                       {"post_feedforward_layernorm.weight", Vec(&l.post_ffw_norm), {H}},
                       {"mlp.gate_proj.weight", Mat(&l.gate_w), {I, H}},
                       {"mlp.up_proj.weight", Mat(&l.up_w), {I, H}},
                       {"mlp.down_proj.weight", Mat(&l.down_w), {H, I}},
                   },
                   fn));
  }
  return fn(m + "norm.weight", {H}, Vec(&w->final_norm), true);
}

// transformers >= 4.52 may save the new module names (_checkpoint_conversion_mapping).
constexpr NameAlias kAliases[] = {
    {"language_model.model.", "model.language_model."},
    {"vision_tower.", "model.vision_tower."},
    {"multi_modal_projector.", "model.multi_modal_projector."},
};

}  // namespace

// Module order; the checkpoint names of save_pretrained in 4.57: legacy
// "language_model.model.*" / "vision_tower.*" / "multi_modal_projector.*" for the VLM).
// A stored lm_head would be an untied output projection: not implemented (refused as unused).
Status ForEachTensor(const Gemma3Config& cfg, Gemma3Weights* w, const TensorVisitor& fn) {
  if (!cfg.has_vision) return VisitText(cfg.text, "model.", w, fn);
  OCULAR_RETURN_IF_ERROR(VisitSiglip(cfg.vision, &w->vision, fn));
  const int64_t D = cfg.vision.hidden_size, H = cfg.text.gemma.hidden_size;
  const std::string p = "multi_modal_projector.";
  OCULAR_RETURN_IF_ERROR(fn(p + "mm_input_projection_weight", {D, H}, Vec(&w->mm_proj), true));
  OCULAR_RETURN_IF_ERROR(fn(p + "mm_soft_emb_norm.weight", {D}, Vec(&w->mm_norm), true));
  return VisitText(cfg.text, "language_model.model.", w, fn);
}

StatusOr<std::unique_ptr<Gemma3>> Gemma3::Load(const ModelFiles& files) {
  OCULAR_ASSIGN_OR_RETURN(Gemma3Config cfg, LoadGemma3Config(*files.files));
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<TensorSource> source,
                          OpenTensors(files, [&] { return GgufTensors(files, cfg); }));
  return Load(std::move(cfg), std::move(source));
}

StatusOr<std::unique_ptr<Gemma3>> Gemma3::Load(Gemma3Config config,
                                               std::unique_ptr<TensorSource> source) {
  return Assemble(std::unique_ptr<Gemma3>(new Gemma3()), std::move(config), std::move(source));
}

Status Gemma3::BindWeights() {
  BindRules rules;
  rules.candidates = [](const std::string& name) { return AliasedNames(name, kAliases); };
  rules.is_text = [](const std::string& name) {
    return name.find("vision_tower.") != 0 && name.find("multi_modal_projector.") != 0;
  };
  rules.tag = "gemma3";
  rules.model = "Gemma 3 (" + cfg_.model_type + ")";
  OCULAR_RETURN_IF_ERROR(BindAll(rules));
  if (cfg_.has_vision) {
    // x @ W with W [D, H] stored: MatMul wants rows of W^T [H, D], in the stored dtype.
    const TensorView& p = w_.mm_proj;
    const int64_t D = p.shape[0], H = p.shape[1];
    const size_t es = DTypeSize(p.dtype);
    mm_proj_t_bytes_.resize(static_cast<size_t>(D * H) * es);
    const auto* from = static_cast<const std::byte*>(p.data);
    for (int64_t dd = 0; dd < D; ++dd) {
      for (int64_t h = 0; h < H; ++h) {
        std::memcpy(&mm_proj_t_bytes_[(h * D + dd) * es], from + (dd * H + h) * es, es);
      }
    }
    TensorView t{mm_proj_t_bytes_.data(), p.dtype, {H, D}};
    w_.mm_proj_t = MatrixFromView(t, H, D);
  }
  return Status::Ok();
}

Status Gemma3::ForEachWeight(const WeightVisitor& fn) const {
  return VisitUnderGgufNames([](const std::string& hf) { return GgufTensorName(hf); }, fn);
}

void Gemma3::BuildSpec() {
  const GemmaTextConfig& t = cfg_.text.gemma;
  spec_.family = cfg_.model_type;
  spec_.architecture =
      cfg_.has_vision ? "Gemma 3 (gemma3: SigLIP + gemma3_text)" : "Gemma 3 text (gemma3_text)";
  spec_.hidden_size = t.hidden_size;
  spec_.vocab_size = static_cast<int>(w_.embed.rows);
  spec_.max_positions = t.max_position_embeddings;
  spec_.kv.kv_dim = int64_t{t.num_key_value_heads} * t.head_dim;
  for (int i = 0; i < t.num_hidden_layers; ++i) {
    const bool sliding = t.layer_is_sliding[i];
    LayerSpec l;
    l.window = sliding ? t.sliding_window : 0;
    // Sliding layers: rope_local_base_freq, plain; global: rope_theta with rope_scaling
    // (Gemma3TextModel.__init__: rotary_emb_local gets rope_scaling {"rope_type": "default"}).
    l.rope_theta = sliding ? cfg_.text.rope_local_base_freq : t.rope_theta;
    spec_.layers.push_back(l);
    spec_.kv.window.push_back(l.window);
    attention_.push_back(LayerAttention{l.window, l.rope_theta,
                                        sliding ? 1.0f : cfg_.text.rope_scaling_factor,
                                        cfg_.has_vision ? cfg_.image_token_index : -1});
  }
  spec_.eos_ids.assign(cfg_.text.eos_token_ids.begin(), cfg_.text.eos_token_ids.end());
  if (!cfg_.has_vision) return;
  spec_.image_size = cfg_.vision.image_size;
  spec_.image_tokens = cfg_.mm_tokens_per_image;
  spec_.image_token_id = cfg_.image_token_index;
  const double N = cfg_.vision.num_patches(), D = cfg_.vision.hidden_size;
  const double I = cfg_.vision.intermediate_size;
  const double K = 3.0 * cfg_.vision.patch_size * cfg_.vision.patch_size;
  const double per_layer = 2 * N * (4 * D * D + 2 * D * I) + 2 * 2 * N * N * D;
  spec_.image_gflop = (2 * N * K * D + cfg_.vision.num_hidden_layers * per_layer +
                       2.0 * cfg_.mm_tokens_per_image * D * t.hidden_size) /
                      1e9;
}

size_t Gemma3::WorkspaceBytes(const WorkspaceShape& s) const {
  const int64_t H = cfg_.text.gemma.hidden_size;
  size_t encode = 0;
  if (cfg_.has_vision && s.images > 0) {
    const int64_t N = cfg_.vision.num_patches(), D = cfg_.vision.hidden_size;
    const int64_t M = cfg_.mm_tokens_per_image;
    const size_t projector = blocks::FloatBytes(s.images * M * D) +
                             blocks::FloatBytes(ops::MatMulArenaFloats(s.threads, s.images * M, D));
    encode = blocks::FloatBytes(s.images * N * D) +
             std::max(SiglipBytes(cfg_.vision, s.images, s.threads), projector);
  }
  const size_t forward = Gemma3LayersBytes(cfg_.text, attention_, s.rows, s.context, s.threads);
  const size_t logits = blocks::FloatBytes(ops::MatMulArenaFloats(s.threads, s.rows, H));
  return std::max({encode, forward, logits});
}

void Gemma3::EncodeImages(const Exec& ex, std::span<const VisionInput> images, const float* pixels,
                          float* z, Tracer* tracer) const {
  const int64_t n = static_cast<int64_t>(images.size());
  if (!cfg_.has_vision) return;  // gemma3_text: no image features (image_tokens = 0)
  const SiglipVisionConfig& v = cfg_.vision;
  const int64_t N = v.num_patches(), D = v.hidden_size, H = cfg_.text.gemma.hidden_size;
  const int64_t P = v.image_size / v.patch_size, S = cfg_.tokens_per_side(), k = cfg_.pool_kernel();
  const int64_t M = S * S;
  ArenaScope scope(ex.arena);
  float* feats = ex.arena.Floats(n * N * D);
  SiglipForward(ex, v, w_.vision, pixels, n, feats, tracer);
  // Gemma3MultiModalProjector.forward: [n, N, D] -> [n, D, P, P] -> AvgPool2d(k, stride k)
  // -> [n, M, D]. torch's CPU avg_pool2d sums the window row by row in the accumulation
  // type (f32) and divides the sum by k*k.
  float* pooled = ex.arena.Floats(n * M * D);
  const float divide = static_cast<float>(k * k);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t oy = 0; oy < S; ++oy) {
      for (int64_t ox = 0; ox < S; ++ox) {
        float* out = pooled + (i * M + oy * S + ox) * D;
        for (int64_t c = 0; c < D; ++c) {
          float sum = 0;
          for (int64_t ky = 0; ky < k; ++ky) {
            for (int64_t kx = 0; kx < k; ++kx) {
              sum += feats[(i * N + (oy * k + ky) * P + ox * k + kx) * D + c];
            }
          }
          out[c] = sum / divide;
        }
      }
    }
  }
  ops::CastToActivation(ex, pooled, n * M * D);
  // normed = mm_soft_emb_norm(pooled); projected = normed @ mm_input_projection_weight
  ops::RmsNorm(ex, pooled, n * M, D, w_.mm_norm, v.layer_norm_eps, /*add_one=*/true, pooled);
  ops::MatMul(ex, pooled, n * M, D, D, w_.mm_proj_t, nullptr, z, H);
  Tap(tracer, "projector", z, {n, M, H});
}

Status Gemma3::Embed(const Exec& ex, std::span<const int32_t> ids, const float* features,
                     int64_t feature_rows, float* x, Tracer* tracer) const {
  const int64_t T = static_cast<int64_t>(ids.size()), H = cfg_.text.gemma.hidden_size;
  const int64_t V = w_.embed.rows;
  const int32_t image_id = cfg_.has_vision ? cfg_.image_token_index : -1;
  int64_t n_image = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (ids[t] == image_id && features != nullptr) {
      ++n_image;
    } else if (ids[t] < 0 || ids[t] >= V) {
      return Error(StatusCode::kDataLoss, "gemma3", "token id ", ids[t], " at position ", t,
                   " is outside the vocabulary [0, ", V, ")");
    }
  }
  if (features != nullptr && n_image != feature_rows) {
    return Error(StatusCode::kInvalidArgument, "gemma3", "prompt has ", n_image,
                 " image tokens but the images produced ", feature_rows, " feature rows");
  }
  // embed_tokens(ids) * embed_scale.to(weight.dtype), embed_scale = tensor(H ** 0.5) (f32)
  // (Gemma3TextScaledWordEmbedding.forward, modeling_gemma3.py:106-107).
  float scale = static_cast<float>(std::sqrt(static_cast<double>(H)));
  if (w_.embed.format == WFormat::kBF16) scale = BF16ToF32(F32ToBF16(scale));
  for (int64_t t = 0; t < T; ++t) {
    // An image token out of the vocabulary is looked up as 0 (Gemma3Model.forward): its row
    // is replaced below anyway.
    const int32_t id = ids[t] == image_id && features != nullptr ? 0 : ids[t];
    ops::EmbedRows(ex, w_.embed, &id, 1, x + t * H, H);
  }
  ops::Scale(ex, x, T * H, scale);
  // inputs_embeds.masked_scatter(special_image_mask, image_features): after the scaling.
  int64_t next = 0;
  for (int64_t t = 0; t < T && features != nullptr; ++t) {
    if (ids[t] == image_id) std::copy_n(features + next++ * H, H, x + t * H);
  }
  Tap(tracer, "decoder.embed_scaled", x, {T, H});
  return Status::Ok();
}

void Gemma3::ForwardLayers(const Exec& ex, const Batch& batch, float* x, Tracer* tracer, int begin,
                           int end) const {
  const GemmaTextConfig& c = cfg_.text.gemma;
  const int64_t H = c.hidden_size;
  OCULAR_CHECK(0 <= begin && begin <= end && end <= c.num_hidden_layers);
  for (int i = begin; i < end; ++i) {
    Gemma3Layer(ex, cfg_.text, w_.layers[i], attention_[i], i, batch, x, tracer);
    TapIndexed(tracer, "decoder.layers.", i, x, {batch.rows, H});
  }
  if (end < c.num_hidden_layers) return;
  ops::RmsNorm(ex, x, batch.rows, H, w_.final_norm, c.rms_norm_eps, /*add_one=*/true, x);
  Tap(tracer, "decoder.norm", x, {batch.rows, H});
}

void Gemma3::Logits(const Exec& ex, const float* hidden, int64_t rows, float* logits) const {
  const int64_t H = cfg_.text.gemma.hidden_size, V = w_.embed.rows, n = rows * V;
  ops::MatMul(ex, hidden, rows, H, H, w_.embed, nullptr, logits, V);
  const float cap = cfg_.text.gemma.final_logit_softcapping;
  if (cfg_.has_vision || cap <= 0) return;
  // logits = tanh(logits / cap) * cap, three ops (Gemma3ForCausalLM.forward); under bf16
  // each result is a bf16 tensor.
  if (!ex.round_bf16()) {
    ops::SoftCap(ex, logits, n, cap);
    return;
  }
  ops::Divide(ex, logits, n, cap);
  for (int64_t i = 0; i < n; ++i) logits[i] = std::tanh(logits[i]);
  ops::CastToActivation(ex, logits, n);
  ops::Scale(ex, logits, n, cap);
}

}  // namespace ocular::gemma3

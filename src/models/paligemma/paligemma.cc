#include "models/paligemma/paligemma.h"

#include <algorithm>
#include <cmath>

#include "core/arena.h"
#include "core/check.h"
#include "core/half.h"
#include "io/checkpoint.h"
#include "io/gguf_source.h"
#include "kernels/ops.h"
#include "models/blocks/scratch.h"
#include "models/layers.h"
#include "models/paligemma/gguf_names.h"
#include "models/siglip.h"

namespace ocular::paligemma {

namespace {

// Hub checkpoints use the legacy module names; transformers >= 4.52 may save the new ones
// (PaliGemmaForConditionalGeneration._checkpoint_conversion_mapping).
constexpr NameAlias kAliases[] = {
    {"language_model.model.", "model.language_model."},
    {"language_model.lm_head.", "lm_head."},
    {"vision_tower.", "model.vision_tower."},
    {"multi_modal_projector.", "model.multi_modal_projector."},
};

}  // namespace

StatusOr<std::unique_ptr<PaliGemma>> PaliGemma::Load(const std::string& path) {
  OCULAR_ASSIGN_OR_RETURN(ModelFiles files, ModelFiles::Open(path));
  return Load(files);
}

StatusOr<std::unique_ptr<PaliGemma>> PaliGemma::Load(const ModelFiles& files) {
  OCULAR_ASSIGN_OR_RETURN(PaliGemmaConfig cfg, LoadPaliGemmaConfig(*files.files));
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<TensorSource> source, OpenTensors(files, [&] {
                            return std::make_unique<GgufSource>(files.gguf, GgufNames(cfg));
                          }));
  return Load(std::move(cfg), std::move(source));
}

StatusOr<std::unique_ptr<PaliGemma>> PaliGemma::Load(PaliGemmaConfig config,
                                                     std::unique_ptr<TensorSource> source) {
  return Assemble(std::unique_ptr<PaliGemma>(new PaliGemma()), std::move(config),
                  std::move(source));
}

Status PaliGemma::BindWeights() {
  BindRules rules;
  rules.candidates = [](const std::string& name) { return AliasedNames(name, kAliases); };
  // What a decode step streams: the decoder and the output projection.
  rules.is_text = [](const std::string& name) {
    return name.compare(0, 15, "language_model.") == 0;
  };
  rules.tag = "paligemma";
  rules.model = "PaliGemma (" + cfg_.text.model_type + ")";
  OCULAR_RETURN_IF_ERROR(BindAll(rules));
  if (w_.text.lm_head.empty()) {
    tied_output_ = true;
    w_.text.lm_head = w_.text.embed;  // tied: the embedding is the output projection
  } else {
    spec_.text_weight_bytes -= w_.text.embed.bytes();  // only looked up, a row per token
  }
  return Status::Ok();
}

Status PaliGemma::ForEachWeight(const WeightVisitor& fn) const {
  const bool gemma2 = cfg_.text.is_gemma2();
  return VisitUnderGgufNames([gemma2](const std::string& hf) { return GgufTensorName(hf, gemma2); },
                             fn, tied_output_);
}

void PaliGemma::BuildSpec() {
  const GemmaTextConfig& t = cfg_.text;
  spec_.family = "paligemma";
  spec_.architecture = t.is_gemma2() ? "PaliGemma 2 (gemma2)" : "PaliGemma 1 (gemma)";
  spec_.hidden_size = t.hidden_size;
  spec_.vocab_size = static_cast<int>(w_.text.lm_head.rows);
  spec_.max_positions = t.max_position_embeddings;
  spec_.kv.kv_dim = int64_t{t.num_key_value_heads} * t.head_dim;
  for (int i = 0; i < t.num_hidden_layers; ++i) {
    LayerSpec l;
    l.window = t.is_gemma2() && t.layer_is_sliding[i] ? t.sliding_window : 0;
    l.rope_theta = t.rope_theta;
    spec_.layers.push_back(l);
    spec_.kv.window.push_back(l.window);
  }
  spec_.image_size = cfg_.vision.image_size;
  spec_.image_tokens = cfg_.image_tokens();
  spec_.image_token_id = cfg_.image_token_index;
  {  // SigLIP: per layer 4 D×D projections + 2 D×I MLP matmuls, QKᵀ and PV; + projector.
    const double N = cfg_.image_tokens(), D = cfg_.vision.hidden_size;
    const double I = cfg_.vision.intermediate_size;
    const double K = 3.0 * cfg_.vision.patch_size * cfg_.vision.patch_size;
    const double per_layer = 2 * N * (4 * D * D + 2 * D * I) + 2 * 2 * N * N * D;
    spec_.image_gflop =
        (2 * N * K * D + cfg_.vision.num_hidden_layers * per_layer + 2 * N * D * t.hidden_size) /
        1e9;
  }
  spec_.eos_ids = {cfg_.eos_token_id};
}

size_t PaliGemma::WorkspaceBytes(const WorkspaceShape& s) const {
  const int64_t N = cfg_.vision.num_patches(), D = cfg_.vision.hidden_size;
  const int64_t H = cfg_.text.hidden_size;
  const size_t projector = blocks::FloatBytes(ops::MatMulArenaFloats(s.threads, s.images * N, D));
  const size_t encode = s.images > 0
                            ? blocks::FloatBytes(s.images * N * D) +
                                  std::max(SiglipBytes(cfg_.vision, s.images, s.threads), projector)
                            : 0;
  const size_t forward = GemmaLayersBytes(cfg_.text, spec_.layers, s.rows, s.context, s.threads);
  const size_t logits = blocks::FloatBytes(ops::MatMulArenaFloats(s.threads, s.rows, H));
  return std::max({encode, forward, logits});
}

void PaliGemma::EncodeImages(const Exec& ex, std::span<const VisionInput> images,
                             const float* pixels, float* z, Tracer* tracer) const {
  const int64_t n = static_cast<int64_t>(images.size());
  const int64_t N = cfg_.vision.num_patches(), D = cfg_.vision.hidden_size;
  const int64_t H = cfg_.text.hidden_size;
  ArenaScope scope(ex.arena);
  float* feats = ex.arena.Floats(n * N * D);
  SiglipForward(ex, cfg_.vision, w_.vision, pixels, n, feats, tracer);
  ops::MatMul(ex, feats, n * N, D, D, w_.proj_w, &w_.proj_b, z, H);
  Tap(tracer, "projector", z, {n, N, H});
  // image_features / (hidden_size ** 0.5)  (PaliGemmaModel.get_image_features)
  ops::Divide(ex, z, n * N * H, static_cast<float>(std::sqrt(static_cast<double>(H))));
}

Status PaliGemma::Embed(const Exec& ex, std::span<const int32_t> ids, const float* features,
                        int64_t feature_rows, float* x, Tracer* tracer) const {
  const int64_t T = static_cast<int64_t>(ids.size()), H = cfg_.text.hidden_size;
  const int64_t V = w_.text.embed.rows;
  const int32_t image_id = cfg_.image_token_index;
  int64_t n_image_tokens = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = ids[t];
    if (id == image_id && features) {
      ++n_image_tokens;
    } else if (id < 0 || id >= V) {
      return Error(StatusCode::kDataLoss, "paligemma", "token id ", id, " at position ", t,
                   " is outside the vocabulary [0, ", V, ")");
    }
  }
  if (features && n_image_tokens != feature_rows) {
    return Error(StatusCode::kInvalidArgument, "paligemma", "prompt has ", n_image_tokens,
                 " image tokens but the images produced ", feature_rows, " feature rows");
  }
  int64_t next_feat = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (ids[t] == image_id && features) {
      std::copy_n(features + next_feat++ * H, H, x + t * H);
    } else {
      ops::EmbedRows(ex, w_.text.embed, &ids[t], 1, x + t * H, H);
    }
  }
  Tap(tracer, "decoder.inputs_embeds", x, {T, H});
  // hidden_states * normalizer, normalizer = tensor(hidden_size**0.5, dtype=hidden dtype)
  // (modeling_gemma.py GemmaModel.forward).
  float normalizer = static_cast<float>(std::sqrt(static_cast<double>(H)));
  if (ex.round_bf16()) normalizer = BF16ToF32(F32ToBF16(normalizer));
  ops::Scale(ex, x, T * H, normalizer);
  Tap(tracer, "decoder.embed_scaled", x, {T, H});
  return Status::Ok();
}

void PaliGemma::ForwardLayers(const Exec& ex, const Batch& batch, float* x, Tracer* tracer,
                              int begin, int end) const {
  const GemmaTextConfig& c = cfg_.text;
  const int64_t H = c.hidden_size;
  OCULAR_CHECK(0 <= begin && begin <= end && end <= c.num_hidden_layers);
  for (int i = begin; i < end; ++i) {
    GemmaLayer(ex, c, w_.text.layers[i], spec_.layers[i], i, batch, x, tracer);  // 1 or 2
    TapIndexed(tracer, "decoder.layers.", i, x, {batch.rows, H});
  }
  if (end < c.num_hidden_layers) return;
  ops::RmsNorm(ex, x, batch.rows, H, w_.text.final_norm, c.rms_norm_eps, /*add_one=*/true, x);
  Tap(tracer, "decoder.norm", x, {batch.rows, H});
}

void PaliGemma::Logits(const Exec& ex, const float* hidden, int64_t rows, float* logits) const {
  const int64_t H = cfg_.text.hidden_size, V = w_.text.lm_head.rows;
  ops::MatMul(ex, hidden, rows, H, H, w_.text.lm_head, nullptr, logits, V);
  // No final softcap: PaliGemmaForConditionalGeneration.forward computes lm_head(hidden) and
  // never applies text_config.final_logit_softcapping (transformers 4.57), and big_vision's
  // PaliGemma 2 transfers use none either. Greedy output is unaffected either way (tanh is
  // monotonic); opt in with apply_final_softcap for Gemma 2 semantics.
  if (apply_final_softcap_ && cfg_.text.final_logit_softcapping > 0) {
    ops::SoftCap(ex, logits, rows * V, cfg_.text.final_logit_softcapping);
  }
}

}  // namespace ocular::paligemma

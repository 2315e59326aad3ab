#include "models/paligemma.h"

#include <cmath>

#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "models/siglip.h"

namespace ocular {

namespace {

// Hub checkpoints use the legacy module names; transformers >= 4.52 may save the new ones
// (PaliGemmaForConditionalGeneration._checkpoint_conversion_mapping).
std::vector<std::string> NameCandidates(const std::string& name) {
  std::vector<std::string> out = {name};
  struct Alias {
    const char* legacy;
    const char* current;
  };
  static constexpr Alias kAliases[] = {
      {"language_model.model.", "model.language_model."},
      {"language_model.lm_head.", "lm_head."},
      {"vision_tower.", "model.vision_tower."},
      {"multi_modal_projector.", "model.multi_modal_projector."},
  };
  for (const Alias& a : kAliases) {
    const std::string legacy = a.legacy;
    if (name.compare(0, legacy.size(), legacy) == 0) out.push_back(a.current + name.substr(legacy.size()));
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<PaliGemma>> PaliGemma::Load(const std::string& dir) {
  auto m = std::make_unique<PaliGemma>();
  OCULAR_ASSIGN_OR_RETURN(m->cfg_, LoadPaliGemmaConfig(dir));
  OCULAR_ASSIGN_OR_RETURN(m->ckpt_, Checkpoint::Open(dir));
  bool first = true;
  Status s = ForEachTensor(m->cfg_, &m->w_,
                           [&](const std::string& name, TensorView* view, const Shape& shape,
                               bool required) -> Status {
    for (const std::string& cand : NameCandidates(name)) {
      if (!m->ckpt_.Has(cand)) continue;
      OCULAR_ASSIGN_OR_RETURN(*view, m->ckpt_.Get(cand, shape));
      if (first) m->dtype_ = view->dtype;
      first = false;
      return Status::Ok();
    }
    if (!required) return Status::Ok();
    return Error(StatusCode::kNotFound, "checkpoint", dir, ": missing tensor '", name, "'");
  });
  OCULAR_RETURN_IF_ERROR(s);
  m->nx_.bf16 = m->dtype_ == DType::kBF16;
  if (m->w_.text.lm_head.data == nullptr) m->w_.text.lm_head = m->w_.text.embed;  // tied
  return m;
}

Tensor PaliGemma::EncodeImages(ThreadPool& pool, const Tensor& pixel_values, Tracer* tracer) const {
  Tensor feats = SiglipForward(pool, cfg_.vision, w_.vision, nx_, pixel_values, tracer);
  const int64_t n = feats.dim(0), N = feats.dim(1), D = feats.dim(2), H = cfg_.text.hidden_size;
  Tensor z({n, N, H});
  ops::MatMulBias(pool, feats.data.data(), n * N, D, D, w_.proj_w, &w_.proj_b, z.data.data(), H);
  nx_.Round(z.data.data(), z.numel());
  TapIf(tracer, "projector", z.data.data(), z.shape);
  // image_features / (hidden_size ** 0.5)  (PaliGemmaModel.get_image_features)
  const float sqrt_h = static_cast<float>(std::sqrt(static_cast<double>(H)));
  for (float& v : z.data) v /= sqrt_h;
  nx_.Round(z.data.data(), z.numel());
  return z;
}

StatusOr<Tensor> PaliGemma::Embed(const std::vector<int32_t>& ids, const Tensor* image_features,
                                  Tracer* tracer) const {
  const int64_t T = static_cast<int64_t>(ids.size()), H = cfg_.text.hidden_size;
  const int64_t V = w_.text.embed.dim(0);
  const int64_t n_feat = image_features ? image_features->numel() / H : 0;
  Tensor x({T, H});
  int64_t next_feat = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = ids[t];
    if (id == cfg_.image_token_index && image_features) {
      if (next_feat >= n_feat) break;  // reported below
      std::copy_n(image_features->data.data() + next_feat * H, H, x.row(t));
      ++next_feat;
      continue;
    }
    if (id < 0 || id >= V) {
      return Error(StatusCode::kInvalidArgument, "paligemma", "token id ", id, " at position ", t,
                   " is outside the vocabulary [0, ", V, ")");
    }
    ops::ToF32(w_.text.embed, id * H, H, x.row(t));
  }
  int64_t n_image_tokens = 0;
  for (int32_t id : ids) n_image_tokens += id == cfg_.image_token_index;
  if (image_features && n_image_tokens != n_feat) {
    return Error(StatusCode::kInvalidArgument, "paligemma", "prompt has ", n_image_tokens,
                 " image tokens but the images produced ", n_feat, " feature rows");
  }
  TapIf(tracer, "decoder.inputs_embeds", x.data.data(), x.shape);
  // hidden_states * normalizer, normalizer = tensor(hidden_size**0.5, dtype=hidden dtype)
  // (modeling_gemma.py GemmaModel.forward).
  float normalizer = static_cast<float>(std::sqrt(static_cast<double>(H)));
  if (dtype_ == DType::kBF16) normalizer = BF16ToF32(F32ToBF16(normalizer));
  ops::Scale(x.data.data(), x.numel(), normalizer);
  nx_.Round(x.data.data(), x.numel());
  TapIf(tracer, "decoder.embed_scaled", x.data.data(), x.shape);
  return x;
}

Tensor PaliGemma::Decode(ThreadPool& pool, Tensor x, const Span& span, KvCache& cache,
                         Tracer* tracer) const {
  const GemmaTextConfig& c = cfg_.text;
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    if (c.is_gemma2()) {
      Gemma2Layer(pool, c, w_.text.layers[i], nx_, x.data.data(), span, cache, i);
    } else {
      GemmaLayer(pool, c, w_.text.layers[i], nx_, x.data.data(), span, cache, i);
    }
    TapIf(tracer, "decoder.layers." + std::to_string(i), x.data.data(), x.shape);
  }
  Tensor out(x.shape);
  ops::RmsNorm(x.data.data(), span.count, c.hidden_size, w_.text.final_norm, c.rms_norm_eps,
               /*add_one=*/true, out.data.data());
  nx_.Round(out.data.data(), out.numel());
  TapIf(tracer, "decoder.norm", out.data.data(), out.shape);
  return out;
}

Tensor PaliGemma::Logits(ThreadPool& pool, const float* hidden, int64_t rows) const {
  const int64_t H = cfg_.text.hidden_size, V = w_.text.lm_head.dim(0);
  Tensor logits({rows, V});
  ops::MatMul(pool, hidden, rows, H, H, w_.text.lm_head, nullptr, logits.data.data(), V);
  nx_.Round(logits.data.data(), logits.numel());
  // No final softcap: PaliGemmaForConditionalGeneration.forward computes lm_head(hidden) and
  // never applies text_config.final_logit_softcapping (transformers 4.57), and big_vision's
  // PaliGemma 2 transfers use none either (MODELS.md §7.5). Greedy output is unaffected
  // either way (tanh is monotonic); opt in with apply_final_softcap for Gemma 2 semantics.
  if (apply_final_softcap_ && cfg_.text.final_logit_softcapping > 0) {
    ops::SoftCap(logits.data.data(), logits.numel(), cfg_.text.final_logit_softcapping);
  }
  return logits;
}

size_t PaliGemma::text_weight_bytes() const {
  const GemmaWeights& t = w_.text;
  size_t n = t.lm_head.nbytes() + t.final_norm.nbytes();
  for (const GemmaLayerWeights& l : t.layers) {
    for (const TensorView* v : {&l.input_norm, &l.q_w, &l.k_w, &l.v_w, &l.o_w, &l.post_attn_norm,
                                &l.pre_ffw_norm, &l.post_ffw_norm, &l.gate_w, &l.up_w, &l.down_w}) {
      if (v->data) n += v->nbytes();
    }
  }
  return n;
}

KvCache PaliGemma::NewCache(int64_t capacity) const {
  KvCache cache;
  cache.Init(cfg_.text.num_hidden_layers, capacity,
             int64_t{cfg_.text.num_key_value_heads} * cfg_.text.head_dim);
  return cache;
}

}  // namespace ocular

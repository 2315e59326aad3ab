// The model class both Qwen-VL families share: the decoder of text.h behind the VlModel seam
// (embedding with image pads, layers, final norm, logits, GGUF names, workspace), with the ViT
// and whatever a family adds after a decoder layer (Qwen3-VL's DeepStack) left to the family.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "models/family.h"
#include "models/qwen2vl/gguf_names.h"
#include "models/qwen2vl/processor.h"
#include "models/qwen2vl/text.h"

namespace ocular::qwen2vl {

template <typename Config, typename Weights>
class QwenVlModel : public FamilyModel<Config, Weights> {
 public:
  size_t WorkspaceBytes(const WorkspaceShape& s) const final {
    const size_t encode =
        s.images > 0 ? EncodeBytes(s.images * image_.max_patches(), s.threads) : 0;
    return std::max(encode, TextBytes(text_, text_rope_.spec(), s));
  }
  // x = embed_tokens(ids), each <|image_pad|> row replaced by the next feature row's first H
  // floats (text.h EmbedText). Tap: decoder.inputs_embeds.
  Status Embed(const Exec& ex, std::span<const int32_t> ids, const float* features,
               int64_t feature_rows, float* x, Tracer* tracer) const final {
    return EmbedText(ex, text_, this->w_.embed, ids, features, feature_rows,
                     this->spec_.feature_floats(), tag_, x, tracer);
  }
  // Taps: decoder.layers.{i} (and their sub-taps; before AfterLayer's additions), decoder.norm.
  void ForwardLayers(const Exec& ex, const Batch& batch, float* x, Tracer* tracer, int begin,
                     int end) const final {
    ForwardText(ex, text_, text_rope_.spec(), this->w_, batch, x, tracer, begin, end,
                [&](int i) { AfterLayer(ex, batch, i, x); });
  }
  void Logits(const Exec& ex, const float* hidden, int64_t rows, float* logits) const final {
    TextLogits(ex, text_, this->w_, hidden, rows, logits);
  }
  // Every tensor under its GGUF name (gguf_names.h), for `ocular quantize`.
  Status ForEachWeight(const VlModel::WeightVisitor& fn) const final {
    Weights w = this->w_;  // views; the visitor only reads them
    return ForEachGgufWeight(
        [&](const TensorVisitor& visit) { return ForEachTensor(this->cfg_, &w, visit); }, fn,
        tag_.c_str());
  }

 protected:
  // The ViT's sizes BuildQwenSpec reads.
  struct TowerShape {
    int patch_size, merge_rows, depth;
    double width, mlp, patch_floats;  // D, Iv, K
    int mergers;                      // the merger and Qwen3-VL's DeepStack mergers
  };

  // BindWeights' shared part: every tensor bound (QwenBindRules), lm_head tied when the
  // config says so, the ViT blocks' q/k/v views (`vision_width` rows each), tag_, text_ and the
  // ViT's rotary (VisionRotaryEmbedding(head_dim // 2), theta 10000, in both families).
  Status BindQwen(const char* tag, const std::string& architecture, bool legacy_names,
                  int64_t vision_width, int64_t vision_head_dim) {
    OCULAR_RETURN_IF_ERROR(this->BindAll(QwenBindRules(tag, architecture, legacy_names)));
    Weights& w = this->w_;
    if (this->cfg_.tie_word_embeddings) w.lm_head = w.embed;
    SplitQkv(vision_width, &w.vision.blocks);
    tag_ = tag;
    text_ = TextOf(this->cfg_);
    vision_rope_ = blocks::VisionRope2d(vision_head_dim, 10000.0f);
    return Status::Ok();
  }

  // BuildSpec's shared part: names, the decoder (SetTextSpec), a typical image for planning
  // and ModelInfo (the largest smart_resize makes, as a square) and its GFLOP: patch embed,
  // blocks (qkv, proj, MLP, attention), mergers.
  void BuildQwenSpec(const std::string& architecture, const TowerShape& v) {
    ModelSpec& spec = this->spec_;
    spec.family = this->cfg_.model_type;
    spec.architecture = architecture;
    SetTextSpec(text_, &spec);
    const int64_t patches = image_.max_patches();
    spec.image_size = static_cast<int>(std::sqrt(static_cast<double>(patches))) * v.patch_size;
    spec.image_tokens = static_cast<int>(patches / v.merge_rows);
    const double N = static_cast<double>(patches), D = v.width, Iv = v.mlp, K = v.patch_floats;
    const double Dm = D * v.merge_rows;
    const double block = 2 * N * (4 * D * D + 2 * D * Iv) + 2 * 2 * N * N * D;
    const double merger = 2 * (N / v.merge_rows) * (Dm * Dm + Dm * text_.hidden_size);
    spec.image_gflop = (2 * N * K * D + v.depth * block + v.mergers * merger) / 1e9;
  }

  // Arena bytes of the family's EncodeImages over `rows` patch rows.
  virtual size_t EncodeBytes(int64_t rows, int threads) const = 0;
  // What the family adds to x after decoder layer i (and its tap).
  virtual void AfterLayer(const Exec& /*ex*/, const Batch& /*batch*/, int /*i*/,
                          float* /*x*/) const {}

  std::string tag_;  // of errors: "qwen2_vl", "qwen3_vl"
  ImageConfig image_;
  QwenText text_;
  blocks::AxesRope text_rope_, vision_rope_;
};

}  // namespace ocular::qwen2vl

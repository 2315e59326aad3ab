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
#include "models/qwen2vl/llamacpp_gguf.h"
#include "models/qwen2vl/vision3.h"
#include "models/weights.h"

namespace ocular::qwen2vl {

namespace {

// Qwen3VLVisionPatchMerger's tensors; norm over D, or Dm after the shuffle.
Status VisitMerger(const std::string& pre, int64_t norm_dim, int64_t Dm, int64_t H,
                   Merger3Weights* m, const TensorVisitor& fn) {
  return VisitItems(pre,
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
      VisitItems(pre,
                 {{"patch_embed.proj.weight",
                   Mat(&w->patch_w),
                   {D, c.in_channels, c.temporal_patch_size, p, p}},
                  {"patch_embed.proj.bias", Vec(&w->patch_b), {D}},
                  {"pos_embed.weight", Mat(&w->pos_embed), {c.num_position_embeddings, D}}},
                 fn));
  w->blocks.resize(c.depth);
  for (int i = 0; i < c.depth; ++i) {
    VisionBlockWeights& b = w->blocks[i];
    OCULAR_RETURN_IF_ERROR(VisitItems(pre + "blocks." + std::to_string(i) + ".",
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

}  // namespace

Status ForEachTensor(const Qwen3VLConfig& cfg, Weights3* w, const TensorVisitor& fn) {
  OCULAR_RETURN_IF_ERROR(VisitVision(cfg, &w->vision, fn));
  return VisitText(TextOf(cfg), w, fn);
}

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

StatusOr<std::unique_ptr<Qwen3VL>> Qwen3VL::Load(const ModelFiles& files,
                                                 const ImageResize& resize) {
  OCULAR_ASSIGN_OR_RETURN(Qwen3VLConfig cfg, LoadQwen3VLConfig(*files.files));
  std::unique_ptr<Qwen3VL> m(new Qwen3VL());
  OCULAR_ASSIGN_OR_RETURN(m->image_, LoadImageConfig(*files.files, resize));
  std::unique_ptr<TensorSource> source;
  if (files.gguf != nullptr && files.llamacpp) {  // llama.cpp's text GGUF + mmproj
    OCULAR_ASSIGN_OR_RETURN(source, LlamaCppTensors(files, cfg));
  } else {
    Weights3 scratch;
    OCULAR_ASSIGN_OR_RETURN(source, OpenTensors(files, [&] {
                              // written by `ocular quantize` (gguf_names.h)
                              return GgufTensors(files.gguf, [&](const TensorVisitor& fn) {
                                return ForEachTensor(cfg, &scratch, fn);
                              });
                            }));
  }
  return Assemble(std::move(m), std::move(cfg), std::move(source));
}

Status Qwen3VL::BindWeights() {
  const Vision3Config& v = cfg_.vision;
  OCULAR_RETURN_IF_ERROR(BindQwen("qwen3_vl", "Qwen3-VL (qwen3_vl)", /*legacy_names=*/false,
                                  v.hidden_size, v.head_dim()));
  const Text3Config& t = cfg_.text;
  text_rope_ = InterleavedMrope(t.head_dim, t.rope_theta, t.mrope_section);
  return Status::Ok();
}

void Qwen3VL::BuildSpec() {
  const Vision3Config& v = cfg_.vision;
  BuildQwenSpec("Qwen3-VL (qwen3_vl)",
                {v.patch_size, v.merge_rows(), v.depth, static_cast<double>(v.hidden_size),
                 static_cast<double>(v.intermediate_size), static_cast<double>(v.patch_floats()),
                 1 + v.deepstack()});
  spec_.feature_width = int64_t{cfg_.text.hidden_size} * (1 + v.deepstack());
}

size_t Qwen3VL::EncodeBytes(int64_t rows, int threads) const {
  return Encode3Bytes(cfg_, rows, threads);
}

void Qwen3VL::EncodeImages(const Exec& ex, std::span<const VisionInput> images, const float* pixels,
                           float* features, Tracer* tracer) const {
  Encode3(ex, cfg_, w_.vision, vision_rope_.spec(), images, pixels, features, tracer);
}

void Qwen3VL::AfterLayer(const Exec& ex, const Batch& batch, int k, float* x) const {
  // Qwen3VLTextModel.forward: layer_idx in range(len(deepstack_visual_embeds))
  if (k >= cfg_.vision.deepstack()) return;
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

}  // namespace ocular::qwen2vl

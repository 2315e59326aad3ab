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

const char* Architecture(const Qwen2VLConfig& cfg) {
  return cfg.qwen25() ? "Qwen2.5-VL (qwen2_5_vl)" : "Qwen2-VL (qwen2_vl)";
}

}  // namespace

Status ForEachTensor(const Qwen2VLConfig& cfg, Weights* w, const TensorVisitor& fn) {
  OCULAR_RETURN_IF_ERROR(VisitVision(cfg, &w->vision, fn));
  return VisitText(TextOf(cfg), w, fn);
}

StatusOr<std::unique_ptr<Qwen2VL>> Qwen2VL::Load(const ModelFiles& files,
                                                 const ImageResize& resize) {
  OCULAR_ASSIGN_OR_RETURN(Qwen2VLConfig cfg, LoadQwen2VLConfig(*files.files));
  std::unique_ptr<Qwen2VL> m(new Qwen2VL());
  OCULAR_ASSIGN_OR_RETURN(m->image_, LoadImageConfig(*files.files, resize));
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
  const VisionConfig& v = cfg_.vision;
  OCULAR_RETURN_IF_ERROR(
      BindQwen("qwen2_vl", Architecture(cfg_), /*legacy_names=*/true, v.embed_dim, v.head_dim()));
  const TextConfig& t = cfg_.text;
  text_rope_ = blocks::MultimodalRope(t.head_dim(), t.rope_theta, t.mrope_section);
  return Status::Ok();
}

void Qwen2VL::BuildSpec() {
  const VisionConfig& v = cfg_.vision;
  BuildQwenSpec(Architecture(cfg_),
                {v.patch_size, v.merge_rows(), v.depth, static_cast<double>(v.embed_dim),
                 static_cast<double>(v.mlp_dim()), static_cast<double>(v.patch_floats()), 1});
}

size_t Qwen2VL::EncodeBytes(int64_t rows, int threads) const {
  return qwen2vl::EncodeBytes(cfg_, rows, threads);
}

void Qwen2VL::EncodeImages(const Exec& ex, std::span<const VisionInput> images, const float* pixels,
                           float* features, Tracer* tracer) const {
  qwen2vl::EncodeImages(ex, cfg_, w_.vision, vision_rope_.spec(), images, pixels, features, tracer);
}

}  // namespace ocular::qwen2vl

// The tensors of llama.cpp's Qwen-VL text GGUF + mmproj under transformers' names
// (models/qwen2vl/llamacpp_gguf.h). Names: gguf-py tensor_mapping.py (MODEL_ARCH.QWEN2VL,
// MODEL_ARCH.QWEN3VL and the visual.* entries of MmprojModel); splits and renames:
// conversion/qwenvl.py Qwen2VLVisionModel.modify_tensors, conversion/qwen3vl.py
// Qwen3VLVisionModel.modify_tensors.
#include <cstring>
#include <deque>
#include <functional>
#include <set>
#include <span>
#include <utility>

#include "core/half.h"
#include "io/gguf_source.h"
#include "models/qwen2vl/llamacpp_gguf.h"

namespace ocular::qwen2vl {

namespace {

using Pair = std::pair<const char*, const char*>;  // {GGUF spelling, HF spelling}

// Within a text layer: blk.N.<gguf> -> model.layers.N.<hf>.
constexpr Pair kTextLayer[] = {
    {"attn_norm.", "input_layernorm."},    {"attn_q.", "self_attn.q_proj."},
    {"attn_k.", "self_attn.k_proj."},      {"attn_v.", "self_attn.v_proj."},
    {"attn_output.", "self_attn.o_proj."}, {"ffn_norm.", "post_attention_layernorm."},
    {"ffn_gate.", "mlp.gate_proj."},       {"ffn_up.", "mlp.up_proj."},
    {"ffn_down.", "mlp.down_proj."},
};
// Within a ViT block: v.blk.N.<gguf> -> visual.blocks.N.<hf>. attn.q / attn.k / attn.v are
// the converter's split of attn.qkv (joined back below).
constexpr Pair kVisionBlock[] = {
    {"ln1.", "norm1."},     {"ln2.", "norm2."},     {"attn_out.", "attn.proj."},
    {"attn_q.", "attn.q."}, {"attn_k.", "attn.k."}, {"attn_v.", "attn.v."},
};
constexpr Pair kQwen2Mlp[] = {{"ffn_up.", "mlp.fc1."}, {"ffn_down.", "mlp.fc2."}};
constexpr Pair kQwen25Mlp[] = {
    {"ffn_gate.", "mlp.gate_proj."}, {"ffn_up.", "mlp.up_proj."}, {"ffn_down.", "mlp.down_proj."}};
// Qwen3-VL: blk.N's q/k norms; the ViT's fused attn_qkv and its MLP; v.deepstack.L.* (L the
// block, not the list index) -> deepstack_merger_list.K.*.
constexpr Pair kQwen3TextLayer[] = {
    {"attn_q_norm.", "self_attn.q_norm."},
    {"attn_k_norm.", "self_attn.k_norm."},
};
constexpr Pair kQwen3Block[] = {
    {"ln1.", "norm1."},
    {"ln2.", "norm2."},
    {"attn_qkv.", "attn.qkv."},
    {"attn_out.", "attn.proj."},
    {"ffn_up.", "mlp.linear_fc1."},
    {"ffn_down.", "mlp.linear_fc2."},
};
constexpr Pair kQwen3Merger[] = {
    {"norm.", "norm."}, {"fc1.", "linear_fc1."}, {"fc2.", "linear_fc2."}};
constexpr Pair kQwen3Rest[] = {
    {"v.post_ln.", "model.visual.merger.norm."},
    {"mm.0.", "model.visual.merger.linear_fc1."},
    {"mm.2.", "model.visual.merger.linear_fc2."},
    {"v.position_embd.", "model.visual.pos_embed."},
    {"v.patch_embd.bias", "model.visual.patch_embed.proj.bias"},
    {"v.patch_embd.weight.1", "model.visual.patch_embed.proj.weight.t1"},  // temporal half 1
    {"v.patch_embd.weight", "model.visual.patch_embed.proj.weight.t0"},    // temporal half 0
};
constexpr Pair kVisionRest[] = {
    {"v.post_ln.", "visual.merger.ln_q."},
    {"mm.0.", "visual.merger.mlp.0."},
    {"mm.2.", "visual.merger.mlp.2."},
    {"v.patch_embd.weight.1", "visual.patch_embed.proj.weight.t1"},  // temporal half 1
    {"v.patch_embd.weight", "visual.patch_embed.proj.weight.t0"},    // temporal half 0
};

// `name` with the first prefix of `table` replaced; "" if none matches.
std::string Swap(std::string_view name, std::span<const Pair> table) {
  for (const auto& [from, to] : table) {
    if (name.starts_with(from)) return std::string(to) + std::string(name.substr(strlen(from)));
  }
  return "";
}

// "<prefix>N.<rest>" -> "<out>N.<rest swapped>"; "" if not a layer's or no entry matches.
std::string SwapLayer(std::string_view name, std::string_view prefix, std::string_view out,
                      std::span<const Pair> a, std::span<const Pair> b = {}) {
  if (!name.starts_with(prefix)) return "";
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string_view::npos) return "";
  const std::string_view rest = name.substr(dot + 1);
  std::string hf = Swap(rest, a);
  if (hf.empty()) hf = Swap(rest, b);
  if (hf.empty()) return "";
  return std::string(out) + std::string(name.substr(prefix.size(), dot + 1 - prefix.size())) + hf;
}

// The decoder's names under `prefix` ("model." for Qwen2-VL's legacy names,
// "model.language_model." for Qwen3-VL's).
std::string TextHf(std::string_view name, const std::string& prefix, bool qwen3) {
  if (name == "token_embd.weight") return prefix + "embed_tokens.weight";
  if (name == "output_norm.weight") return prefix + "norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  return SwapLayer(name, "blk.", prefix + "layers.", kTextLayer,
                   qwen3 ? std::span<const Pair>(kQwen3TextLayer) : std::span<const Pair>());
}

std::string VisionHf(std::string_view name, bool qwen25) {
  std::string hf = SwapLayer(name, "v.blk.", "visual.blocks.", kVisionBlock,
                             qwen25 ? std::span<const Pair>(kQwen25Mlp) : kQwen2Mlp);
  return hf.empty() ? Swap(name, kVisionRest) : hf;
}

// Qwen3-VL's ViT; `deepstack` the blocks with a DeepStack merger, in list order.
std::string Vision3Hf(std::string_view name, const std::vector<int>& deepstack) {
  std::string hf = SwapLayer(name, "v.blk.", "model.visual.blocks.", kQwen3Block);
  if (!hf.empty()) return hf;
  for (size_t k = 0; k < deepstack.size(); ++k) {
    const std::string layer = "v.deepstack." + std::to_string(deepstack[k]) + ".";
    if (!name.starts_with(layer)) continue;
    hf = Swap(name.substr(layer.size()), kQwen3Merger);
    return hf.empty() ? hf : "model.visual.deepstack_merger_list." + std::to_string(k) + "." + hf;
  }
  return Swap(name, kQwen3Rest);
}

// Every tensor of `file` that `hf` names, for GgufSource (the rest stay unmapped, so the
// loader reports them as unused).
std::vector<GgufName> Table(const GgufFile& file,
                            const std::function<std::string(std::string_view)>& hf) {
  std::vector<GgufName> out;
  for (const GgufTensor& t : file.tensors()) {
    std::string name = hf(t.name);
    if (!name.empty()) out.push_back({std::move(name), t.name, false});
  }
  return out;
}

// f32 values of a float view (F32, F16, BF16).
std::vector<float> Floats(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (v.dtype == DType::kF32) {
      out[i] = v.as<float>()[i];
    } else {
      const uint16_t h = v.as<uint16_t>()[i];
      out[i] = v.dtype == DType::kF16 ? F16ToF32(h) : BF16ToF32(h);
    }
  }
  return out;
}

// The pair's tensors, with HF's fused tensors joined from the converter's parts.
class PairSource final : public TensorSource {
 public:
  // `patch`: the Conv3d weight's HF name (its halves are `patch`.t0 / .t1).
  PairSource(std::unique_ptr<TensorSource> inner, std::string patch)
      : inner_(std::move(inner)), patch_(std::move(patch)) {}
  const std::string& origin() const override { return inner_->origin(); }

  std::vector<std::string> Names() const override {
    std::vector<std::string> out;
    for (std::string& n : inner_->Names()) {
      if (Part(n) == nullptr) out.push_back(std::move(n));
    }
    std::set<std::string> fused;
    for (const std::string& n : inner_->Names()) {
      if (const char* whole = Part(n)) fused.insert(Whole(n, whole));
    }
    out.insert(out.end(), fused.begin(), fused.end());
    return out;
  }
  bool Has(const std::string& name) const override {
    if (name == patch_) return inner_->Has(patch_ + ".t0");
    if (IsQkv(name)) return inner_->Has(QkvPart(name, 'q'));
    return inner_->Has(name);
  }
  StatusOr<TensorView> Get(const std::string& name, const Shape& shape) const override;
  StatusOr<Matrix> GetMatrix(const std::string& name, const Shape& shape) const override;
  const MappedFile* MappingOf(const std::byte* p, size_t n) const override {
    return inner_->MappingOf(p, n);
  }

 private:
  // The HF tensor a part belongs to (its suffix), or null for a whole tensor.
  const char* Part(const std::string& n) const {
    if (n.starts_with(patch_) && n.size() > patch_.size()) return ".t";
    for (const char* p : {".attn.q.", ".attn.k.", ".attn.v."}) {
      if (n.starts_with("visual.blocks.") && n.find(p) != std::string::npos) return p;
    }
    return nullptr;
  }
  std::string Whole(const std::string& n, const char* part) const {
    if (std::string_view(part) == ".t") return patch_;
    const size_t at = n.find(part);
    return n.substr(0, at) + ".attn.qkv." + n.substr(at + strlen(part));
  }
  static bool IsQkv(const std::string& n) {
    return n.starts_with("visual.blocks.") && n.find(".attn.qkv.") != std::string::npos;
  }
  static std::string QkvPart(const std::string& n, char which) {
    const size_t at = n.find(".attn.qkv.");
    return n.substr(0, at) + ".attn." + which + "." + n.substr(at + 10);
  }

  std::unique_ptr<TensorSource> inner_;
  std::string patch_;
  mutable std::deque<std::vector<float>> floats_;
  mutable std::deque<std::vector<std::byte>> bytes_;
};

StatusOr<TensorView> PairSource::Get(const std::string& name, const Shape& shape) const {
  if (name == patch_) {  // [D, C, 2, p, p] from two [D, C, p, p] halves
    if (shape.size() != 5 || shape[2] != 2) {
      return Error(StatusCode::kUnimplemented, "gguf", origin(), ": ", name, " of shape ",
                   ShapeString(shape), ": llama.cpp stores a temporal patch of 2 only");
    }
    const Shape half = {shape[0], shape[1], shape[3], shape[4]};
    OCULAR_ASSIGN_OR_RETURN(TensorView t0, inner_->Get(patch_ + ".t0", half));
    OCULAR_ASSIGN_OR_RETURN(TensorView t1, inner_->Get(patch_ + ".t1", half));
    const std::vector<float> a = Floats(t0), b = Floats(t1);
    const size_t plane = static_cast<size_t>(shape[3] * shape[4]);
    std::vector<float>& out = floats_.emplace_back(a.size() * 2);
    for (size_t dc = 0; dc < a.size() / plane; ++dc) {  // out[d, c, t] = half_t[d, c]
      std::memcpy(&out[(2 * dc) * plane], &a[dc * plane], plane * sizeof(float));
      std::memcpy(&out[(2 * dc + 1) * plane], &b[dc * plane], plane * sizeof(float));
    }
    return TensorView{out.data(), DType::kF32, shape};
  }
  if (IsQkv(name) && shape.size() == 1 && shape[0] % 3 == 0) {  // the bias: q, k, v
    std::vector<float>& out = floats_.emplace_back();
    for (char which : {'q', 'k', 'v'}) {
      OCULAR_ASSIGN_OR_RETURN(TensorView part, inner_->Get(QkvPart(name, which), {shape[0] / 3}));
      const std::vector<float> f = Floats(part);
      out.insert(out.end(), f.begin(), f.end());
    }
    return TensorView{out.data(), DType::kF32, shape};
  }
  return inner_->Get(name, shape);
}

StatusOr<Matrix> PairSource::GetMatrix(const std::string& name, const Shape& shape) const {
  if (name == patch_) {
    OCULAR_ASSIGN_OR_RETURN(TensorView v, Get(name, shape));
    return MatrixFromView(v, shape[0], v.numel() / shape[0]);
  }
  if (!IsQkv(name) || shape.size() != 2 || shape[0] % 3 != 0) {
    return inner_->GetMatrix(name, shape);
  }
  Matrix parts[3];  // rows of q, then k, then v, in the stored format
  for (int i = 0; i < 3; ++i) {
    OCULAR_ASSIGN_OR_RETURN(parts[i],
                            inner_->GetMatrix(QkvPart(name, "qkv"[i]), {shape[0] / 3, shape[1]}));
    if (parts[i].format != parts[0].format || parts[i].row_bytes != parts[0].row_bytes) {
      return Error(StatusCode::kUnimplemented, "gguf", origin(), ": ", QkvPart(name, "qkv"[i]),
                   " is stored in another format than ", QkvPart(name, 'q'), ": joining them into ",
                   name, " is not implemented");
    }
  }
  std::vector<std::byte>& out = bytes_.emplace_back();
  for (const Matrix& m : parts) out.insert(out.end(), m.data, m.data + m.bytes());
  Matrix joined = parts[0];
  joined.data = out.data();
  joined.rows = shape[0];
  return joined;
}

// The pair's tensors under the HF names `text_hf` and `vision_hf` give.
StatusOr<std::unique_ptr<TensorSource>> PairTensors(
    const ModelFiles& files, const char* model,
    const std::function<std::string(std::string_view)>& text_hf,
    const std::function<std::string(std::string_view)>& vision_hf, std::string patch) {
  if (files.gguf == nullptr || files.mmproj == nullptr) {
    return Error(StatusCode::kUnimplemented, model, files.path, ": ", model,
                 " runs from an HF directory or llama.cpp's text GGUF with its mmproj");
  }
  std::vector<std::unique_ptr<TensorSource>> sources;
  sources.push_back(std::make_unique<GgufSource>(files.gguf, Table(*files.gguf, text_hf)));
  sources.push_back(std::make_unique<GgufSource>(files.mmproj, Table(*files.mmproj, vision_hf)));
  return std::unique_ptr<TensorSource>(std::make_unique<PairSource>(
      std::make_unique<UnionSource>(std::move(sources)), std::move(patch)));
}

}  // namespace

StatusOr<std::unique_ptr<TensorSource>> LlamaCppTensors(const ModelFiles& files,
                                                        const Qwen2VLConfig& cfg) {
  const bool qwen25 = cfg.qwen25();
  return PairTensors(
      files, "qwen2_vl", [](std::string_view n) { return TextHf(n, "model.", false); },
      [qwen25](std::string_view n) { return VisionHf(n, qwen25); },
      "visual.patch_embed.proj.weight");
}

StatusOr<std::unique_ptr<TensorSource>> LlamaCppTensors(const ModelFiles& files,
                                                        const Qwen3VLConfig& cfg) {
  const std::vector<int> deepstack = cfg.vision.deepstack_visual_indexes;
  return PairTensors(
      files, "qwen3_vl",
      [](std::string_view n) { return TextHf(n, "model.language_model.", true); },
      [deepstack](std::string_view n) { return Vision3Hf(n, deepstack); },
      "model.visual.patch_embed.proj.weight");
}

}  // namespace ocular::qwen2vl

#include "models/gemma3/gguf_names.h"

#include <cstring>

#include "models/gemma3/gemma3.h"
#include "models/gguf_rename.h"
#include "models/paligemma/gguf_names.h"

namespace ocular::gemma3 {

namespace {

using gguf_rename::Rename;
using gguf_rename::StartsWith;

bool IsImagePath(const std::string& hf) {
  return StartsWith(hf, "vision_tower.") || StartsWith(hf, "multi_modal_projector.");
}

// True if the mmproj's v.blk.0.ffn_down holds fc1 ([intermediate, hidden] in HF order: rows
// of `hidden` values), as clip.cpp's is_ffn_swapped tells it.
bool FfnSwapped(const GgufFile& mmproj, int64_t hidden) {
  const GgufTensor* down = mmproj.FindTensor("v.blk.0.ffn_down.weight");
  return down != nullptr && !down->ne.empty() && down->ne[0] == hidden;
}

// "v.blk.N.ffn_up.*" <-> "v.blk.N.ffn_down.*".
std::string SwapFfn(const std::string& name) {
  for (auto [from, to] :
       {std::pair{".ffn_up.", ".ffn_down."}, std::pair{".ffn_down.", ".ffn_up."}}) {
    const size_t at = name.find(from);
    if (StartsWith(name, "v.blk.") && at != std::string::npos) {
      return name.substr(0, at) + to + name.substr(at + std::strlen(from));
    }
  }
  return name;
}

}  // namespace

std::string GgufTensorName(const std::string& hf) {
  if (hf == "multi_modal_projector.mm_input_projection_weight") return "mm.input_projection.weight";
  if (hf == "multi_modal_projector.mm_soft_emb_norm.weight") return "mm.soft_emb_norm.weight";
  if (StartsWith(hf, "vision_tower.")) return paligemma::GgufTensorName(hf, /*gemma2=*/true);
  return gguf_rename::RenameDecoder(hf, {"language_model.model.", "model."},
                                    gguf_rename::kSandwichNorms);
}

std::vector<GgufName> GgufNames(const Gemma3Config& cfg, bool llamacpp) {
  return gguf_rename::CollectNames<Gemma3Weights>(
      cfg, [](const std::string& hf) { return GgufTensorName(hf); },
      [llamacpp](const std::string& hf) {
        // The decoder's norms and mm_soft_emb_norm, stored as 1 + w by llama.cpp.
        return llamacpp && hf.ends_with("norm.weight") && !StartsWith(hf, "vision_tower.");
      });
}

std::unique_ptr<TensorSource> GgufTensors(const ModelFiles& files, const Gemma3Config& cfg) {
  std::vector<GgufName> names = GgufNames(cfg, files.llamacpp);
  if (files.mmproj == nullptr) return std::make_unique<GgufSource>(files.gguf, names);
  std::vector<GgufName> text, image;
  const bool swapped = FfnSwapped(*files.mmproj, cfg.vision.hidden_size);
  for (GgufName& n : names) {
    if (!IsImagePath(n.hf)) {
      text.push_back(std::move(n));
      continue;
    }
    if (swapped) n.gguf = SwapFfn(n.gguf);
    image.push_back(std::move(n));
  }
  std::vector<std::unique_ptr<TensorSource>> sources;
  sources.push_back(std::make_unique<GgufSource>(files.gguf, text));
  sources.push_back(std::make_unique<GgufSource>(files.mmproj, image));
  return std::make_unique<UnionSource>(std::move(sources));
}

}  // namespace ocular::gemma3

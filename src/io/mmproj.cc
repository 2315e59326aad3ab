#include "io/mmproj.h"

#include <cmath>
#include <cstring>
#include <set>

#include "io/gguf_meta.h"

namespace ocular {

namespace {

// The clip.* keys read below (clip-impl.h). Any other clip.* key is refused: it would
// change what llama.cpp computes (another encoder, a merge pattern, feature layers, ...).
const GgufKeys& KnownKeys() {
  static const GgufKeys keys = PrefixedKeys(
      "clip.",
      {"projector_type", "vision.projector_type", "has_vision_encoder", "has_audio_encoder",
       "has_text_encoder", "has_llava_projector", "use_gelu", "use_silu", "vision.image_size",
       "vision.patch_size", "vision.embedding_length", "vision.feed_forward_length",
       "vision.block_count", "vision.attention.head_count", "vision.attention.layer_norm_epsilon",
       "vision.projection_dim", "vision.image_mean", "vision.image_std"});
  return keys;
}

// The keys one projector type reads besides KnownKeys() (clip.cpp load_hparams, per type).
bool TypeKey(std::string_view type, std::string_view key) {
  if (type == "gemma3") return key == "clip.vision.projector.scale_factor";
  if (key == "clip.vision.spatial_merge_size") return true;
  if (type == "qwen3vl_merger") return key == "clip.vision.is_deepstack_layers";
  if (key == "clip.vision.window_size") return true;
  return type == "qwen2.5vl_merger" && key == "clip.vision.n_wa_pattern";
}

// The text architecture a projector type pairs with (llama.cpp's arch of the same model).
std::string_view PairedArch(std::string_view type) {
  if (type == "gemma3") return "gemma3";
  return type == "qwen3vl_merger" ? "qwen3vl" : "qwen2vl";
}

// The projector types of a text architecture (for messages).
std::string_view PairedTypes(std::string_view arch) {
  if (arch == "gemma3") return "gemma3";
  return arch == "qwen3vl" ? "qwen3vl_merger" : "qwen2vl_merger, qwen2.5vl_merger";
}

// The activation of the projector type's reference encoder: SigLIP's and Qwen3-VL's
// gelu_pytorch_tanh, Qwen2-VL's quick_gelu, Qwen2.5-VL's SiLU.
std::string_view ReferenceActivation(std::string_view type) {
  if (type == "gemma3" || type == "qwen3vl_merger") return "gelu";
  if (type == "qwen2vl_merger") return "gelu_quick";
  return "silu";
}

Status Refuse(const GgufFile& g, const auto&... what) {
  return GgufMeta(g, "mmproj").Refuse(what...);
}

// An integer key in [1, max]; absent is kDataLoss here (an mmproj file writes them all).
StatusOr<int64_t> Required(const GgufFile& g, const char* key, int64_t max = int64_t{1} << 31) {
  const GgufMeta meta(g, "mmproj");
  if (g.Find(key) == nullptr) return meta.Corrupt("no metadata '", key, "'");
  return meta.Required(key, max);
}

StatusOr<bool> OptionalBool(const GgufFile& g, const char* key, bool fallback) {
  return GgufMeta(g, "mmproj").OptionalBool(key, fallback);
}

// Three f32 values (image_mean / image_std), finite; std non-zero.
Status ReadTriple(const GgufFile& g, const char* key, bool nonzero, std::array<double, 3>* out) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) {
    return Error(StatusCode::kDataLoss, "mmproj", g.origin(), ": no metadata '", key, "'");
  }
  if (v->type != GgufType::kArray || v->elem_type != GgufType::kF32 || v->count != 3) {
    return Error(StatusCode::kDataLoss, "mmproj", g.origin(), ": metadata '", key,
                 "' must be an array of 3 f32 values (one per RGB channel)");
  }
  for (int c = 0; c < 3; ++c) {
    float f = 0;
    std::memcpy(&f, v->elems + 4 * c, 4);
    if (!std::isfinite(f) || (nonzero && f == 0)) {
      return Error(StatusCode::kDataLoss, "mmproj", g.origin(), ": metadata '", key, "'[", c,
                   "] = ", f, " is not ", nonzero ? "a finite non-zero" : "a finite", " number");
    }
    (*out)[c] = f;
  }
  return Status::Ok();
}

Status CheckKeys(const GgufFile& g, MmprojVision* m) {
  for (const auto& [key, value] : g.metadata()) {
    if (key.starts_with("general.")) continue;
    if (!KnownKeys().contains(key) && !TypeKey(m->projector_type, key)) {
      return Refuse(g, "metadata '", key, "' is not implemented for llama.cpp mmproj files (",
                    "projector ", m->projector_type, ")");
    }
  }
  OCULAR_ASSIGN_OR_RETURN(const bool vision, OptionalBool(g, "clip.has_vision_encoder", true));
  if (!vision) return Refuse(g, "clip.has_vision_encoder is false: no vision encoder to run");
  for (const char* key :
       {"clip.has_audio_encoder", "clip.has_text_encoder", "clip.has_llava_projector"}) {
    OCULAR_ASSIGN_OR_RETURN(const bool on, OptionalBool(g, key, false));
    if (on) return Refuse(g, key, " = true is not implemented");
  }
  // clip.cpp: use_gelu -> gelu (tanh), use_silu -> silu, neither -> gelu_quick.
  OCULAR_ASSIGN_OR_RETURN(const bool gelu, OptionalBool(g, "clip.use_gelu", false));
  OCULAR_ASSIGN_OR_RETURN(const bool silu, OptionalBool(g, "clip.use_silu", false));
  m->activation = gelu ? "gelu" : silu ? "silu" : "gelu_quick";
  if (m->activation != ReferenceActivation(m->projector_type)) {
    return Refuse(g, "the encoder's activation is ", m->activation,
                  " (clip.use_gelu = ", gelu ? "true" : "false",
                  ", clip.use_silu = ", silu ? "true" : "false", "), but projector ",
                  m->projector_type, "'s reference runs ", ReferenceActivation(m->projector_type),
                  ": not implemented");
  }
  return Status::Ok();
}

// The optional keys of the Qwen-VL projectors.
Status ReadQwenKeys(const GgufFile& g, MmprojVision* m) {
  for (auto [key, out] : {std::pair{"clip.vision.spatial_merge_size", &m->spatial_merge_size},
                          std::pair{"clip.vision.window_size", &m->window_size},
                          std::pair{"clip.vision.n_wa_pattern", &m->n_wa_pattern}}) {
    if (g.Find(key) == nullptr) continue;
    OCULAR_ASSIGN_OR_RETURN(*out, Required(g, key, 16384));
  }
  return Status::Ok();
}

// clip.vision.is_deepstack_layers (qwen3vl_merger): one bool per block, read as the indexes of
// the true ones. Absent: no DeepStack mergers (clip.cpp's default).
Status ReadDeepstack(const GgufFile& g, MmprojVision* m) {
  const char* key = "clip.vision.is_deepstack_layers";
  const GgufValue* v = g.Find(key);
  if (v == nullptr) return Status::Ok();
  if (v->type != GgufType::kArray || v->elem_type != GgufType::kBool ||
      v->count != static_cast<uint64_t>(m->num_layers)) {
    return GgufMeta(g, "mmproj")
        .Corrupt("metadata '", key, "' must be an array of ", m->num_layers,
                 " bools (one per clip.vision.block_count)");
  }
  for (uint64_t i = 0; i < v->count; ++i) {
    if (v->elems[i] != 0) m->deepstack_layers.push_back(static_cast<int>(i));
  }
  return Status::Ok();
}

}  // namespace

Status CheckPair(const GgufFile& text, const GgufFile& mmproj, const MmprojVision& v,
                 int64_t hidden, std::string_view arch) {
  if (v.projection_dim == hidden) return Status::Ok();
  return Error(StatusCode::kUnimplemented, "mmproj", mmproj.origin(),
               ": clip.vision.projection_dim = ", v.projection_dim, " but the text model ",
               text.origin(), " has ", arch, ".embedding_length = ", hidden,
               ": this mmproj file belongs to another model");
}

void SetMmprojNormalization(const MmprojVision& v, nlohmann::ordered_json* p) {
  (*p)["do_rescale"] = true;
  (*p)["rescale_factor"] = 1.0 / 255.0;
  (*p)["do_normalize"] = true;
  (*p)["image_mean"] = v.image_mean;
  (*p)["image_std"] = v.image_std;
  (*p)["do_convert_rgb"] = true;
}

bool IsMmproj(const GgufFile& gguf) {
  StatusOr<std::string_view> arch = gguf.GetString("general.architecture");
  return arch.ok() && *arch == "clip";
}

StatusOr<MmprojVision> ReadMmproj(const GgufFile& g, std::string_view text_arch) {
  if (!IsMmproj(g)) {
    StatusOr<std::string_view> arch = g.GetString("general.architecture");
    return Error(StatusCode::kInvalidArgument, "mmproj", g.origin(),
                 ": not an mmproj file (general.architecture is '",
                 arch.ok() ? std::string(*arch) : std::string("?"), "', an mmproj's is 'clip')");
  }
  MmprojVision m;
  for (const char* key : {"clip.projector_type", "clip.vision.projector_type"}) {
    if (g.Find(key) == nullptr) continue;
    OCULAR_ASSIGN_OR_RETURN(std::string_view type, g.GetString(key));
    m.projector_type = type;
    m.projector_key = key;
    break;
  }
  if (m.projector_type.empty()) {
    return Error(StatusCode::kDataLoss, "mmproj", g.origin(), ": no clip.projector_type");
  }
  if (m.projector_type != "gemma3" && m.projector_type != "qwen2vl_merger" &&
      m.projector_type != "qwen2.5vl_merger" && m.projector_type != "qwen3vl_merger") {
    return Refuse(g, m.projector_key, " '", m.projector_type,
                  "' is not implemented (ocular reads: ", kMmprojProjectorTypes, ")");
  }
  if (!text_arch.empty() && PairedArch(m.projector_type) != text_arch) {
    return Refuse(g, m.projector_key, " '", m.projector_type, "' does not pair with a text ",
                  "file of architecture '", text_arch,
                  "' (its projector types: ", PairedTypes(text_arch), ")");
  }
  OCULAR_RETURN_IF_ERROR(CheckKeys(g, &m));
  OCULAR_ASSIGN_OR_RETURN(m.image_size, Required(g, "clip.vision.image_size", 16384));
  OCULAR_ASSIGN_OR_RETURN(m.patch_size, Required(g, "clip.vision.patch_size", 1024));
  OCULAR_ASSIGN_OR_RETURN(m.hidden_size, Required(g, "clip.vision.embedding_length"));
  OCULAR_ASSIGN_OR_RETURN(m.intermediate_size, Required(g, "clip.vision.feed_forward_length"));
  OCULAR_ASSIGN_OR_RETURN(m.num_layers, Required(g, "clip.vision.block_count", 1024));
  OCULAR_ASSIGN_OR_RETURN(m.num_heads, Required(g, "clip.vision.attention.head_count", 1024));
  OCULAR_ASSIGN_OR_RETURN(m.projection_dim, Required(g, "clip.vision.projection_dim"));
  if (g.Find("clip.vision.attention.layer_norm_epsilon") != nullptr) {
    OCULAR_ASSIGN_OR_RETURN(m.layer_norm_eps,
                            g.GetFloat("clip.vision.attention.layer_norm_epsilon"));
  }
  if (!(m.layer_norm_eps > 0 && m.layer_norm_eps < 1)) {
    return Error(StatusCode::kDataLoss, "mmproj", g.origin(),
                 ": clip.vision.attention.layer_norm_epsilon = ", m.layer_norm_eps,
                 " is not in (0, 1)");
  }
  OCULAR_RETURN_IF_ERROR(ReadTriple(g, "clip.vision.image_mean", false, &m.image_mean));
  OCULAR_RETURN_IF_ERROR(ReadTriple(g, "clip.vision.image_std", true, &m.image_std));
  if (g.Find("clip.vision.projector.scale_factor") != nullptr) {
    OCULAR_ASSIGN_OR_RETURN(m.scale_factor,
                            Required(g, "clip.vision.projector.scale_factor", 1024));
  }
  OCULAR_RETURN_IF_ERROR(ReadQwenKeys(g, &m));
  OCULAR_RETURN_IF_ERROR(ReadDeepstack(g, &m));
  return m;
}

}  // namespace ocular

// llama.cpp's mmproj file: the vision encoder and projector of a multimodal model, which
// llama.cpp keeps apart from the text GGUF (llama-mtmd-cli -m text.gguf --mmproj mmproj.gguf).
// A GGUF of general.architecture "clip" whose "clip.*" / "clip.vision.*" metadata are read by
// llama.cpp's tools/mtmd/clip.cpp (keys: clip-impl.h KEY_*), written by convert_hf_to_gguf.py
// --mmproj (MmprojModel.set_gguf_parameters and the family's subclass):
//   clip.projector_type (or clip.vision.projector_type)  the projector, e.g. "gemma3"
//   clip.has_vision_encoder (true), clip.has_audio_encoder (false), clip.use_gelu /
//     clip.use_silu (the encoder's activation; neither: gelu_quick)
//   clip.vision.image_size, patch_size, embedding_length, feed_forward_length, block_count,
//     attention.head_count, attention.layer_norm_epsilon, projection_dim (the text model's
//     hidden size), image_mean, image_std, projector.scale_factor (optional, gemma3)
//   Qwen-VL (qwen2vl_merger, qwen2.5vl_merger, qwen3vl_merger): clip.vision.spatial_merge_size;
//     clip.vision.window_size (optional) and clip.vision.n_wa_pattern (qwen2.5vl_merger) for
//     Qwen2-VL / 2.5; clip.vision.is_deepstack_layers (qwen3vl_merger: one bool per block)
// Tensors keep clip's names (v.patch_embd.weight, v.blk.N.attn_q.weight, v.post_ln.weight,
// mm.input_projection.weight, ...); the model family maps them to its HF names.
// Only the vision encoder with the projector types ocular implements is read; an audio
// encoder, another projector type or any clip.* key not listed here is refused
// (kUnimplemented, naming the key), never ignored.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.h"
#include "ocular/status.h"

namespace ocular {

struct MmprojVision {
  std::string projector_type;     // clip.projector_type
  std::string projector_key;      // the key it was read from (for messages)
  int64_t image_size = 0;         // clip.vision.image_size: the square the image is resized to
  int64_t patch_size = 0;         // clip.vision.patch_size
  int64_t hidden_size = 0;        // clip.vision.embedding_length
  int64_t intermediate_size = 0;  // clip.vision.feed_forward_length
  int64_t num_layers = 0;         // clip.vision.block_count
  int64_t num_heads = 0;          // clip.vision.attention.head_count
  double layer_norm_eps = 1e-6;   // clip.vision.attention.layer_norm_epsilon
  int64_t projection_dim = 0;     // clip.vision.projection_dim: the text model's hidden size
  std::array<double, 3> image_mean{}, image_std{};  // clip.vision.image_mean / image_std
  int64_t scale_factor = 0;  // clip.vision.projector.scale_factor; 0 when the file has none
  // clip.cpp's activation: "gelu" (clip.use_gelu), "silu" (clip.use_silu), else "gelu_quick".
  std::string activation;
  int64_t spatial_merge_size = 0;  // clip.vision.spatial_merge_size; 0 when the file has none
  int64_t window_size = 0;         // clip.vision.window_size; 0 when the file has none
  int64_t n_wa_pattern = 0;        // clip.vision.n_wa_pattern: every n-th block attends fully
  // clip.vision.is_deepstack_layers: the blocks with a DeepStack merger, ascending.
  std::vector<int> deepstack_layers;
};

// The projector types ocular implements (clip-impl.h PROJECTOR_TYPE_NAMES).
inline constexpr const char* kMmprojProjectorTypes =
    "gemma3, qwen2vl_merger, qwen2.5vl_merger, qwen3vl_merger";

// True if `gguf` is an mmproj file (general.architecture "clip").
bool IsMmproj(const GgufFile& gguf);

// The preprocessor_config.json fields an mmproj file gives, set in `p` (the processor type,
// resize rule and the rest are the family's): do_rescale by 1/255, do_normalize with the file's
// image_mean / image_std, do_convert_rgb.
void SetMmprojNormalization(const MmprojVision& v, nlohmann::ordered_json* p);

// kUnimplemented unless the mmproj's projection_dim is the text model's hidden size `hidden`
// (<arch>.embedding_length): else the mmproj file belongs to another model.
Status CheckPair(const GgufFile& text, const GgufFile& mmproj, const MmprojVision& v,
                 int64_t hidden, std::string_view arch);

// Reads and checks `gguf`'s metadata. kUnimplemented (naming the key) for a projector type
// ocular does not implement, an audio encoder, an activation other than the projector's
// reference's (gemma3, qwen3vl_merger: gelu; qwen2vl_merger: gelu_quick; qwen2.5vl_merger:
// silu), or a clip.*
// key the projector type does not read;
// kDataLoss for a missing or out-of-range required key.
// `text_arch` (optional): the paired text file's general.architecture; a projector type that
// does not go with it (gemma3 with "gemma3"; qwen2vl_merger, qwen2.5vl_merger with "qwen2vl";
// qwen3vl_merger with "qwen3vl")
// is refused (kUnimplemented) before anything else is read.
StatusOr<MmprojVision> ReadMmproj(const GgufFile& gguf, std::string_view text_arch = {});

}  // namespace ocular

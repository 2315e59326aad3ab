// llama.cpp's mmproj file: the vision encoder and projector of a multimodal model, which
// llama.cpp keeps apart from the text GGUF (llama-mtmd-cli -m text.gguf --mmproj mmproj.gguf).
// A GGUF of general.architecture "clip" whose "clip.*" / "clip.vision.*" metadata are read by
// llama.cpp's tools/mtmd/clip.cpp (keys: clip-impl.h KEY_*), written by convert_hf_to_gguf.py
// --mmproj (MmprojModel.set_gguf_parameters and the family's subclass):
//   clip.projector_type (or clip.vision.projector_type)  the projector, e.g. "gemma3"
//   clip.has_vision_encoder (true), clip.has_audio_encoder (false), clip.use_gelu
//   clip.vision.image_size, patch_size, embedding_length, feed_forward_length, block_count,
//     attention.head_count, attention.layer_norm_epsilon, projection_dim (the text model's
//     hidden size), image_mean, image_std, projector.scale_factor (optional)
// Tensors keep clip's names (v.patch_embd.weight, v.blk.N.attn_q.weight, v.post_ln.weight,
// mm.input_projection.weight, ...); the model family maps them to its HF names.
// Only the vision encoder with the projector types ocular implements is read; an audio
// encoder, another projector type or any clip.* key not listed here is refused
// (kUnimplemented, naming the key), never ignored.
#pragma once

#include <array>
#include <cstdint>
#include <string>

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
};

// The projector types ocular implements ("gemma3").
inline constexpr const char* kMmprojProjectorTypes = "gemma3";

// True if `gguf` is an mmproj file (general.architecture "clip").
bool IsMmproj(const GgufFile& gguf);

// Reads and checks `gguf`'s metadata. kUnimplemented (naming the key) for a projector type
// ocular does not implement, an audio encoder, gelu_quick / silu, or an unknown clip.* key;
// kDataLoss for a missing or out-of-range required key.
StatusOr<MmprojVision> ReadMmproj(const GgufFile& gguf);

}  // namespace ocular

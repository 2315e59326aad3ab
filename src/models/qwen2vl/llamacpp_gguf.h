// Qwen2-VL, Qwen2.5-VL and Qwen3-VL from llama.cpp's two files: the text GGUF
// (convert_hf_to_gguf.py Qwen2VLModel: architecture "qwen2vl"; Qwen3VLTextModel: "qwen3vl"; a
// gpt2 vocabulary) and its mmproj (Qwen2VLVisionModel: projector "qwen2vl_merger" for Qwen2-VL,
// "qwen2.5vl_merger" for Qwen2.5-VL; Qwen3VLVisionModel: "qwen3vl_merger"), read as the HF
// directory they were converted from (Qwen3-VL below the Qwen2 list):
//   config.json   text_config from the "qwen2vl.*" keys (mrope_section: the first three of
//                 rope.dimension_sections, the fourth 0); vision_config from clip.vision.*: the
//                 ViT's width, depth, heads, patch, merge (clip.vision.spatial_merge_size, 2
//                 when absent, as clip.cpp), the merger's output (projection_dim, which must
//                 equal the text hidden size); the MLP's width from v.blk.0.ffn_up's rows
//                 (the converter writes Qwen2-VL's merger width as feed_forward_length);
//                 Qwen2.5-VL's window_size (clip.vision.window_size, clip.cpp's 112 when
//                 absent) and full-attention blocks (clip.vision.n_wa_pattern n: blocks
//                 n-1, 2n-1, ..., clip.cpp's (il + 1) % n == 0); the image / vision tokens'
//                 ids from the vocabulary
//   tokenizer.json, tokenizer_config.json   io/gguf_bpe_vocab.h
//   preprocessor_config.json  Qwen2VLImageProcessor with the mmproj's patch size, merge, mean
//                 and std; llama.cpp's metadata has no min/max pixels (clip.cpp uses 8..4096
//                 image tokens): ocular uses the released Qwen2-VL / Qwen2.5-VL Instruct
//                 checkpoints' (min_pixels 3136, max_pixels 12845056), BICUBIC, rescale 1/255
// Qwen3-VL ("qwen3vl" + "qwen3vl_merger"): text_config as above from the "qwen3vl.*" keys plus
//   head_dim (attention.key_length; value_length must equal it), attention_bias (blk.0.attn_q
//   has a bias), rope_scaling {rope_type default, mrope_section, mrope_interleaved} (llama.cpp
//   always interleaves, as Qwen3VLTextRotaryEmbedding); vision_config: width, depth, heads,
//   patch, merge, intermediate_size (feed_forward_length), out_hidden_size (projection_dim),
//   num_position_embeddings (v.position_embd's rows, a square of image_size / patch_size),
//   deepstack_visual_indexes (clip.vision.is_deepstack_layers), gelu_pytorch_tanh
//   (clip.use_gelu); qwen3vl.n_deepstack_layers must equal the mmproj's count. Preprocessing:
//   the released Qwen3-VL Instruct checkpoints' size (shortest_edge 65536, longest_edge
//   16777216), BICUBIC, rescale 1/255, the mmproj's mean / std.
// Refused (kUnimplemented, naming the key): unknown qwen2vl.* / qwen3vl.* keys, a fourth rope
// section, a vision norm epsilon other than transformers' 1e-6 (the converter writes the text
// model's rms_norm_eps there), window attention that n_wa_pattern cannot say for the depth.
#pragma once

#include <memory>

#include "core/file_set.h"
#include "io/gguf.h"
#include "io/model_files.h"
#include "io/tensor_source.h"
#include "models/qwen2vl/config.h"
#include "models/qwen2vl/config3.h"
#include "ocular/status.h"

namespace ocular::qwen2vl {

// The side files of the text GGUF `gguf` with its mmproj (null: refused, Qwen-VL's text GGUF
// is run with its vision encoder only).
StatusOr<std::unique_ptr<FileSet>> LlamaCppFiles(const GgufFile& gguf, const GgufFile* mmproj);

// The tensors of the pair by HF name (as qwen2vl.cc binds them). The converter splits what HF
// fuses; they are joined back (f32 copies for the patch embedding, the stored format for the
// rest): visual.patch_embed.proj.weight [D, 3, 2, p, p] from v.patch_embd.weight and
// v.patch_embd.weight.1 (the Conv3d's two temporal halves), attn.qkv.weight / bias from
// attn_q, attn_k, attn_v (rows one after the other).
StatusOr<std::unique_ptr<TensorSource>> LlamaCppTensors(const ModelFiles& files,
                                                        const Qwen2VLConfig& cfg);
// Qwen3-VL's: the patch embedding joined the same way (model.visual.patch_embed.proj.weight);
// attn_qkv is stored fused; v.deepstack.L.* (L the ViT block) read as
// model.visual.deepstack_merger_list.K.* (K its place in deepstack_visual_indexes).
StatusOr<std::unique_ptr<TensorSource>> LlamaCppTensors(const ModelFiles& files,
                                                        const Qwen3VLConfig& cfg);

}  // namespace ocular::qwen2vl

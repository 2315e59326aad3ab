// Internal to models/: the HF <-> GGUF tensor-name tables of the families' gguf_names.cc.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf_source.h"
#include "models/weights.h"

namespace ocular::gguf_rename {

// One rename: a name (or a name's prefix) in HF's spelling and in GGUF's.
struct Rename {
  const char* hf;
  const char* gguf;
};

bool StartsWith(std::string_view s, std::string_view prefix);

// Within a Llama-style decoder layer, llama.cpp's names (gguf-py TensorNameMap) of what every
// family's layer has by the same HF name; weights and biases alike. The norm after attention
// differs: a family passes its own as RenameLayer's `extra`.
inline constexpr Rename kLlamaLayer[] = {
    {"input_layernorm.", "attn_norm."},    {"self_attn.q_proj.", "attn_q."},
    {"self_attn.k_proj.", "attn_k."},      {"self_attn.v_proj.", "attn_v."},
    {"self_attn.o_proj.", "attn_output."}, {"self_attn.q_norm.", "attn_q_norm."},
    {"self_attn.k_norm.", "attn_k_norm."}, {"mlp.gate_proj.", "ffn_gate."},
    {"mlp.up_proj.", "ffn_up."},           {"mlp.down_proj.", "ffn_down."},
};
// post_attention_layernorm as the norm before the MLP (Llama, Qwen, Gemma 1).
inline constexpr Rename kPreMlpNorm[] = {{"post_attention_layernorm.", "ffn_norm."}};
// Gemma 2 and Gemma 3's four norms a layer (sandwich).
inline constexpr Rename kSandwichNorms[] = {
    {"post_attention_layernorm.", "post_attention_norm."},
    {"pre_feedforward_layernorm.", "ffn_norm."},
    {"post_feedforward_layernorm.", "post_ffw_norm."},
};

// hf with the first prefix of `table` it starts with replaced by its GGUF spelling
// ("<r.hf>rest" -> "<r.gguf>rest"); "" if none.
std::string RenamePrefix(const std::string& hf, std::span<const Rename> table);

// "<prefix><i>.<rest>" -> "<out><i>.<renamed rest>", rest renamed by RenamePrefix through
// `table`, then `extra`; "" if hf is not a layer's or no entry matches.
std::string RenameLayer(const std::string& hf, std::string_view prefix, std::string_view out,
                        std::span<const Rename> table, std::span<const Rename> extra = {});

// A decoder's tensor under the first of `prefixes` it starts with ("model."): embed_tokens ->
// token_embd, norm -> output_norm, "layers.<i>.<rest>" -> "blk.<i>.<rest>" renamed by
// kLlamaLayer, then `norms`; "" if none matches.
std::string RenameDecoder(const std::string& hf, std::initializer_list<const char*> prefixes,
                          std::span<const Rename> norms);

// The GGUF names of every tensor ForEachTensor(cfg, Weights*) visits (found by argument-dependent
// lookup in the family's namespace), in module order: {hf, rename(hf), shifted(hf)}.
template <typename Weights, typename Config>
std::vector<GgufName> CollectNames(
    const Config& cfg, const std::function<std::string(const std::string&)>& rename,
    const std::function<bool(const std::string&)>& shifted = nullptr) {
  std::vector<GgufName> out;
  Weights scratch;
  (void)ForEachTensor(cfg, &scratch, [&](const std::string& name, const Shape&, WeightSlot, bool) {
    out.push_back({name, rename(name), shifted != nullptr && shifted(name)});
    return Status::Ok();
  });
  return out;
}

}  // namespace ocular::gguf_rename

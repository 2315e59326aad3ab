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

// hf with the first prefix of `table` it starts with replaced by its GGUF spelling
// ("<r.hf>rest" -> "<r.gguf>rest"); "" if none.
std::string RenamePrefix(const std::string& hf, std::span<const Rename> table);

// "<prefix><i>.<rest>" -> "<out><i>.<renamed rest>", rest renamed by RenamePrefix through
// `table`, then `extra`; "" if hf is not a layer's or no entry matches.
std::string RenameLayer(const std::string& hf, std::string_view prefix, std::string_view out,
                        std::span<const Rename> table, std::span<const Rename> extra = {});

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

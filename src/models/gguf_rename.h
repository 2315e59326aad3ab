// Internal to models/: the HF <-> GGUF tensor-name tables of the families' gguf_names.cc.
#pragma once

#include <span>
#include <string>
#include <string_view>

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

}  // namespace ocular::gguf_rename

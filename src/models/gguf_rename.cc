#include "models/gguf_rename.h"

#include <cstring>

namespace ocular::gguf_rename {

bool StartsWith(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }

std::string RenamePrefix(const std::string& hf, std::span<const Rename> table) {
  for (const Rename& r : table) {
    if (StartsWith(hf, r.hf)) return r.gguf + hf.substr(std::strlen(r.hf));
  }
  return "";
}

std::string RenameLayer(const std::string& hf, std::string_view prefix, std::string_view out,
                        std::span<const Rename> table, std::span<const Rename> extra) {
  if (!StartsWith(hf, prefix)) return "";
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string index = hf.substr(prefix.size(), dot - prefix.size());
  const std::string rest = hf.substr(dot + 1);
  for (std::span<const Rename> t : {table, extra}) {
    if (std::string renamed = RenamePrefix(rest, t); !renamed.empty()) {
      return std::string(out) + index + "." + renamed;
    }
  }
  return "";
}

std::string RenameDecoder(const std::string& hf, std::initializer_list<const char*> prefixes,
                          std::span<const Rename> norms) {
  for (const char* prefix : prefixes) {
    if (!StartsWith(hf, prefix)) continue;
    const std::string rest = hf.substr(std::strlen(prefix));
    if (rest == "embed_tokens.weight") return "token_embd.weight";
    if (rest == "norm.weight") return "output_norm.weight";
    return RenameLayer(rest, "layers.", "blk.", kLlamaLayer, norms);
  }
  return "";
}

}  // namespace ocular::gguf_rename

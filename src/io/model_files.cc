#include "io/model_files.h"

#include <filesystem>

namespace ocular {

namespace {
std::string Key(std::string_view name) { return kGgufFilePrefix + std::string(name); }
}  // namespace

bool GgufFiles::Has(std::string_view name) const { return gguf_->Find(Key(name)) != nullptr; }

StatusOr<std::string> GgufFiles::Read(std::string_view name, int64_t max_bytes,
                                      std::string_view component) const {
  const GgufValue* v = gguf_->Find(Key(name));
  if (v == nullptr)
    return Error(StatusCode::kNotFound, component, Where(name), ": not in the file");
  std::string_view bytes;
  if (v->type == GgufType::kString) {
    bytes = v->str;
  } else {
    StatusOr<std::string_view> b = gguf_->GetBytes(Key(name));
    if (!b.ok()) {
      return Error(StatusCode::kDataLoss, component, Where(name),
                   ": metadata is neither a string nor an array of bytes");
    }
    bytes = *b;
  }
  if (static_cast<int64_t>(bytes.size()) > max_bytes) {
    return Error(StatusCode::kResourceExhausted, component, Where(name), ": ", bytes.size(),
                 " bytes, over the limit of ", max_bytes, " bytes for this file");
  }
  return std::string(bytes);
}

std::string GgufFiles::Where(std::string_view name) const {
  return gguf_->origin() + ":" + std::string(name);
}

StatusOr<std::string> MemoryFiles::Read(std::string_view name, int64_t max_bytes,
                                        std::string_view component) const {
  const auto it = files_.find(name);
  if (it == files_.end())
    return Error(StatusCode::kNotFound, component, Where(name), ": not in the file");
  if (static_cast<int64_t>(it->second.size()) > max_bytes) {
    return Error(StatusCode::kResourceExhausted, component, Where(name), ": ", it->second.size(),
                 " bytes, over the limit of ", max_bytes, " bytes for this file");
  }
  return it->second;
}

std::string MemoryFiles::Where(std::string_view name) const {
  return origin_ + ":" + std::string(name);
}

StatusOr<ModelFiles> ModelFiles::Open(const std::string& path, const GgufAdapter& adapter) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  ModelFiles out;
  out.path = path;
  if (fs::is_directory(st)) {
    out.files = std::make_unique<DirectoryFiles>(path);
    return out;
  }
  if (!fs::exists(st))
    return Error(StatusCode::kNotFound, "model", path, ": no such file or directory");
  if (!fs::is_regular_file(st) || !GgufFile::HasMagic(path)) {
    return Error(StatusCode::kIoError, "model", path,
                 ": neither a model directory (config.json + safetensors) nor a GGUF file");
  }
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
  out.gguf = std::move(gguf);
  out.files = std::make_unique<GgufFiles>(out.gguf);
  if (!out.files->Has("config.json") && adapter) {
    OCULAR_ASSIGN_OR_RETURN(out.files, adapter(*out.gguf));
    out.llamacpp = true;
    return out;
  }
  if (!out.files->Has("config.json")) {
    StatusOr<std::string_view> arch = out.gguf->GetString("general.architecture");
    return Error(StatusCode::kUnimplemented, "gguf", path, ": a GGUF model of architecture '",
                 arch.ok() ? std::string(*arch) : std::string("?"),
                 "' without ocular's embedded configuration (", kGgufFilePrefix,
                 "config.json); ocular runs GGUF files written by `ocular quantize`");
  }
  return out;
}

}  // namespace ocular

#include "io/model_files.h"

#include <filesystem>

#include "io/mmproj.h"

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

namespace {

// The mmproj file given with a model at `path`, which must be a llama.cpp text GGUF.
StatusOr<std::shared_ptr<const GgufFile>> OpenMmproj(const std::string& mmproj,
                                                     const std::string& path, bool is_gguf) {
  namespace fs = std::filesystem;
  if (!is_gguf) {
    return Error(StatusCode::kInvalidArgument, "model", path,
                 ": --mmproj pairs an mmproj file with a llama.cpp text GGUF; a model ",
                 "directory holds its vision tower itself");
  }
  std::error_code ec;
  if (!fs::exists(mmproj, ec)) {
    return Error(StatusCode::kNotFound, "mmproj", mmproj, ": no such file");
  }
  if (!fs::is_regular_file(mmproj, ec) || !GgufFile::HasMagic(mmproj)) {
    return Error(StatusCode::kInvalidArgument, "mmproj", mmproj, ": not a GGUF file");
  }
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(mmproj));
  if (!IsMmproj(*file)) {
    StatusOr<std::string_view> arch = file->GetString("general.architecture");
    return Error(StatusCode::kInvalidArgument, "mmproj", mmproj,
                 ": not an mmproj file (general.architecture is '",
                 arch.ok() ? std::string(*arch) : std::string("?"), "', an mmproj's is 'clip')");
  }
  return std::shared_ptr<const GgufFile>(std::move(file));
}

}  // namespace

StatusOr<ModelFiles> ModelFiles::Open(const std::string& path, const GgufAdapter& adapter,
                                      const std::string& mmproj) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  ModelFiles out;
  out.path = path;
  if (fs::is_directory(st)) {
    if (!mmproj.empty()) return OpenMmproj(mmproj, path, false).status();
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
  if (IsMmproj(*out.gguf)) {
    return Error(StatusCode::kInvalidArgument, "model", path,
                 ": is an mmproj file (a vision encoder); give the text GGUF as the model and "
                 "this file as --mmproj");
  }
  if (!mmproj.empty()) {
    if (out.files->Has("config.json")) {
      return Error(StatusCode::kInvalidArgument, "model", path,
                   ": --mmproj pairs an mmproj file with a llama.cpp text GGUF; this file is ",
                   "ocular's own (`ocular quantize`) and holds its vision tower itself");
    }
    OCULAR_ASSIGN_OR_RETURN(out.mmproj, OpenMmproj(mmproj, path, true));
  }
  if (!out.files->Has("config.json") && adapter) {
    OCULAR_ASSIGN_OR_RETURN(out.files, adapter(*out.gguf, out.mmproj.get()));
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

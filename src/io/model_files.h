// Opens what users pass as a model: an HF directory (config.json, tokenizer and preprocessor
// files, safetensors weights) or one GGUF file written by `ocular quantize`, which carries
// the same small files in its metadata as "ocular.file.<name>" (a string, or an array of u8
// for binary files such as tokenizer.model) next to its tensors.
#pragma once

#include <memory>
#include <string>

#include "core/file_set.h"
#include "io/gguf.h"
#include "ocular/status.h"

namespace ocular {

// Metadata key prefix of the side files in ocular's GGUF files.
inline constexpr const char* kGgufFilePrefix = "ocular.file.";

struct ModelFiles {
  std::string path;
  std::unique_ptr<FileSet> files;
  std::shared_ptr<const GgufFile> gguf;  // null for a directory

  // kNotFound (nothing there), kIoError (neither a directory nor a GGUF file),
  // kDataLoss (a corrupt GGUF), kUnimplemented (a GGUF without ocular's embedded config,
  // e.g. one converted by llama.cpp).
  static StatusOr<ModelFiles> Open(const std::string& path);
};

// The side files of a GGUF file.
class GgufFiles final : public FileSet {
 public:
  explicit GgufFiles(std::shared_ptr<const GgufFile> gguf) : gguf_(std::move(gguf)) {}
  const std::string& origin() const override { return gguf_->origin(); }
  bool Has(std::string_view name) const override;
  StatusOr<std::string> Read(std::string_view name, int64_t max_bytes,
                             std::string_view component) const override;
  std::string Where(std::string_view name) const override;

 private:
  std::shared_ptr<const GgufFile> gguf_;
};

}  // namespace ocular

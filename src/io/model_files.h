// Opens what users pass as a model: an HF directory (config.json, tokenizer and preprocessor
// files, safetensors weights) or one GGUF file. A GGUF file written by `ocular quantize`
// carries the same small files in its metadata as "ocular.file.<name>" (a string, or an array
// of u8 for binary files such as tokenizer.model) next to its tensors. A GGUF file converted
// by llama.cpp carries instead "<architecture>.*" hyperparameters and a "tokenizer.ggml.*"
// vocabulary; a GgufAdapter (the model registry's) builds the side files from them. Such a
// text file may come with llama.cpp's mmproj file (io/mmproj.h), which holds the vision
// encoder and projector: the adapter then builds the side files of the multimodal model from
// both files' metadata.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/file_set.h"
#include "io/gguf.h"
#include "ocular/status.h"

namespace ocular {

// Metadata key prefix of the side files in ocular's GGUF files.
inline constexpr const char* kGgufFilePrefix = "ocular.file.";

// The side files (config.json, tokenizer.model, ...) of a GGUF file without ocular's
// embedded ones, built from its metadata and, when not null, its mmproj file's;
// kUnimplemented for an architecture it cannot read.
using GgufAdapter =
    std::function<StatusOr<std::unique_ptr<FileSet>>(const GgufFile& gguf, const GgufFile* mmproj)>;

struct ModelFiles {
  std::string path;
  std::unique_ptr<FileSet> files;
  std::shared_ptr<const GgufFile> gguf;  // null for a directory
  // A GGUF file converted by llama.cpp (its side files built by the adapter): its norm
  // weights are stored as 1 + w (io/gguf_source.h).
  bool llamacpp = false;
  // llama.cpp's mmproj file paired with the text GGUF (--mmproj); null without one.
  std::shared_ptr<const GgufFile> mmproj;

  // kNotFound (nothing there), kIoError (neither a directory nor a GGUF file),
  // kDataLoss (a corrupt GGUF), kUnimplemented (a GGUF without ocular's embedded config
  // when there is no `adapter`, or the adapter's refusal). `mmproj` (optional): an mmproj
  // file to pair with a llama.cpp text GGUF; kInvalidArgument with a model directory, an
  // ocular GGUF (their vision tower is in them), or a file that is not an mmproj.
  static StatusOr<ModelFiles> Open(const std::string& path, const GgufAdapter& adapter = nullptr,
                                   const std::string& mmproj = "");
};

// Side files held in memory (those an adapter builds), by name.
class MemoryFiles final : public FileSet {
 public:
  MemoryFiles(std::string origin, std::map<std::string, std::string, std::less<>> files)
      : origin_(std::move(origin)), files_(std::move(files)) {}
  const std::string& origin() const override { return origin_; }
  bool Has(std::string_view name) const override { return files_.find(name) != files_.end(); }
  StatusOr<std::string> Read(std::string_view name, int64_t max_bytes,
                             std::string_view component) const override;
  std::string Where(std::string_view name) const override;

 private:
  std::string origin_;
  std::map<std::string, std::string, std::less<>> files_;
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

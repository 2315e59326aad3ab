// A model's small side files by name ("config.json", "tokenizer.json",
// "preprocessor_config.json", ...): the files of a directory, or those a GGUF file written
// by `ocular quantize` carries in its metadata (io/model_files.h). Loaders read through this
// interface, so one code path parses a configuration wherever it is stored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ocular/status.h"

namespace ocular {

class FileSet {
 public:
  virtual ~FileSet() = default;
  // The directory or file, for messages.
  virtual const std::string& origin() const = 0;
  // True if `name` is present. In a directory that is anything by that name (a FIFO, a
  // dangling link): it is then read, and Read reports what is wrong with it, rather than a
  // loader silently falling back to another file.
  virtual bool Has(std::string_view name) const = 0;
  // The bytes of `name` (at most `max_bytes`), as ReadFileBounded: errors tagged `component`
  // and naming Where(name); kNotFound if absent.
  virtual StatusOr<std::string> Read(std::string_view name, int64_t max_bytes,
                                     std::string_view component) const = 0;
  // "dir/name", or "file.gguf:name", for messages.
  virtual std::string Where(std::string_view name) const = 0;
};

// The files of directory `dir`.
class DirectoryFiles final : public FileSet {
 public:
  explicit DirectoryFiles(std::string dir) : dir_(std::move(dir)) {}
  const std::string& origin() const override { return dir_; }
  bool Has(std::string_view name) const override;
  StatusOr<std::string> Read(std::string_view name, int64_t max_bytes,
                             std::string_view component) const override;
  std::string Where(std::string_view name) const override;

 private:
  std::string dir_;
};

}  // namespace ocular

// Safetensors reader (memory-mapped, fully validated) and writer.
//
// Format: u64 little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}
// then the data section; offsets are relative to its start.
// Model files are untrusted input: every header field is checked before use.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"
#include "ocular/status.h"

namespace ocular {

class SafetensorsFile {
 public:
  // Maps and validates `path`: header size sane, JSON well-formed, dtypes known, shapes
  // non-negative, byte size == numel * dtype size, offsets inside the data section and
  // non-overlapping. Errors are tagged [safetensors] and name the file and tensor.
  static StatusOr<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const MappedFile& mapping() const { return file_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr if absent.
  const TensorView* Find(const std::string& name) const;

 private:
  MappedFile file_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to be written: bytes are copied from `data` (dtype, shape as given).
struct NamedTensor {
  std::string name;
  TensorView view;
};

// Writes a safetensors file with tensors in the given order and string metadata.
Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace ocular

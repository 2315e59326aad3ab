// Read-only memory-mapped file (RAII, movable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ocular/status.h"

namespace ocular {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the path and the OS reason.
  static StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Whether [p, p + n) lies inside the mapping.
  bool Contains(const void* p, size_t n) const;
  // Drops the whole pages inside [p, p + n) from memory (madvise MADV_DONTNEED: a later read
  // maps them from the file again). Nothing unless Contains(p, n).
  void ReleasePages(const void* p, size_t n) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole small regular file into a string: ReadFileBounded(path, kMaxConfigFileBytes,
// "io") from core/file_io.h, which callers should prefer (it names their component).
StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace ocular

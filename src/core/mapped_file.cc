#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/file_io.h"

namespace ocular {

StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever; it is then refused
  // as not a regular file. (Regular files ignore the flag.)
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    return Error(errno == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError, "io", path,
                 ": cannot open: ", std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(StatusCode::kIoError, "io", path,
                 ": not a regular file (a directory, FIFO or device cannot be read as one)");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return Error(StatusCode::kIoError, "io", path, ": mmap failed: ", std::strerror(err));
    }
    f.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = o.data_;
    size_ = o.size_;
    path_ = std::move(o.path_);
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

bool MappedFile::Contains(const void* p, size_t n) const {
  const auto* b = static_cast<const uint8_t*>(p);
  return data_ != nullptr && b >= data_ && n <= size_ &&
         static_cast<size_t>(b - data_) <= size_ - n;
}

void MappedFile::ReleasePages(const void* p, size_t n) const {
  if (!Contains(p, n)) return;
  const auto* b = static_cast<const uint8_t*>(p);
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(b) + page - 1) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(b) + n) & ~(page - 1);
  if (lo < hi) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

StatusOr<std::string> ReadFileToString(const std::string& path) {
  return ReadFileBounded(path, kMaxConfigFileBytes, "io");
}

}  // namespace ocular

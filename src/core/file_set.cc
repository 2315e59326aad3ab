#include "core/file_set.h"

#include <filesystem>

#include "core/file_io.h"

namespace ocular {

bool DirectoryFiles::Has(std::string_view name) const {
  std::error_code ec;
  const auto type = std::filesystem::symlink_status(Where(name), ec).type();
  return !ec && type != std::filesystem::file_type::not_found;
}

StatusOr<std::string> DirectoryFiles::Read(std::string_view name, int64_t max_bytes,
                                           std::string_view component) const {
  return ReadFileBounded(Where(name), max_bytes, component);
}

std::string DirectoryFiles::Where(std::string_view name) const {
  return (std::filesystem::path(dir_) / name).string();
}

}  // namespace ocular

#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace ocular {

void HugePagesFree::operator()(std::byte* p) const { std::free(p); }

HugePages AllocateHugePages(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20, kPage = size_t{4} << 10;
  if (bytes == 0 || bytes > SIZE_MAX - kHuge) return nullptr;
  void* p = nullptr;
  if (::posix_memalign(&p, kHuge, bytes) != 0) return nullptr;
  const char* env = std::getenv("OCULAR_HUGE_PAGES");
  if (env == nullptr || std::string_view(env) != "0") {
    ::madvise(p, (bytes + kPage - 1) / kPage * kPage, MADV_HUGEPAGE);  // advice: failure is fine
  }
  return HugePages(static_cast<std::byte*>(p));
}

}  // namespace ocular

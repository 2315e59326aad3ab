#include "core/weight_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace ocular {

void HugePagesFree::operator()(std::byte* p) const { std::free(p); }

HugePages AllocateHugePages(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20, kPage = size_t{4} << 10;
  if (bytes == 0 || bytes > SIZE_MAX - kHuge) return nullptr;
  void* p = nullptr;
  if (::posix_memalign(&p, kHuge, bytes) != 0) return nullptr;
  ::madvise(p, (bytes + kPage - 1) / kPage * kPage, MADV_HUGEPAGE);  // advice: failure is fine
  return HugePages(static_cast<std::byte*>(p));
}

namespace {
thread_local bool t_no_copies = false;
}  // namespace

NoWeightCopies::NoWeightCopies() : saved_(t_no_copies) { t_no_copies = true; }
NoWeightCopies::~NoWeightCopies() { t_no_copies = saved_; }

bool CopyWeightsOutOfFiles(size_t bytes) {
  const char* env = std::getenv("OCULAR_MMAP_WEIGHTS");
  if (t_no_copies || (env != nullptr && std::string_view(env) == "1")) return false;
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return false;
  unsigned long long kib = 0;
  char line[256];
  bool found = false;
  while (!found && std::fgets(line, sizeof(line), f) != nullptr) {
    found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
  }
  std::fclose(f);
  return found && bytes + (size_t{1} << 30) <= kib * 1024;
}

}  // namespace ocular

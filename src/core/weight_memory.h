// Weights in memory of their own rather than read through a file mapping: loaders copy each
// large matrix (or pack it into a kernel's layout) into anonymous memory that Linux may back
// with 2 MiB pages (madvise MADV_HUGEPAGE, honoured when transparent huge pages are "always"
// or "madvise") and give the file's pages back. Streaming 16 weight rows at once through 4 KiB
// pages of a mapping costs TLB misses: measured on a 2-vCPU Sapphire Rapids VM, PaliGemma 2 3B
// decode 10-23 % and its AMX prefill 25-31 % faster from such copies (docs/quantization.md).
#pragma once

#include <cstddef>
#include <memory>

namespace ocular {

struct HugePagesFree {
  void operator()(std::byte* p) const;
};
using HugePages = std::unique_ptr<std::byte[], HugePagesFree>;

// `bytes` bytes (uninitialized) aligned to 2 MiB with the huge-page advice; null if the
// allocation fails.
HugePages AllocateHugePages(size_t bytes);

// Whether a loader should place `bytes` of weights in memory of its own: not under
// OCULAR_MMAP_WEIGHTS=1 (every weight is read from the file mapping, as before: memory the
// kernel can reclaim, for models near the size of RAM), nor when the bytes plus 1 GiB exceed
// the memory the system has available (/proc/meminfo MemAvailable).
bool CopyWeightsOutOfFiles(size_t bytes);

// While one is alive, CopyWeightsOutOfFiles says no on this thread: loads that read the
// weights once (ocular quantize's) keep them in the mapping.
class NoWeightCopies {
 public:
  NoWeightCopies();
  ~NoWeightCopies();
  NoWeightCopies(const NoWeightCopies&) = delete;
  NoWeightCopies& operator=(const NoWeightCopies&) = delete;

 private:
  bool saved_;
};

}  // namespace ocular

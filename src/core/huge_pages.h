// Large read-mostly buffers (weights in a kernel's layout) that Linux may back with 2 MiB pages
// (madvise MADV_HUGEPAGE, honoured when transparent huge pages are "always" or "madvise"):
// 512 times fewer page faults to fill them and fewer TLB misses to stream them.
#pragma once

#include <cstddef>
#include <memory>

namespace ocular {

struct HugePagesFree {
  void operator()(std::byte* p) const;
};
using HugePages = std::unique_ptr<std::byte[], HugePagesFree>;

// `bytes` bytes (uninitialized) aligned to 2 MiB; null if the allocation fails. The
// environment variable OCULAR_HUGE_PAGES=0 leaves out the advice: on VMs whose host hands
// out memory lazily, the first touches of fresh 2 MiB pages can be slow (measured: ~7 s more
// to load a 2.8 GB q8_0 decoder on a 2-vCPU Sapphire Rapids VM, for a decode 10 % faster).
HugePages AllocateHugePages(size_t bytes);

}  // namespace ocular

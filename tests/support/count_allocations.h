// Counts heap allocations by replacing the global operator new (tests of allocation-free
// paths). Include it in exactly one translation unit of a test binary: it defines the
// replacements. Under AddressSanitizer the sanitizer owns operator new (replacing it again
// mixes its allocator with ours), so nothing is replaced there and OCULAR_COUNT_ALLOCATIONS is
// 0: tests skip themselves.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "support/sanitizer.h"

#define OCULAR_COUNT_ALLOCATIONS (!OCULAR_ASAN)

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

#if OCULAR_COUNT_ALLOCATIONS
// The replacements pair malloc with free themselves; GCC cannot see that through the names.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
#endif

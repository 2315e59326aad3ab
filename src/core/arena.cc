#include "core/arena.h"

#include <cstdio>
#include <cstdlib>
#include <new>

#include "core/check.h"

namespace ocular {

void Arena::FreeDeleter::operator()(void* p) const { std::free(p); }

void Arena::Reserve(size_t capacity_bytes) {
  OCULAR_CHECK(used_ == 0, "HINT: Reserve with scratch still taken");
  const size_t bytes = Rounded(capacity_bytes);
  if (bytes <= capacity_) return;
  buffer_.reset(bytes > 0 ? std::aligned_alloc(kAlign, bytes) : nullptr);
  if (bytes > 0 && buffer_ == nullptr) {
    // Out of memory, as operator new reports it (std::vector's growth throws the same), so
    // that Engine::Load can name it (exit 6) instead of aborting; the arena stays empty.
    capacity_ = 0;
    throw std::bad_alloc();
  }
  capacity_ = bytes;
}

void* Arena::Take(size_t bytes) {
  const size_t need = Rounded(bytes);
  if (need > capacity_ - used_) {
    std::fprintf(stderr, "ocular: workspace plan too small: need %zu bytes, planned %zu\n",
                 used_ + need, capacity_);
    OCULAR_CHECK(need <= capacity_ - used_, "HINT: the workspace plan under-counted");
  }
  void* p = static_cast<char*>(buffer_.get()) + used_;
  used_ += need;
  if (used_ > high_water_) high_water_ = used_;
  return p;
}

}  // namespace ocular

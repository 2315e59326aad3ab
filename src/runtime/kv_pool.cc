#include "runtime/kv_pool.h"

#include <algorithm>
#include <new>

namespace ocular {

KvHandle::KvHandle(KvHandle&& o) noexcept { *this = std::move(o); }

KvHandle& KvHandle::operator=(KvHandle&& o) noexcept {
  if (this != &o) {
    Release();
    pool_ = o.pool_;
    memory_ = std::move(o.memory_);
    bytes_ = o.bytes_;
    cache_ = std::move(o.cache_);
    o.pool_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

KvHandle::~KvHandle() { Release(); }

void KvHandle::Release() {
  if (pool_ != nullptr && memory_) pool_->Return(std::move(memory_), bytes_);
  pool_ = nullptr;
  bytes_ = 0;
}

KvPool::KvPool(KvLayout layout, KvDType dtype, size_t max_bytes)
    : layout_(std::move(layout)), dtype_(dtype), max_bytes_(max_bytes) {
  // Returning a cache does not allocate while few blocks are pooled: a sequence that finishes
  // in the batch frees its cache while the others keep decoding allocation-free.
  free_.reserve(64);
}

StatusOr<KvHandle> KvPool::Acquire(int64_t capacity, int64_t image_rows) {
  if (capacity < 1) return Error(StatusCode::kInvalidArgument, "kv", "capacity must be >= 1");
  const size_t bytes = BytesFor(capacity, image_rows);
  KvHandle h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (max_bytes_ > 0 && in_use_ + bytes > max_bytes_) {
      return Error(StatusCode::kResourceExhausted, "kv", "a ", capacity, "-token cache needs ",
                   bytes, " bytes; ", in_use_, " of the ", max_bytes_,
                   "-byte KV budget are in use");
    }
    // The smallest released block that fits.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->first >= bytes && (best == free_.end() || it->first < best->first)) best = it;
    }
    if (best != free_.end()) {
      h.bytes_ = best->first;
      h.memory_ = std::move(best->second);
      free_.erase(best);
    }
    in_use_ += h.memory_ ? h.bytes_ : bytes;
  }
  if (!h.memory_) {
    h.memory_.reset(new (std::nothrow) std::byte[bytes + 64]);
    if (!h.memory_) {
      std::lock_guard<std::mutex> lock(mu_);
      in_use_ -= bytes;
      return Error(StatusCode::kResourceExhausted, "kv", "out of memory for a ", capacity,
                   "-token cache (", bytes, " bytes)");
    }
    h.bytes_ = bytes;
  }
  h.pool_ = this;
  // 64-byte aligned start inside the block.
  std::byte* base = h.memory_.get();
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  h.cache_ = KvCache(layout_, capacity, dtype_, base, image_rows);
  return h;
}

void KvPool::Return(std::unique_ptr<std::byte[]> memory, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= bytes;
  free_.emplace_back(bytes, std::move(memory));
}

size_t KvPool::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

size_t KvPool::bytes_cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [b, m] : free_) n += b;
  return n;
}

}  // namespace ocular

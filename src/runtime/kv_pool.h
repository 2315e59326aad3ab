// KvPool: the memory of every sequence's KV cache, in one budget. A sequence acquires a cache
// when it joins (sized for its prompt + new tokens; sliding-window layers as rings of the
// window) and returns it when it leaves; released blocks are reused, so a steady stream of
// requests stops allocating. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "models/kv_cache.h"
#include "ocular/status.h"

namespace ocular {

class KvPool;

// A sequence's cache; returns its memory to the pool on destruction. Movable.
class KvHandle {
 public:
  KvHandle() = default;
  KvHandle(KvHandle&&) noexcept;
  KvHandle& operator=(KvHandle&&) noexcept;
  KvHandle(const KvHandle&) = delete;
  KvHandle& operator=(const KvHandle&) = delete;
  ~KvHandle();

  KvCache* cache() { return &cache_; }
  const KvCache* cache() const { return &cache_; }
  size_t bytes() const { return bytes_; }

 private:
  friend class KvPool;
  void Release();
  KvPool* pool_ = nullptr;
  std::unique_ptr<std::byte[]> memory_;
  size_t bytes_ = 0;
  KvCache cache_;
};

class KvPool {
 public:
  // max_bytes: the budget for caches in use (0 = unlimited).
  KvPool(KvLayout layout, KvDType dtype, size_t max_bytes = 0);

  // A cache for up to `capacity` tokens. ResourceExhausted when it would exceed the budget.
  // `image_rows`: the feature rows of the request's images, for the cross-attention layers of
  // the layout (if any).
  StatusOr<KvHandle> Acquire(int64_t capacity, int64_t image_rows = 0);

  KvDType dtype() const { return dtype_; }
  const KvLayout& layout() const { return layout_; }
  size_t BytesFor(int64_t capacity, int64_t image_rows = 0) const {
    return layout_.Bytes(capacity, dtype_, image_rows);
  }
  size_t bytes_in_use() const;
  size_t bytes_cached() const;  // released blocks kept for reuse

 private:
  friend class KvHandle;
  void Return(std::unique_ptr<std::byte[]> memory, size_t bytes);

  const KvLayout layout_;
  const KvDType dtype_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  size_t in_use_ = 0;
  std::vector<std::pair<size_t, std::unique_ptr<std::byte[]>>> free_;  // (bytes, block)
};

}  // namespace ocular

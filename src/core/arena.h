// Arena: a bump allocator over one buffer allocated once (at plan time), so forward passes
// take their scratch without touching the heap. Scratch is taken in LIFO scopes:
//
//   ArenaScope scope(arena);            // frees everything taken below on destruction
//   float* q = arena.Floats(rows * qdim);
//
// Running out of planned space is a planning bug (the plan under-counted), not a user error:
// it fails a CHECK naming both numbers. Allocations are 64-byte aligned and uninitialised.
// Thread-safety: none; an Arena belongs to one execution context at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ocular {

class Arena {
 public:
  static constexpr size_t kAlign = 64;

  Arena() = default;
  explicit Arena(size_t capacity_bytes) { Reserve(capacity_bytes); }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Replaces the buffer with one of at least `capacity_bytes`. REQUIRES: nothing taken.
  void Reserve(size_t capacity_bytes);

  // n uninitialised elements, 64-byte aligned.
  template <typename T>
  T* Alloc(int64_t n) {
    return static_cast<T*>(Take(static_cast<size_t>(n) * sizeof(T)));
  }
  float* Floats(int64_t n) { return Alloc<float>(n); }

  size_t mark() const { return used_; }
  void Reset(size_t mark) { used_ = mark; }
  size_t capacity() const { return capacity_; }
  size_t high_water() const { return high_water_; }

  // Bytes one Alloc of `bytes` consumes (rounded up to the alignment): for planning.
  static constexpr size_t Rounded(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

 private:
  void* Take(size_t bytes);

  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, FreeDeleter> buffer_;
  size_t capacity_ = 0;
  size_t used_ = 0;
  size_t high_water_ = 0;
};

// Restores the arena's mark on scope exit.
class ArenaScope {
 public:
  explicit ArenaScope(Arena& arena) : arena_(arena), mark_(arena.mark()) {}
  ~ArenaScope() { arena_.Reset(mark_); }
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  Arena& arena_;
  size_t mark_;
};

}  // namespace ocular

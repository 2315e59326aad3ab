// Scratch a block takes, declared once and used twice: to run (taking from the Exec's arena)
// and to plan (counting the same takes). A block lists its buffers in one struct whose
// constructor takes them from a Scratch:
//
//   struct MlpBuffers {
//     MlpBuffers(Scratch& s, const MlpSpec& m, int64_t rows)
//         : gate(s.Floats(rows * m.inner)), up(s.Floats(rows * m.inner)) {}
//     float* gate; float* up;
//   };
//   // run:  Scratch s(ex.arena); MlpBuffers b(s, m, rows);
//   // plan: Scratch s;           MlpBuffers b(s, m, rows);  s.bytes() + what its ops take
//
// so the planned size is the size of what runs: a buffer added to a block is counted by
// construction. The ops a block calls take their own scratch below the block's (innermost,
// one at a time): a block's plan adds the largest of them (ops::...ArenaFloats).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "core/arena.h"

namespace ocular::blocks {

class Scratch {
 public:
  // Counting: takes return nullptr, bytes() is what they would take.
  Scratch() = default;
  // Taking from `arena`; everything taken is returned on destruction (LIFO, as ArenaScope).
  explicit Scratch(Arena& arena) : arena_(&arena), mark_(arena.mark()) {}
  ~Scratch() {
    if (arena_ != nullptr) arena_->Reset(mark_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  template <typename T>
  T* Take(int64_t n) {
    bytes_ += Arena::Rounded(static_cast<size_t>(n) * sizeof(T));
    return arena_ != nullptr ? arena_->Alloc<T>(n) : nullptr;
  }
  float* Floats(int64_t n) { return Take<float>(n); }

  bool counting() const { return arena_ == nullptr; }
  // Bytes taken (or counted) through this Scratch.
  size_t bytes() const { return bytes_; }

 private:
  Arena* arena_ = nullptr;
  size_t mark_ = 0;
  size_t bytes_ = 0;
};

// Bytes of n floats in the arena.
inline size_t FloatBytes(int64_t n) {
  return Arena::Rounded(static_cast<size_t>(n) * sizeof(float));
}

// The plan of a block that holds `buffers` and runs, one at a time, ops or inner blocks
// taking `inner` bytes each: buffers + the largest inner.
inline size_t Nested(size_t buffers, std::initializer_list<size_t> inner) {
  return buffers + std::max(inner);
}

// Bytes the buffers struct B takes when built from (args...): its plan, by construction.
template <typename B, typename... Args>
size_t BuffersBytes(const Args&... args) {
  Scratch count;
  B buffers(count, args...);
  (void)buffers;
  return count.bytes();
}

}  // namespace ocular::blocks

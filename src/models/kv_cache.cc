#include "models/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/arena.h"
#include "core/check.h"
#include "core/half.h"

namespace ocular {

namespace {
size_t ElementBytes(KvDType t) { return t == KvDType::kF32 ? 4 : 2; }
}  // namespace

size_t KvLayout::Bytes(int64_t capacity, KvDType dtype, int64_t image_rows) const {
  size_t total = 0;
  for (size_t l = 0; l < window.size(); ++l) {
    total += 2 * Arena::Rounded(static_cast<size_t>(Rows(l, capacity, image_rows) * kv_dim) *
                                ElementBytes(dtype));
  }
  return total;
}

KvCache::KvCache(const KvLayout& layout, int64_t capacity, KvDType dtype, std::byte* memory,
                 int64_t image_rows)
    : capacity_(capacity), kv_dim_(layout.kv_dim), dtype_(dtype) {
  layers_.resize(layout.window.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    KvCacheLayer& c = layers_[l];
    c.rows = layout.Rows(l, capacity, image_rows);
    c.cross = layout.IsCross(l);
    c.ring = !c.cross && c.rows < capacity;
    const size_t bytes =
        Arena::Rounded(static_cast<size_t>(c.rows * kv_dim_) * ElementBytes(dtype));
    c.k = memory;
    c.v = memory + bytes;
    memory += 2 * bytes;
  }
}

void KvCache::Store(size_t layer, int64_t start, int64_t count, const float* k, const float* v,
                    int64_t ld) {
  OCULAR_CHECK(layer < layers_.size() && start >= 0);
  const KvCacheLayer& c = layers_[layer];
  OCULAR_CHECK(start + count <= (c.cross ? c.rows : capacity_));
  // A ring only needs the last c.rows tokens of this write.
  const int64_t first = c.ring ? std::max(start, start + count - c.rows) : start;
  for (int64_t t = first; t < start + count; ++t) {
    const int64_t row = c.ring ? t % c.rows : t;
    const float* ks = k + (t - start) * ld;
    const float* vs = v + (t - start) * ld;
    if (dtype_ == KvDType::kF32) {
      std::memcpy(reinterpret_cast<float*>(c.k) + row * kv_dim_, ks, kv_dim_ * sizeof(float));
      std::memcpy(reinterpret_cast<float*>(c.v) + row * kv_dim_, vs, kv_dim_ * sizeof(float));
    } else {
      uint16_t* kd = reinterpret_cast<uint16_t*>(c.k) + row * kv_dim_;
      uint16_t* vd = reinterpret_cast<uint16_t*>(c.v) + row * kv_dim_;
      for (int64_t j = 0; j < kv_dim_; ++j) {
        kd[j] = F32ToBF16(ks[j]);
        vd[j] = F32ToBF16(vs[j]);
      }
    }
  }
}

ops::KvRows KvCache::Rows(size_t layer, int64_t tokens) const {
  OCULAR_CHECK(layer < layers_.size());
  const KvCacheLayer& c = layers_[layer];
  OCULAR_CHECK(tokens <= (c.cross ? c.rows : capacity_));
  return ops::KvRows{c.k,     c.v,    dtype_ == KvDType::kBF16, c.ring ? c.rows : 0, tokens,
                     kv_dim_, kv_dim_};
}

void KvCache::CopyFrom(const KvCache& src, int64_t tokens) {
  OCULAR_CHECK(src.layers_.size() == layers_.size() && src.kv_dim_ == kv_dim_ &&
               src.dtype_ == dtype_ && tokens >= 0 && tokens <= capacity_);
  const size_t row_bytes = static_cast<size_t>(kv_dim_) * ElementBytes(dtype_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const KvCacheLayer& c = layers_[l];
    const KvCacheLayer& s = src.layers_[l];
    OCULAR_CHECK(c.cross == s.cross);
    if (c.cross) {
      OCULAR_CHECK(c.rows == s.rows, "HINT: the same images' cross-attention keys");
      std::memcpy(c.k, s.k, static_cast<size_t>(c.rows) * row_bytes);
      std::memcpy(c.v, s.v, static_cast<size_t>(c.rows) * row_bytes);
      continue;
    }
    const int64_t first = c.ring ? std::max<int64_t>(0, tokens - c.rows) : 0;
    OCULAR_CHECK(!s.ring || tokens - first <= s.rows, "HINT: a ring holds its last rows only");
    OCULAR_CHECK(s.ring || tokens <= src.capacity_);
    for (int64_t t = first; t < tokens; ++t) {
      const int64_t from = s.ring ? t % s.rows : t;
      const int64_t to = c.ring ? t % c.rows : t;
      std::memcpy(c.k + to * row_bytes, s.k + from * row_bytes, row_bytes);
      std::memcpy(c.v + to * row_bytes, s.v + from * row_bytes, row_bytes);
    }
  }
}

}  // namespace ocular

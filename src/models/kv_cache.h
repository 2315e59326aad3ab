// One sequence's key/value cache: per decoder layer, K (after RoPE) and V rows of kv_dim
// values, stored as f32 or bf16. A sliding-window layer keeps a ring of `window` rows (logical
// token t in row t % window); a global layer keeps one row per token up to the capacity.
// Memory comes from runtime/kv_pool.h; this struct only addresses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace ocular {

enum class KvDType : uint8_t { kF32, kBF16 };

// The cache shape a model needs: kv_dim per token and, per layer, its window (0 = global).
// Cross-attention layers (mllama) keep image keys instead of token keys: one row per feature
// row of the request's images (Prompt::feature_rows), written once at its prefill.
struct KvLayout {
  int64_t kv_dim = 0;
  std::vector<int> window;
  std::vector<uint8_t> cross;  // per layer (empty: none)
  bool IsCross(size_t l) const { return l < cross.size() && cross[l] != 0; }
  bool HasCross() const {
    for (uint8_t c : cross) {
      if (c != 0) return true;
    }
    return false;
  }
  // Rows layer `l` keeps for a sequence of up to `capacity` tokens whose images have
  // `image_rows` feature rows.
  int64_t Rows(size_t l, int64_t capacity, int64_t image_rows = 0) const {
    if (IsCross(l)) return image_rows;
    return window[l] > 0 && window[l] < capacity ? window[l] : capacity;
  }
  // Bytes of one sequence's cache.
  size_t Bytes(int64_t capacity, KvDType dtype, int64_t image_rows = 0) const;
};

struct KvCacheLayer {
  std::byte* k = nullptr;
  std::byte* v = nullptr;
  int64_t rows = 0;  // ring size when ring, else capacity (a cross layer: its image keys)
  bool ring = false;
  bool cross = false;
};

class KvCache {
 public:
  KvCache() = default;
  // Addresses `memory` (at least layout.Bytes(capacity, dtype) bytes, owned by the caller).
  KvCache(const KvLayout& layout, int64_t capacity, KvDType dtype, std::byte* memory,
          int64_t image_rows = 0);

  int64_t capacity() const { return capacity_; }
  KvDType dtype() const { return dtype_; }
  int64_t kv_dim() const { return kv_dim_; }
  size_t num_layers() const { return layers_.size(); }

  // Writes K/V of logical tokens [start, start + count) of `layer` from f32 rows (row stride
  // ld), converting to the storage dtype. A ring keeps only the last `rows` of them.
  // REQUIRES: start + count <= capacity (a cross layer: <= its rows).
  void Store(size_t layer, int64_t start, int64_t count, const float* k, const float* v,
             int64_t ld);
  // The K/V rows of `layer` holding logical tokens [0, tokens) (a ring: its last `rows`).
  ops::KvRows Rows(size_t layer, int64_t tokens) const;
  // Copies the K/V of logical tokens [0, tokens) of every layer from `src` (the same layout and
  // dtype; a cross layer: all its rows), as storing them here would: a ring keeps the last of
  // them. REQUIRES: tokens <= capacity; src's last stored token is tokens - 1 or, where src's
  // layer is no ring, any later one (a runtime prefix cache: runtime/prefix_cache.h).
  void CopyFrom(const KvCache& src, int64_t tokens);

 private:
  int64_t capacity_ = 0, kv_dim_ = 0;
  KvDType dtype_ = KvDType::kF32;
  std::vector<KvCacheLayer> layers_;
};

}  // namespace ocular

// Per-layer key/value cache for the text decoder: K is stored after RoPE.
#pragma once

#include <cstdint>
#include <vector>

namespace ocular {

struct KvCache {
  int64_t capacity = 0;  // tokens
  int64_t kv_dim = 0;    // num_key_value_heads * head_dim
  std::vector<std::vector<float>> k, v;  // per layer: [capacity, kv_dim]

  void Init(int layers, int64_t cap, int64_t dim) {
    capacity = cap;
    kv_dim = dim;
    k.assign(layers, std::vector<float>(cap * dim));
    v.assign(layers, std::vector<float>(cap * dim));
  }
  size_t bytes() const { return k.size() * 2 * static_cast<size_t>(capacity * kv_dim) * sizeof(float); }
};

}  // namespace ocular

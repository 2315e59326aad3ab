// FeatureCache: vision features of images seen before, reused across requests and turns
// (clients resend every earlier image with each chat turn). LRU, bounded by bytes.
//
// Keyed by SHA-256 (OpenSSL's libcrypto) over the model's fingerprint, the decoded image's
// width and height and the exact pixel tensor the vision encoder would read. That tensor is
// a function of the decoded pixels and of the preprocessing (resize, rescale, normalize), so
// two images share an entry only when the encoder's input is bit-identical: the cached
// features are exactly what the encoder would compute.
//
// Why features only, not a KV prefix cache: PaliGemma's image + prompt prefix attends
// bidirectionally (modeling_paligemma.py, _update_causal_mask), so the K/V of an image token
// depend on the prompt text after it; only the encoder's output is independent of the prompt.
// Thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ocular {

using FeatureKey = std::array<uint8_t, 32>;  // a SHA-256 digest

// The key of one image: SHA-256 of (model fingerprint, width, height, pixels[0, n)).
FeatureKey MakeFeatureKey(std::string_view model_fingerprint, int width, int height,
                          const float* pixels, size_t n);

struct FeatureCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  size_t bytes = 0;  // features held
  size_t entries = 0;
  size_t max_bytes = 0;
};

class FeatureCache {
 public:
  using Features = std::shared_ptr<const std::vector<float>>;

  // max_bytes: the budget (0: the cache keeps nothing).
  explicit FeatureCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The features under `key`, or null (counted as a hit or a miss). A hit becomes the most
  // recently used entry. The returned features stay valid after an eviction.
  Features Get(const FeatureKey& key);
  // Stores features under `key` (the least recently used entries leave to make room; features
  // larger than the whole budget are not kept).
  void Put(const FeatureKey& key, Features features);
  void Clear();
  FeatureCacheStats stats() const;

 private:
  struct KeyHash {
    size_t operator()(const FeatureKey& k) const;
  };
  struct Entry {
    FeatureKey key;
    Features features;
  };
  static size_t BytesOf(const Features& f) { return f->size() * sizeof(float); }

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<FeatureKey, std::list<Entry>::iterator, KeyHash> index_;
  FeatureCacheStats stats_;
};

}  // namespace ocular

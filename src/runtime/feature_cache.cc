#include "runtime/feature_cache.h"

#include <openssl/evp.h>

#include <cstring>

#include "core/check.h"

namespace ocular {

FeatureKey MakeFeatureKey(std::string_view model_fingerprint, int width, int height,
                          const float* pixels, size_t n) {
  // Each field is length- or size-delimited, so no two different inputs hash the same bytes.
  const uint64_t header[4] = {model_fingerprint.size(), static_cast<uint64_t>(width),
                              static_cast<uint64_t>(height), n};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  OCULAR_CHECK(ctx != nullptr);
  OCULAR_CHECK(EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1);
  EVP_DigestUpdate(ctx, header, sizeof(header));
  EVP_DigestUpdate(ctx, model_fingerprint.data(), model_fingerprint.size());
  EVP_DigestUpdate(ctx, pixels, n * sizeof(float));
  FeatureKey key{};
  unsigned int len = 0;
  OCULAR_CHECK(EVP_DigestFinal_ex(ctx, key.data(), &len) == 1 && len == key.size());
  EVP_MD_CTX_free(ctx);
  return key;
}

size_t FeatureCache::KeyHash::operator()(const FeatureKey& k) const {
  size_t h;
  std::memcpy(&h, k.data(), sizeof(h));  // a SHA-256 digest is uniform already
  return h;
}

FeatureCache::Features FeatureCache::Get(const FeatureKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->features;
}

void FeatureCache::Put(const FeatureKey& key, Features features) {
  if (features == nullptr) return;
  const size_t bytes = BytesOf(features);
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > max_bytes_ || index_.count(key) != 0) return;
  while (stats_.bytes + bytes > max_bytes_) {
    const Entry& last = lru_.back();
    stats_.bytes -= BytesOf(last.features);
    index_.erase(last.key);
    lru_.pop_back();
    ++stats_.evictions;
  }
  lru_.push_front({key, std::move(features)});
  index_[key] = lru_.begin();
  stats_.bytes += bytes;
}

void FeatureCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lru_.clear();
  index_.clear();
  stats_.bytes = 0;
}

FeatureCacheStats FeatureCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  FeatureCacheStats s = stats_;
  s.entries = index_.size();
  s.max_bytes = max_bytes_;
  return s;
}

}  // namespace ocular

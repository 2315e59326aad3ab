// PrefixCache: the K/V of prompts prefilled before, reused by a later prompt that begins with
// the same tokens, images and positions (a chat's next turn resends the whole conversation, so
// its prompt begins with the last turn's). The new prompt then prefills only the rows after the
// reused ones, over the copied K/V. LRU, bounded by bytes; thread-safe.
//
// Keyed by what the K/V are a function of, never by placeholder ids alone:
//  - the token ids of the prefix;
//  - the images' content keys (FeatureKey: SHA-256 of the model, the size and the encoder's exact
//    input), all of the prompt's images in order — two different images behind the same image
//    tokens never share an entry; with mllama's cross-attention the images' K/V (of every image
//    of the prompt) are part of the entry, so the whole image list must match;
//  - the RoPE positions of the prefix rows (Qwen2-VL's M-RoPE positions depend on the images'
//    grids; they are compared row by row, axis by axis);
//  - the family's sequence state (mllama's cross-attention key count and mask, SequenceState::
//    Clone), copied with the K/V.
// A reuse must leave every image token in the reused part (the suffix is text: it needs no
// features and no bidirectional image span), must not cut a bidirectional span, and keeps at
// least one row to prefill (the first token's logits). So PaliGemma, whose whole prompt is one
// bidirectional prefix block (every K/V row depends on the whole prefix), never reuses and is not
// stored. With sliding-window layers (Gemma 3) only prompts within the smallest window are
// cached and reuse: a longer prompt's rows after the reused ones would overwrite, in the window's
// ring, keys that its first rows still read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "models/kv_cache.h"
#include "models/model.h"
#include "runtime/feature_cache.h"

namespace ocular {

struct PrefixCacheStats {
  uint64_t hits = 0;           // prefills that started from cached K/V
  uint64_t misses = 0;         // prefills looked up and not found
  uint64_t tokens_reused = 0;  // prompt rows not prefilled thanks to the cache
  uint64_t evictions = 0;
  size_t bytes = 0;  // K/V held
  size_t entries = 0;
  size_t max_bytes = 0;
};

class PrefixCache {
 public:
  struct Entry;
  struct Match {
    std::shared_ptr<const Entry> entry;  // null: nothing to reuse
    int64_t tokens = 0;                  // prompt rows [0, tokens) reusable
  };

  // max_bytes: the budget (0: the cache keeps nothing). image_token: the model's image token id
  // (ModelSpec::image_token_id).
  PrefixCache(KvLayout layout, KvDType dtype, size_t max_bytes, int32_t image_token);

  // The entry with the longest reusable prefix of `prompt` (counted as a hit or a miss).
  // image_keys: one per prompt.images (REQUIRES: that many).
  Match Find(const Prompt& prompt, std::span<const FeatureKey> image_keys);
  // Copies the match's K/V into `kv` (REQUIRES: a cache of this layout, its image rows the
  // entry's) and returns the state the sequence starts with (null where the family keeps none).
  std::unique_ptr<SequenceState> Apply(const Match& m, KvCache* kv) const;
  // Stores a prompt's K/V right after its prefill (kv holds exactly its rows), unless it could
  // never be reused or its state cannot be copied.
  void Put(const Prompt& prompt, std::span<const FeatureKey> image_keys, const KvCache& kv,
           const SequenceState* state);
  PrefixCacheStats stats() const;

 private:
  int64_t Reusable(const Entry& e, const Prompt& prompt,
                   std::span<const FeatureKey> image_keys) const;
  int64_t Limit(const Prompt& prompt) const;
  void Evict(size_t incoming);

  const KvLayout layout_;
  const KvDType dtype_;
  const size_t max_bytes_;
  const int32_t image_token_;
  int64_t min_window_ = 0;  // the smallest sliding window (0: none)
  mutable std::mutex mu_;
  std::list<std::shared_ptr<const Entry>> lru_;  // most recently used first
  PrefixCacheStats stats_;
};

}  // namespace ocular

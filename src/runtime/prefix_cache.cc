#include "runtime/prefix_cache.h"

#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>

#include "core/check.h"

namespace ocular {

struct PrefixCache::Entry {
  std::vector<int32_t> ids;
  int axes = 1;
  std::vector<int32_t> positions;  // [axes, ids.size()] axis-major; empty: row t at t
  std::vector<TokenSpan> spans;    // the prompt's bidirectional spans
  std::vector<FeatureKey> image_keys;
  std::unique_ptr<std::byte[]> memory;
  KvCache kv;
  std::unique_ptr<SequenceState> state;
  size_t bytes = 0;

  int64_t size() const { return static_cast<int64_t>(ids.size()); }
};

namespace {

// Whether [0, n) cuts one of the spans (a row before n would attend to one at or after it).
bool CutsSpan(std::span<const TokenSpan> spans, int64_t n) {
  return std::any_of(spans.begin(), spans.end(),
                     [&](const TokenSpan& s) { return s.begin < n && n < s.end; });
}

// The prompt's positions of rows [0, n), axis after axis ([axes, n]); empty when they are the
// row indices.
std::vector<int32_t> PromptPositions(const Prompt& p, int64_t n) {
  const Positions& pos = p.positions;
  if (pos.ids.empty()) return {};
  std::vector<int32_t> out(static_cast<size_t>(pos.axes * n));
  for (int a = 0; a < pos.axes; ++a) {
    for (int64_t t = 0; t < n; ++t) out[a * n + t] = static_cast<int32_t>(pos.At(a, t, p.size()));
  }
  return out;
}

// Rows [0, n) of `p` whose ids and positions equal the entry's, from the start.
int64_t CommonRows(const PrefixCache::Entry& e, const Prompt& p, int64_t n) {
  int64_t same = 0;
  while (same < n && e.ids[same] == p.ids[same]) ++same;
  const Positions& pos = p.positions;
  if (e.positions.empty() && pos.ids.empty()) return same;
  if (e.positions.empty() || pos.ids.empty() || e.axes != pos.axes) return 0;
  const int64_t N = e.size();
  for (int a = 0; a < pos.axes; ++a) {
    int64_t t = 0;
    while (t < same && e.positions[a * N + t] == pos.At(a, t, p.size())) ++t;
    same = t;
  }
  return same;
}

}  // namespace

PrefixCache::PrefixCache(KvLayout layout, KvDType dtype, size_t max_bytes, int32_t image_token)
    : layout_(std::move(layout)), dtype_(dtype), max_bytes_(max_bytes), image_token_(image_token) {
  stats_.max_bytes = max_bytes;
  for (size_t l = 0; l < layout_.window.size(); ++l) {
    const int w = layout_.window[l];
    if (!layout_.IsCross(l) && w > 0 && (min_window_ == 0 || w < min_window_)) min_window_ = w;
  }
}

// The most rows of `prompt` any entry may give: all but the last (its logits), and at least
// every image token (the rows after a reuse are text). 0: none — also for a prompt longer than
// a sliding window: a prefill over cached rows reads its keys from the window's ring, which
// its own rows would overwrite (a whole prefill reads its fresh K/V instead).
int64_t PrefixCache::Limit(const Prompt& prompt) const {
  const int64_t T = prompt.size();
  if (T < 2 || prompt.prefix_len() > 0) return 0;  // a prefix-LM block: KV of the whole prefix
  if (min_window_ > 0 && T > min_window_) return 0;
  int64_t last_image = -1;
  for (int64_t t = T - 1; t >= 0 && last_image < 0; --t) {
    if (prompt.ids[t] == image_token_) last_image = t;
  }
  return last_image + 1 < T ? T - 1 : 0;
}

int64_t PrefixCache::Reusable(const Entry& e, const Prompt& prompt,
                              std::span<const FeatureKey> image_keys) const {
  const int64_t limit = std::min(Limit(prompt), e.size());
  if (limit == 0 ||
      !std::equal(e.image_keys.begin(), e.image_keys.end(), image_keys.begin(), image_keys.end())) {
    return 0;
  }
  const int64_t n = CommonRows(e, prompt, limit);
  if (n == 0) return 0;
  // Every image token before n (the same images, all of the prompt's: the suffix is text).
  if (std::find(prompt.ids.begin() + n, prompt.ids.end(), image_token_) != prompt.ids.end()) {
    return 0;
  }
  if (CutsSpan(prompt.bidirectional, n) || CutsSpan(e.spans, n)) return 0;
  return n;
}

PrefixCache::Match PrefixCache::Find(const Prompt& prompt, std::span<const FeatureKey> image_keys) {
  OCULAR_CHECK(image_keys.size() == prompt.images.size());
  std::lock_guard<std::mutex> lock(mu_);
  Match best;
  auto best_it = lru_.end();
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const int64_t n = Reusable(**it, prompt, image_keys);
    if (n > best.tokens) {
      best = {*it, n};
      best_it = it;
    }
  }
  if (best.entry == nullptr) {
    ++stats_.misses;
    return best;
  }
  lru_.splice(lru_.begin(), lru_, best_it);
  ++stats_.hits;
  stats_.tokens_reused += static_cast<uint64_t>(best.tokens);
  return best;
}

std::unique_ptr<SequenceState> PrefixCache::Apply(const Match& m, KvCache* kv) const {
  OCULAR_CHECK(m.entry != nullptr && m.tokens > 0 && m.tokens <= m.entry->size());
  kv->CopyFrom(m.entry->kv, m.tokens);
  return m.entry->state != nullptr ? m.entry->state->Clone() : nullptr;
}

void PrefixCache::Put(const Prompt& prompt, std::span<const FeatureKey> image_keys,
                      const KvCache& kv, const SequenceState* state) {
  OCULAR_CHECK(image_keys.size() == prompt.images.size());
  const int64_t T = prompt.size();
  if (max_bytes_ == 0 || Limit(prompt) == 0) return;
  auto e = std::make_shared<Entry>();
  if (state != nullptr) {
    e->state = state->Clone();
    if (e->state == nullptr) return;  // the family's state cannot be copied
  }
  const int64_t image_rows = layout_.HasCross() ? prompt.feature_rows() : 0;
  e->bytes = layout_.Bytes(T, dtype_, image_rows);
  if (e->bytes > max_bytes_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      const Entry& o = **it;
      if (o.ids == prompt.ids && Reusable(o, prompt, image_keys) == T - 1) {
        lru_.splice(lru_.begin(), lru_, it);  // already held
        return;
      }
    }
  }
  e->memory.reset(new (std::nothrow) std::byte[e->bytes + 64]);
  if (e->memory == nullptr) return;  // no memory to spare: nothing cached
  std::byte* base = e->memory.get();
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  e->kv = KvCache(layout_, T, dtype_, base, image_rows);
  e->kv.CopyFrom(kv, T);
  e->ids = prompt.ids;
  e->axes = prompt.positions.axes;
  e->positions = PromptPositions(prompt, T);
  e->spans = prompt.bidirectional;
  e->image_keys.assign(image_keys.begin(), image_keys.end());
  std::lock_guard<std::mutex> lock(mu_);
  Evict(e->bytes);
  stats_.bytes += e->bytes;
  lru_.push_front(std::move(e));
  stats_.entries = lru_.size();
}

// Drops the least recently used entries until `incoming` more bytes fit. REQUIRES: mu_ held.
void PrefixCache::Evict(size_t incoming) {
  while (!lru_.empty() && stats_.bytes + incoming > max_bytes_) {
    stats_.bytes -= lru_.back()->bytes;
    lru_.pop_back();  // a sequence copying from it holds its own reference
    ++stats_.evictions;
  }
  stats_.entries = lru_.size();
}

PrefixCacheStats PrefixCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace ocular

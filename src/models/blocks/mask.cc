#include "models/blocks/mask.h"

#include <algorithm>

namespace ocular::blocks {

void CausalKeyRanges(int64_t start, int64_t count, int window, std::span<const Span> spans,
                     int32_t* begin, int32_t* end) {
  size_t next = 0;  // the first span that may hold position i (i only grows)
  for (int64_t t = 0; t < count; ++t) {
    const int64_t i = start + t;
    int64_t b = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;  // causal (+ sliding)
    int64_t e = i + 1;
    while (next < spans.size() && spans[next].end <= i) ++next;
    if (next < spans.size() && spans[next].begin <= i) {  // or the whole span
      b = std::min(b, spans[next].begin);
      e = std::max(e, spans[next].end);
    }
    begin[t] = static_cast<int32_t>(b);
    end[t] = static_cast<int32_t>(e);
  }
}

}  // namespace ocular::blocks

// Attention masks as typed key ranges: query i of a sequence attends to logical keys
// [begin[i], end[i]) (ops::Attention's contract), built from what the family declares.
#pragma once

#include <cstdint>
#include <span>

namespace ocular::blocks {

// Cache positions [begin, end) that attend bidirectionally among themselves: PaliGemma's
// prefix block (image + prompt), Gemma 3's runs of image tokens.
struct Span {
  int64_t begin = 0, end = 0;
};

// Ranges for cache positions start..start+count-1 of one sequence:
//   causal:        keys [0, i]; with window > 0 only the last `window` of them (i - W, i]
//                  (masking_utils.py sliding_window_overlay: kv_idx > q_idx - sliding_window);
//   in a span:     also the whole span, OR-ed with the causal (and sliding) range, so a span
//                  longer than the window still sees all of itself (HF: PaliGemma's 4-D prefix
//                  mask replaces the sliding mask; Gemma 3's token_type_ids or_mask).
// spans: sorted, disjoint. begin/end: [count].
void CausalKeyRanges(int64_t start, int64_t count, int window, std::span<const Span> spans,
                     int32_t* begin, int32_t* end);

}  // namespace ocular::blocks

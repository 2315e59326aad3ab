// StopFilter: cuts streamed text at the first stop string (GenerateOptions::stop).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace ocular {

// Cuts streamed text at the first stop string (GenerateOptions::stop). Text that could be the
// beginning of a stop string is held back until the next piece decides, so what is streamed
// never includes any part of a stop string and always equals the final answer's prefix.
class StopFilter {
 public:
  explicit StopFilter(const std::vector<std::string>& stops) {
    for (const std::string& s : stops) {
      if (!s.empty()) stops_.push_back(s);
    }
  }
  bool active() const { return !stops_.empty(); }
  bool stopped() const { return stopped_; }

  // Adds a decoded piece; returns the text that may be shown now. After a stop string is
  // found, stopped() is true and nothing more is shown.
  std::string Put(const std::string& piece) {
    if (stopped_) return {};
    text_ += piece;
    size_t max_len = 0;
    for (const std::string& s : stops_) max_len = std::max(max_len, s.size());
    // A stop string cannot begin inside what was shown: that part was never held back.
    const size_t from = shown_ > max_len ? shown_ - max_len : 0;
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) cut = std::min(cut, text_.find(s, from));
    size_t end = text_.size();
    if (cut != std::string::npos) {
      stopped_ = true;
      end = cut;
    } else {
      end -= HeldBack();
    }
    std::string out = end > shown_ ? text_.substr(shown_, end - shown_) : std::string();
    shown_ = std::max(shown_, end);
    return out;
  }
  // The text held back at the end of generation (it turned out not to be a stop string).
  std::string Finish() {
    if (stopped_) return {};
    std::string out = text_.substr(shown_);
    shown_ = text_.size();
    return out;
  }
  // Cuts `text` (the whole answer decoded at once) before its first stop string.
  std::string Cut(std::string text) const {
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) cut = std::min(cut, text.find(s));
    if (cut != std::string::npos) text.resize(cut);
    return text;
  }

 private:
  // Length of the longest suffix of the unshown text that is a proper prefix of a stop string.
  size_t HeldBack() const {
    const size_t unshown = text_.size() - shown_;
    size_t keep = 0;
    for (const std::string& s : stops_) {
      for (size_t k = std::min(s.size() - 1, unshown); k > keep; --k) {
        if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
          keep = k;
          break;
        }
      }
    }
    return keep;
  }

  std::vector<std::string> stops_;
  std::string text_;  // everything decoded so far
  size_t shown_ = 0;  // text_[0, shown_) has been returned by Put
  bool stopped_ = false;
};

}  // namespace ocular

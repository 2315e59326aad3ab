// A Tracer that keeps copies of every tap, in call order (for `ocular trace` and tests).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "models/tracer.h"

namespace ocular {

class RecordingTracer : public Tracer {
 public:
  void Tap(const std::string& name, const float* data, const Shape& shape) override {
    Tensor t(shape);
    std::copy_n(data, t.numel(), t.data.data());
    index_[name] = taps_.size();
    taps_.emplace_back(name, std::move(t));
  }
  const std::vector<std::pair<std::string, Tensor>>& taps() const { return taps_; }
  // nullptr if the tap was not recorded.
  const Tensor* Find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &taps_[it->second].second;
  }
  // Adds an already-owned tensor (e.g. logits computed outside the forward pass).
  void Add(const std::string& name, Tensor t) {
    index_[name] = taps_.size();
    taps_.emplace_back(name, std::move(t));
  }

 private:
  std::vector<std::pair<std::string, Tensor>> taps_;
  std::map<std::string, size_t> index_;
};

}  // namespace ocular

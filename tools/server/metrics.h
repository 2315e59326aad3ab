// Counters and histograms of `ocular serve`, written as Prometheus text (GET /metrics).
// Thread-safe: every method may be called from any HTTP worker.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "ocular/engine.h"

namespace ocular::server {

// The Engine's counters as Prometheus text: the decode batch-size histogram, the image-feature
// cache (hits, misses, evictions, bytes, entries), images encoded, KV bytes in use.
std::string RenderEngineStats(const EngineStats& stats);

class Metrics {
 public:
  void CountRequest(int http_status);
  void AddTokens(int64_t prompt, int64_t completion);
  void ObserveLatency(double request_s, double ttft_s);  // ttft_s < 0: no token was produced
  void SetQueue(int waiting, int running) {
    waiting_ = waiting;
    running_ = running;
  }
  // The Prometheus text exposition (version 0.0.4).
  std::string Render() const;

 private:
  static constexpr std::array<double, 12> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                      0.5,   1,    2.5,   5,    10,  30};
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> counts{};  // non-cumulative
    uint64_t count = 0;
    double sum = 0;
    void Observe(double v);
    void Render(std::string* out, const char* name, const char* help) const;
  };
  mutable std::mutex mu_;
  std::map<int, uint64_t> requests_;  // by HTTP status
  uint64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  Histogram request_seconds_, ttft_seconds_;
  std::atomic<int> waiting_{0}, running_{0};
};

}  // namespace ocular::server

#include "metrics.h"

#include <cstdio>

namespace ocular::server {

void Metrics::CountRequest(int http_status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[http_status];
}

void Metrics::AddTokens(int64_t prompt, int64_t completion) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += static_cast<uint64_t>(prompt);
  completion_tokens_ += static_cast<uint64_t>(completion);
}

void Metrics::ObserveLatency(double request_s, double ttft_s) {
  std::lock_guard<std::mutex> lock(mu_);
  request_seconds_.Observe(request_s);
  if (ttft_s >= 0) ttft_seconds_.Observe(ttft_s);
}

void Metrics::Histogram::Observe(double v) {
  ++count;
  sum += v;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (v <= kBuckets[i]) {
      ++counts[i];
      break;
    }
  }
}

void Metrics::Histogram::Render(std::string* out, const char* name, const char* help) const {
  char line[256];
  std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  *out += line;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    cumulative += counts[i];
    std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name, kBuckets[i],
                  static_cast<unsigned long long>(cumulative));
    *out += line;
  }
  std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n",
                name, static_cast<unsigned long long>(count), name, sum, name,
                static_cast<unsigned long long>(count));
  *out += line;
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  char line[256];
  out += "# HELP ocular_requests_total Chat completion requests by HTTP status.\n";
  out += "# TYPE ocular_requests_total counter\n";
  for (const auto& [status, n] : requests_) {
    std::snprintf(line, sizeof line, "ocular_requests_total{status=\"%d\"} %llu\n", status,
                  static_cast<unsigned long long>(n));
    out += line;
  }
  std::snprintf(line, sizeof line,
                "# HELP ocular_prompt_tokens_total Prompt tokens processed (image tokens "
                "included).\n# TYPE ocular_prompt_tokens_total counter\n"
                "ocular_prompt_tokens_total %llu\n",
                static_cast<unsigned long long>(prompt_tokens_));
  out += line;
  std::snprintf(line, sizeof line,
                "# HELP ocular_completion_tokens_total Tokens generated.\n"
                "# TYPE ocular_completion_tokens_total counter\n"
                "ocular_completion_tokens_total %llu\n",
                static_cast<unsigned long long>(completion_tokens_));
  out += line;
  std::snprintf(line, sizeof line,
                "# HELP ocular_queue_depth Admitted requests waiting for the model.\n"
                "# TYPE ocular_queue_depth gauge\nocular_queue_depth %d\n"
                "# HELP ocular_requests_running Requests running on the model.\n"
                "# TYPE ocular_requests_running gauge\nocular_requests_running %d\n",
                waiting_.load(), running_.load());
  out += line;
  request_seconds_.Render(&out, "ocular_request_duration_seconds",
                          "Chat completion latency, admission to last byte.");
  ttft_seconds_.Render(&out, "ocular_time_to_first_token_seconds",
                       "Admission to the first generated text.");
  return out;
}

namespace {

void Metric(std::string* out, const char* name, const char* type, const char* help,
            unsigned long long value) {
  char line[320];
  std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type,
                name, value);
  *out += line;
}

}  // namespace

namespace {

// A histogram of the sequences each decode step ran together (buckets 1 .. max_batch), the
// batch's running and waiting sequences, and the share of its KV caches in use.
void RenderDecodeBatch(std::string* out, const EngineStats& s) {
  char line[256];
  // A histogram of the sequences each decode step ran together (buckets 1 .. max_batch).
  const char* name = "ocular_decode_batch_size";
  std::snprintf(line, sizeof line,
                "# HELP %s Sequences decoded together, per decode step.\n# TYPE %s histogram\n",
                name, name);
  *out += line;
  unsigned long long cumulative = 0, sum = 0;
  for (size_t b = 1; b < s.decode_steps_by_batch.size(); ++b) {
    cumulative += s.decode_steps_by_batch[b];
    sum += b * s.decode_steps_by_batch[b];
    std::snprintf(line, sizeof line, "%s_bucket{le=\"%zu\"} %llu\n", name, b, cumulative);
    *out += line;
  }
  std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %llu\n%s_count %llu\n",
                name, cumulative, name, sum, name, cumulative);
  *out += line;
  Metric(out, "ocular_decode_batch_running", "gauge", "Sequences in the decode batch now.",
         static_cast<unsigned long long>(s.running));
  Metric(out, "ocular_decode_batch_waiting", "gauge",
         "Requests waiting for a place in the decode batch.",
         static_cast<unsigned long long>(s.waiting));
  // The Gateway API Inference Extension's KVCacheUtilization (docs/scale-out.md): a running
  // sequence holds one of the decode batch's max_batch KV caches.
  const size_t slots = s.decode_steps_by_batch.empty() ? 0 : s.decode_steps_by_batch.size() - 1;
  std::snprintf(line, sizeof line,
                "# HELP ocular_kv_cache_usage_ratio Share of the decode batch's KV caches in "
                "use (running / max batch).\n# TYPE ocular_kv_cache_usage_ratio gauge\n"
                "ocular_kv_cache_usage_ratio %.6f\n",
                slots == 0 ? 0.0 : static_cast<double>(s.running) / static_cast<double>(slots));
  *out += line;
}

// The caches' and the KV pool's counters and gauges: (name, type, help, value).
void RenderCaches(std::string* out, const EngineStats& s) {
  const struct {
    const char* name;
    const char* type;
    const char* help;
    unsigned long long value;
  } metrics[] = {
      {"ocular_images_encoded_total", "counter", "Images that went through the vision encoder.",
       s.images_encoded},
      {"ocular_image_cache_hits_total", "counter",
       "Images whose vision features came from the cache.", s.image_cache_hits},
      {"ocular_image_cache_misses_total", "counter",
       "Images looked up in the feature cache and not found.", s.image_cache_misses},
      {"ocular_image_cache_evictions_total", "counter",
       "Features dropped from the cache to make room.", s.image_cache_evictions},
      {"ocular_image_cache_bytes", "gauge", "Bytes of vision features cached.",
       s.image_cache_bytes},
      {"ocular_image_cache_entries", "gauge", "Images whose features are cached.",
       s.image_cache_entries},
      {"ocular_image_cache_max_bytes", "gauge", "The feature cache's budget.",
       s.image_cache_max_bytes},
      {"ocular_prefix_cache_hits_total", "counter",
       "Prefills that started from a cached prompt's K/V.", s.prefix_cache_hits},
      {"ocular_prefix_cache_misses_total", "counter",
       "Prefills looked up in the prefix cache that found nothing to reuse.",
       s.prefix_cache_misses},
      {"ocular_prefix_cache_tokens_reused_total", "counter",
       "Prompt tokens whose K/V came from the prefix cache instead of a prefill.",
       s.prefix_cache_tokens_reused},
      {"ocular_prefix_cache_evictions_total", "counter", "Cached prompts dropped to make room.",
       s.prefix_cache_evictions},
      {"ocular_prefix_cache_bytes", "gauge", "Bytes of prompt K/V cached.", s.prefix_cache_bytes},
      {"ocular_prefix_cache_entries", "gauge", "Prompts whose K/V are cached.",
       s.prefix_cache_entries},
      {"ocular_prefix_cache_max_bytes", "gauge", "The prefix cache's budget.",
       s.prefix_cache_max_bytes},
      {"ocular_kv_cache_bytes_in_use", "gauge", "KV cache bytes of running sequences.",
       s.kv_bytes_in_use},
      {"ocular_kv_cache_bytes_pooled", "gauge", "Released KV cache bytes kept for reuse.",
       s.kv_bytes_pooled},
  };
  for (const auto& m : metrics) Metric(out, m.name, m.type, m.help, m.value);
}

}  // namespace

std::string RenderEngineStats(const EngineStats& s) {
  std::string out;
  char line[256];
  RenderDecodeBatch(&out, s);
  Metric(&out, "ocular_prefills_total", "counter", "Prompts prefilled.", s.prefills);
  Metric(&out, "ocular_prefill_chunks_total", "counter",
         "Pieces the prefills ran in (a prefill spread over several decode steps).",
         s.prefill_chunks);
  Metric(&out, "ocular_prefills_merged_total", "counter",
         "Prefill pieces run in one pass with other prompts' (merged prefills), per prompt.",
         s.merged_prefills);
  Metric(&out, "ocular_scheduler_steps_total", "counter",
         "Scheduler iterations that ran the model.", s.scheduler_steps);
  out +=
      "# HELP ocular_model_seconds_total Seconds the model spent, by phase.\n"
      "# TYPE ocular_model_seconds_total counter\n";
  std::snprintf(line, sizeof line,
                "ocular_model_seconds_total{phase=\"encode\"} %.6f\n"
                "ocular_model_seconds_total{phase=\"prefill\"} %.6f\n"
                "ocular_model_seconds_total{phase=\"decode\"} %.6f\n",
                s.encode_seconds, s.prefill_seconds, s.decode_seconds);
  out += line;
  RenderCaches(&out, s);
  return out;
}

}  // namespace ocular::server

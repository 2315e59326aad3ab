#include "runtime/bench.h"

#include <sys/resource.h>

#include <chrono>
#include <memory>
#include <vector>

namespace ocular {

namespace {

size_t PeakRssBytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Sequence q's synthetic prompt: the processor's image of a 2R x 2R pattern (none for a
// text-only model), its image tokens, BOS and prompt_tokens - 1 text tokens; all of it one
// bidirectional block (where the family has one).
StatusOr<std::shared_ptr<Prompt>> BenchPrompt(const ModelSpec& s, const Processor& processor,
                                              int prompt_tokens, int q) {
  auto p = std::make_shared<Prompt>();
  if (s.image_tokens > 0) {
    const int R = s.image_size;
    Image image(2 * R, 2 * R);
    for (size_t i = 0; i < image.rgb.size(); ++i) {
      image.rgb[i] = static_cast<uint8_t>((i * 7919 + static_cast<size_t>(q) * 104729) % 251);
    }
    OCULAR_RETURN_IF_ERROR(processor.AddImage(image, ImageOptions{}, 0, p.get()));
  }
  for (const VisionInput& in : p->images) p->ids.insert(p->ids.end(), in.tokens, s.image_token_id);
  const int32_t bos = processor.tokenizer().bos_id() >= 0 ? processor.tokenizer().bos_id() : 2;
  p->ids.push_back(bos);
  for (int i = 0; i < prompt_tokens - 1; ++i) p->ids.push_back(100 + (i + 7 * q) % 50);
  p->bidirectional.push_back({0, p->size()});
  return p;
}

}  // namespace

StatusOr<BenchResult> RunBench(Runner& runner, KvPool& kv, const Processor& processor,
                               const BenchOptions& b) {
  if (b.prompt_tokens < 1 || b.decode_tokens < 1 || b.batch < 1) {
    return Error(StatusCode::kInvalidArgument, "bench",
                 "prompt_tokens, decode_tokens and batch must be >= 1");
  }
  const ModelSpec& s = runner.model().spec();
  BenchResult r;
  r.batch = b.batch;
  std::vector<Sequence> seqs;
  seqs.reserve(b.batch);
  std::vector<float> features;
  double prefill_ms = 0;
  for (int q = 0; q < b.batch; ++q) {
    OCULAR_ASSIGN_OR_RETURN(std::shared_ptr<Prompt> prompt,
                            BenchPrompt(s, processor, b.prompt_tokens, q));
    const bool images = !prompt->images.empty();
    features.assign(static_cast<size_t>(prompt->feature_rows() * s.feature_floats()), 0.0f);
    const size_t n = prompt->images.size();
    auto t0 = std::chrono::steady_clock::now();
    if (images) {
      if (q == 0 && b.vision_warmup) {  // fault in the mapped vision weights and the workspace
        runner.EncodeImages(*prompt, 0, n, features.data(), nullptr);
      }
      t0 = std::chrono::steady_clock::now();
      runner.EncodeImages(*prompt, 0, n, features.data(), nullptr);
      if (q == 0) {
        r.vision_ms = MsSince(t0);
        r.vision_tiles = static_cast<int>(prompt->images[0].pixel_count /
                                          (3 * int64_t{s.image_size} * s.image_size));
      }
    }
    SequenceParams p;
    p.prompt = prompt;
    p.max_new_tokens = b.decode_tokens + 1;  // the first token comes from the prefill
    const int64_t capacity = prompt->size() + p.max_new_tokens;
    if (capacity > s.max_positions) {
      return Error(StatusCode::kResourceExhausted, "bench",
                   "prompt + decode tokens exceed the context length ", s.max_positions);
    }
    const int64_t image_rows = kv.layout().HasCross() ? prompt->feature_rows() : 0;
    const float* f = images ? features.data() : nullptr;
    if (q == 0) {  // warm-up: the same prefill once, untimed (faults in the text weights)
      OCULAR_ASSIGN_OR_RETURN(KvHandle warm_cache, kv.Acquire(capacity, image_rows));
      Sequence warm(p, std::move(warm_cache), runner.vocab(), runner.model().NewState());
      OCULAR_RETURN_IF_ERROR(runner.Prefill(warm, f, nullptr));
    }
    OCULAR_ASSIGN_OR_RETURN(KvHandle cache, kv.Acquire(capacity, image_rows));
    r.kv_cache_bytes += cache.bytes();
    seqs.emplace_back(std::move(p), std::move(cache), runner.vocab(), runner.model().NewState());
    t0 = std::chrono::steady_clock::now();
    OCULAR_RETURN_IF_ERROR(runner.Prefill(seqs.back(), f, nullptr));
    prefill_ms += MsSince(t0);
  }
  r.prefill_tokens = static_cast<int>(seqs[0].prompt().size());
  r.prefill_tok_s = b.batch * r.prefill_tokens / (prefill_ms / 1000.0);
  r.vision_gflop = s.image_gflop;
  std::vector<Sequence*> batch;
  for (Sequence& q : seqs) batch.push_back(&q);
  auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < b.decode_tokens; ++step) runner.DecodeStep(batch);
  const double decode_ms = MsSince(t0);
  r.decode_tokens = b.decode_tokens;
  r.decode_tok_s = double(b.batch) * b.decode_tokens / (decode_ms / 1000.0);
  r.text_weight_bytes = s.text_weight_bytes;
  // Weights are streamed once per step whatever the batch.
  r.decode_weight_gb_s = b.decode_tokens / (decode_ms / 1000.0) * double(r.text_weight_bytes) / 1e9;
  r.workspace_bytes = runner.workspace_bytes();
  r.peak_rss_bytes = PeakRssBytes();
  return r;
}

}  // namespace ocular

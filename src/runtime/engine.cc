// Engine: ties a model family's processor (tokenizer, image preprocessing, prompt template),
// its VlModel and the runner behind the public API.
#include "ocular/engine.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>

#include "core/thread_pool.h"
#include "image/image.h"
#include "kernels/ops.h"
#include "models/chat.h"
#include "models/registry.h"
#include "runtime/generator.h"
#include "runtime/grammar_constraint.h"
#include "runtime/recorder.h"
#include "runtime/runner.h"
#include "runtime/scheduler.h"
#include "text/tokenizer.h"

namespace ocular {

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kImages:
      return "images";
    case Stage::kEncode:
      return "encode";
    case Stage::kPrefill:
      return "prefill";
    case Stage::kDecode:
      return "decode";
  }
  return "";
}

namespace {

size_t PeakRssBytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Sampling options are user input: NaN, negative or out-of-range values are refused.
Status CheckOptions(const GenerateOptions& o) {
  if (o.max_tokens < 0) {
    return Error(StatusCode::kInvalidArgument, "generate", "max_tokens must be >= 0, got ",
                 o.max_tokens);
  }
  if (!(o.temperature >= 0.0f) || !std::isfinite(o.temperature)) {
    return Error(StatusCode::kInvalidArgument, "generate",
                 "temperature must be a finite number >= 0 (0 = greedy), got ", o.temperature);
  }
  if (o.top_k < 0)
    return Error(StatusCode::kInvalidArgument, "generate", "top_k must be >= 0, got ", o.top_k);
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) {
    return Error(StatusCode::kInvalidArgument, "generate", "top_p must be in (0, 1], got ",
                 o.top_p);
  }
  return Status::Ok();
}

// The precision a user asked for, checked against what the checkpoint stores. The bf16
// precisions run bf16 checkpoints, and quantized files whose other matrices are all bf16 (a
// GGUF quantized from a bf16 checkpoint: its vision tower, projector, mllama's cross-attention
// K/V): those parts are bf16 models, and their bf16 GEMMs are 3x the f32 path's speed.
StatusOr<Precision> ChoosePrecision(const std::string& name, const ModelSpec& spec) {
  const bool bf16 =
      spec.weight_dtype == DType::kBF16 || (spec.quantized && spec.float_dtype == DType::kBF16);
  if (name == "auto") return bf16 ? Precision::kBF16 : Precision::kF32;
  Precision p;
  if (!ParsePrecision(name, &p)) {
    return Error(StatusCode::kInvalidArgument, "engine", "unknown precision '", name,
                 "' (auto, f32, bf16, bf16-fast)");
  }
  if (p != Precision::kF32 && !bf16) {
    return Error(StatusCode::kUnimplemented, "engine", "precision ", name,
                 " runs bf16 checkpoints (or quantized ones whose other matrices are bf16); "
                 "this one stores ",
                 spec.weight_formats, " weights (use f32)");
  }
  return p;
}

StatusOr<QuantActivations> ChooseQuantActivations(const std::string& name) {
  QuantActivations q;
  if (!ParseQuantActivations(name, &q)) {
    return Error(StatusCode::kInvalidArgument, "engine", "unknown quant_activations '", name,
                 "' (int8, f32)");
  }
  return q;
}

StatusOr<KvDType> ChooseKv(const std::string& name, Precision p) {
  if (name == "auto") return p == Precision::kF32 ? KvDType::kF32 : KvDType::kBF16;
  if (name == "f32") return KvDType::kF32;
  if (name == "bf16") return KvDType::kBF16;
  return Error(StatusCode::kInvalidArgument, "engine", "unknown kv_cache '", name,
               "' (auto, f32, bf16)");
}

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

class EngineImpl : public Engine {
 public:
  EngineImpl(LoadedModel loaded, const EngineOptions& opts, Precision precision,
             QuantActivations quant_activations, KvDType kv)
      : model_(std::move(loaded.model)),
        processor_(std::move(loaded.processor)),
        opts_(opts),
        pool_(opts.threads > 0 ? opts.threads : ThreadPool::DefaultThreadCount()),
        backend_(pool_),
        precision_(precision),
        quant_activations_(quant_activations),
        kv_(model_->spec().kv, kv),
        runner_(*model_, backend_, precision,
                {.max_batch = opts.max_batch, .max_context = opts.max_context}, quant_activations),
        feature_cache_(opts.image_cache_bytes),
        fingerprint_(StrCat(model_->spec().architecture, "|", model_->spec().weight_bytes, "|",
                            model_->spec().weight_formats, "|", PrecisionName(precision), "|",
                            QuantActivationsName(quant_activations), "|",
                            model_->spec().image_size)),
        scheduler_(runner_, kv_, run_mu_, opts.image_cache_bytes > 0 ? &feature_cache_ : nullptr,
                   opts.max_batch, opts.prefill_chunk) {}

  ModelInfo Info() const override {
    const ModelSpec& s = model_->spec();
    ModelInfo i;
    i.architecture = s.architecture;
    i.image_size = s.image_size;
    i.image_tokens = s.image_tokens;
    i.vocab_size = s.vocab_size;
    i.weight_dtype = DTypeName(s.weight_dtype);
    i.weight_formats = s.weight_formats;
    i.weight_bytes = s.weight_bytes;
    i.threads = pool_.size();
    i.isa = backend_.isa();
    i.precision = PrecisionName(precision_);
    i.kv_cache = kv_.dtype() == KvDType::kF32 ? "f32" : "bf16";
    i.quant_activations = QuantActivationsName(quant_activations_);
    i.chat_format = processor_->chat_format();
    i.image_marker = processor_->image_marker();
    return i;
  }

  // Runs in the scheduler's shared batch (run_mu_ is taken by the scheduler per step).
  StatusOr<GenerateResult> Generate(const std::vector<ImageInput>& images,
                                    const std::string& prompt, const GenerateOptions& o,
                                    const TokenCallback& on_text) override {
    return Run(images, prompt, nullptr, o, on_text, nullptr, nullptr);
  }

  EngineStats Stats() const override {
    EngineStats e;
    SchedulerStats s = scheduler_.stats();
    e.decode_steps_by_batch = std::move(s.decode_steps_by_batch);
    e.running = s.running;
    e.waiting = s.waiting;
    e.prefills = s.prefills;
    e.prefill_chunks = s.prefill_chunks;
    e.images_encoded = s.images_encoded;
    e.scheduler_steps = s.steps;
    e.encode_seconds = s.encode_seconds;
    e.prefill_seconds = s.prefill_seconds;
    e.decode_seconds = s.decode_seconds;
    const FeatureCacheStats c = feature_cache_.stats();
    e.image_cache_hits = c.hits;
    e.image_cache_misses = c.misses;
    e.image_cache_evictions = c.evictions;
    e.image_cache_bytes = c.bytes;
    e.image_cache_entries = c.entries;
    e.image_cache_max_bytes = c.max_bytes;
    e.kv_bytes_in_use = kv_.bytes_in_use();
    e.kv_bytes_pooled = kv_.bytes_cached();
    return e;
  }

  StatusOr<GenerateResult> Trace(const std::vector<ImageInput>& images, const std::string& prompt,
                                 const GenerateOptions& o, const std::string& out_path) override {
    GenerateOptions greedy = o;
    greedy.temperature = 0;
    greedy.stop_at_eos = false;
    RecordingTracer tracer;
    Tensor pixels;
    std::lock_guard<std::mutex> lock(run_mu_);
    OCULAR_ASSIGN_OR_RETURN(GenerateResult r,
                            Run(images, prompt, nullptr, greedy, nullptr, &tracer, &pixels));
    std::vector<int64_t> in_ids(r.prompt_ids.begin(), r.prompt_ids.end());
    std::vector<int64_t> out_ids(r.output_ids.begin(), r.output_ids.end());
    std::vector<NamedTensor> tensors;
    tensors.push_back({"input_ids", {in_ids.data(), DType::kI64, {int64_t(in_ids.size())}}});
    if (!pixels.data.empty()) tensors.push_back({"pixel_values", pixels.view()});
    for (const auto& [name, t] : tracer.taps()) tensors.push_back({name, t.view()});
    tensors.push_back({"generated_ids", {out_ids.data(), DType::kI64, {int64_t(out_ids.size())}}});
    OCULAR_RETURN_IF_ERROR(WriteSafetensors(out_path, tensors, {{"producer", "ocular trace"}}));
    return r;
  }

  StatusOr<BenchResult> Bench(const BenchOptions& b) override {
    if (b.prompt_tokens < 1 || b.decode_tokens < 1 || b.batch < 1) {
      return Error(StatusCode::kInvalidArgument, "bench",
                   "prompt_tokens, decode_tokens and batch must be >= 1");
    }
    std::lock_guard<std::mutex> lock(run_mu_);
    const ModelSpec& s = model_->spec();
    const int64_t H = s.hidden_size, N = s.image_tokens;
    const int64_t in_prompt = s.image_prompt_tokens > 0 ? s.image_prompt_tokens : N;
    const int32_t bos =
        processor_->tokenizer().bos_id() >= 0 ? processor_->tokenizer().bos_id() : 2;
    BenchResult r;
    r.batch = b.batch;
    std::vector<Sequence> seqs;
    seqs.reserve(b.batch);
    std::vector<float> features(static_cast<size_t>(N * H));
    double prefill_ms = 0;
    for (int q = 0; q < b.batch; ++q) {
      // Each sequence its own synthetic image and prompt.
      OCULAR_ASSIGN_OR_RETURN(Tensor pixels, BenchPixels(q));
      if (q == 0 && b.vision_warmup) {  // fault in the mapped vision weights and the workspace
        runner_.EncodeImages(pixels.data.data(), 1, features.data(), nullptr);
      }
      auto t0 = std::chrono::steady_clock::now();
      runner_.EncodeImages(pixels.data.data(), 1, features.data(), nullptr);
      if (q == 0) r.vision_ms = MsSince(t0);
      SequenceParams p;
      p.prompt.assign(in_prompt, s.image_token_id);
      p.prompt.push_back(bos);
      for (int i = 0; i < b.prompt_tokens - 1; ++i) p.prompt.push_back(100 + (i + 7 * q) % 50);
      p.prefix_len = static_cast<int64_t>(p.prompt.size());
      p.max_new_tokens = b.decode_tokens + 1;  // the first token comes from the prefill
      const int64_t capacity = static_cast<int64_t>(p.prompt.size()) + p.max_new_tokens;
      if (capacity > s.max_positions) {
        return Error(StatusCode::kResourceExhausted, "bench",
                     "prompt + decode tokens exceed the context length ", s.max_positions);
      }
      if (q == 0) {  // warm-up: the same prefill once, untimed (faults in the text weights)
        OCULAR_ASSIGN_OR_RETURN(KvHandle warm_cache, kv_.Acquire(capacity, 1));
        Sequence warm(p, std::move(warm_cache), runner_.vocab());
        OCULAR_RETURN_IF_ERROR(runner_.Prefill(warm, features.data(), N, nullptr));
      }
      OCULAR_ASSIGN_OR_RETURN(KvHandle cache, kv_.Acquire(capacity, 1));
      r.kv_cache_bytes += cache.bytes();
      seqs.emplace_back(std::move(p), std::move(cache), runner_.vocab());
      t0 = std::chrono::steady_clock::now();
      OCULAR_RETURN_IF_ERROR(runner_.Prefill(seqs.back(), features.data(), N, nullptr));
      prefill_ms += MsSince(t0);
    }
    r.prefill_tokens = static_cast<int>(seqs[0].params().prompt.size());
    r.prefill_tok_s = b.batch * r.prefill_tokens / (prefill_ms / 1000.0);
    r.vision_gflop = s.image_gflop;
    r.vision_tiles = s.image_tiles;
    std::vector<Sequence*> batch;
    for (Sequence& q : seqs) batch.push_back(&q);
    auto t0 = std::chrono::steady_clock::now();
    for (int step = 0; step < b.decode_tokens; ++step) runner_.DecodeStep(batch);
    const double decode_ms = MsSince(t0);
    r.decode_tokens = b.decode_tokens;
    r.decode_tok_s = double(b.batch) * b.decode_tokens / (decode_ms / 1000.0);
    r.text_weight_bytes = s.text_weight_bytes;
    // Weights are streamed once per step whatever the batch.
    r.decode_weight_gb_s =
        b.decode_tokens / (decode_ms / 1000.0) * double(r.text_weight_bytes) / 1e9;
    r.workspace_bytes = runner_.workspace_bytes();
    r.peak_rss_bytes = PeakRssBytes();
    return r;
  }

  StatusOr<PromptTokens> BuildPrompt(int n_images, const std::string& prompt,
                                     const GenerateOptions& o) const override {
    OCULAR_ASSIGN_OR_RETURN(Prompt p, MakePrompt(n_images, prompt, nullptr, o));
    return PromptTokens{std::move(p.ids), p.prefix_len};
  }

  StatusOr<PromptTokens> BuildChatPrompt(int n_images, const std::vector<ChatMessage>& messages,
                                         const GenerateOptions& o) const override {
    OCULAR_ASSIGN_OR_RETURN(Prompt p, MakePrompt(n_images, "", &messages, o));
    return PromptTokens{std::move(p.ids), p.prefix_len};
  }

  StatusOr<GenerateResult> GenerateChat(const std::vector<ImageInput>& images,
                                        const std::vector<ChatMessage>& messages,
                                        const GenerateOptions& o,
                                        const TokenCallback& on_text) override {
    return Run(images, "", &messages, o, on_text, nullptr, nullptr);
  }

  StatusOr<std::vector<int32_t>> Tokenize(const std::string& text) const override {
    return processor_->tokenizer().Encode(text);
  }
  std::string TokenPiece(int32_t id) const override {
    return processor_->tokenizer().IdToPiece(id);
  }
  std::string Detokenize(const std::vector<int32_t>& ids, bool skip_special) const override {
    return processor_->tokenizer().Decode(ids, skip_special);
  }

 private:
  // Bench's synthetic image for sequence q: [1, 3, R, R] pixel values, or, for a family with
  // its own pixel layout (mllama's tiles), the processor's pixels of a 2R x 2R pattern image
  // (every tile of a 2 x 2 canvas).
  StatusOr<Tensor> BenchPixels(int q) const {
    const int R = model_->spec().image_size;
    if (model_->spec().pixel_floats == 0) {
      Tensor pixels({1, 3, R, R});
      for (int64_t i = 0; i < pixels.numel(); ++i) {
        pixels.data[i] = float((i * 7919 + q * 104729) % 2001) / 1000.0f - 1.0f;
      }
      return pixels;
    }
    Image image(2 * R, 2 * R);
    for (size_t i = 0; i < image.rgb.size(); ++i) {
      image.rgb[i] = static_cast<uint8_t>((i * 7919 + static_cast<size_t>(q) * 104729) % 251);
    }
    OCULAR_ASSIGN_OR_RETURN(Tensor px, processor_->Pixels(image));
    px.shape.insert(px.shape.begin(), 1);
    return px;
  }

  // The prompt of `prompt` (messages == nullptr) or of the conversation `messages`.
  // crops: LoadPixels' pan-and-scan crop count per image (empty: none).
  StatusOr<Prompt> MakePrompt(int n_images, const std::string& prompt,
                              const std::vector<ChatMessage>* messages, const GenerateOptions& o,
                              const std::vector<int>& crops = {}) const {
    if (n_images < 0) {
      return Error(StatusCode::kInvalidArgument, "engine", "n_images must be >= 0, got ", n_images);
    }
    PromptOptions po;
    po.separate_newline = o.separate_newline;
    po.chat = o.chat;
    po.date = o.date;
    po.image_crops = crops;
    if ((messages || o.chat) && processor_->chat_format().empty()) {
      // The processor's error says why: no template in the family or the checkpoint, or one
      // ocular does not know.
      OCULAR_RETURN_IF_ERROR(processor_->RenderChat({ChatMessage::Text("user", "")}, po).status());
      return Error(StatusCode::kUnimplemented, "chat", "this model has no chat format");
    }
    if (messages == nullptr) return processor_->BuildPrompt(n_images, prompt, po);
    OCULAR_RETURN_IF_ERROR(CheckChatMessages(*messages, n_images));
    return processor_->BuildChatPrompt(n_images, *messages, po);
  }

  // Decodes and preprocesses every image into pixels [n, 3, R, R] (or [n, pixel_floats]); with
  // pan-and-scan, each image is followed by its crops and crops[i] counts those of image i.
  Status LoadPixels(const std::vector<ImageInput>& images, const GenerateOptions& o, Tensor* pixels,
                    std::vector<int>* crops, std::vector<GenerateResult::ImageSize>* sizes) const {
    sizes->clear();
    crops->clear();
    if (images.empty()) return Status::Ok();
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t n = static_cast<int64_t>(images.size());
    const ProgressCallback& progress = o.on_progress;
    if (progress) progress({Stage::kImages, 0, n, 0.0});
    const int max_images = model_->spec().max_images;
    if (max_images > 0 && n > max_images) {
      return Error(StatusCode::kInvalidArgument, "engine", n, " images given; ",
                   model_->spec().architecture, " takes at most ", max_images, " per prompt");
    }
    const bool pan_and_scan = o.pan_and_scan.value_or(processor_->pan_and_scan_default());
    DecodeOptions d;
    d.max_pixels = opts_.max_image_pixels;
    d.exif_rotate = opts_.exif_rotate;
    std::vector<Tensor> views;
    for (size_t i = 0; i < images.size(); ++i) {
      const ImageInput& in = images[i];
      StatusOr<Image> img = in.from_bytes ? DecodeImage(in.bytes, d) : LoadImage(in.path, d);
      if (!img.ok()) {
        if (!in.from_bytes) return img.status();
        return Status(img.status().code(), in.path + ": " + img.status().message());
      }
      sizes->push_back({img->width, img->height});
      OCULAR_ASSIGN_OR_RETURN(std::vector<Tensor> v, processor_->ImageViews(*img, pan_and_scan));
      crops->push_back(static_cast<int>(v.size()) - 1);
      for (Tensor& t : v) views.push_back(std::move(t));
      if (progress) progress({Stage::kImages, static_cast<int64_t>(i) + 1, n, MsSince(t0)});
    }
    if (!pan_and_scan) crops->clear();
    const int64_t total = static_cast<int64_t>(views.size());
    if (max_images > 0 && total > max_images) {
      return Error(StatusCode::kInvalidArgument, "engine", n, " images with their pan-and-scan ",
                   "crops make ", total, "; ", model_->spec().architecture, " takes at most ",
                   max_images, " per prompt");
    }
    const int R = model_->spec().image_size;
    const int64_t per_image = model_->spec().pixel_floats;
    *pixels = per_image > 0 ? Tensor({total, per_image}) : Tensor({total, 3, R, R});
    for (int64_t i = 0; i < total; ++i) {
      if (views[i].numel() * total != pixels->numel()) {
        return Error(StatusCode::kInternal, "engine", "image ", i, " has ", views[i].numel(),
                     " pixel values; the model takes ", pixels->numel() / total);
      }
      std::copy(views[i].data.begin(), views[i].data.end(),
                pixels->data.begin() + i * views[i].numel());
    }
    return Status::Ok();
  }

  // With a tracer: REQUIRES run_mu_ held (the runner is used directly). Without: runs in the
  // scheduler's batch.
  StatusOr<GenerateResult> Run(const std::vector<ImageInput>& images, const std::string& prompt,
                               const std::vector<ChatMessage>* messages, const GenerateOptions& o,
                               const TokenCallback& on_text, RecordingTracer* tracer,
                               Tensor* pixels_out) {
    OCULAR_RETURN_IF_ERROR(CheckOptions(o));
    auto t0 = std::chrono::steady_clock::now();
    GenerateResult r;
    Tensor pixels;
    std::vector<int> crops;
    OCULAR_RETURN_IF_ERROR(LoadPixels(images, o, &pixels, &crops, &r.image_sizes));
    const double load_ms = MsSince(t0);
    OCULAR_ASSIGN_OR_RETURN(
        Prompt p, MakePrompt(static_cast<int>(images.size()), prompt, messages, o, crops));
    r.prompt_ids = p.ids;
    const Tokenizer& tok = processor_->tokenizer();
    GenerationRequest req;
    req.ids = std::move(p.ids);
    req.prefix_len = p.prefix_len;
    req.pixel_values = images.empty() ? nullptr : &pixels;
    req.max_new_tokens = o.max_tokens;
    req.sampling = {o.temperature, o.top_k, o.top_p, o.seed,
                    o.suppress_padding_tokens ? model_->spec().image_token_id : -1};
    // The tokenizer's eos and the config's end-of-generation ids (generate() stops on any).
    if (o.stop_at_eos) {
      if (tok.eos_id() >= 0) req.eos_ids.push_back(tok.eos_id());
      for (int32_t id : model_->spec().eos_ids) {
        if (std::find(req.eos_ids.begin(), req.eos_ids.end(), id) == req.eos_ids.end()) {
          req.eos_ids.push_back(id);
        }
      }
    }
    auto is_eos = [&](int32_t id) {
      return std::find(req.eos_ids.begin(), req.eos_ids.end(), id) != req.eos_ids.end();
    };
    OCULAR_ASSIGN_OR_RETURN(req.constraint, MakeGrammarConstraint(o, GrammarVocab(), req.eos_ids));
    req.record_prompt_logits = tracer != nullptr;
    req.record_decode_logits = tracer != nullptr;
    req.progress = o.on_progress ? &o.on_progress : nullptr;
    StreamingDecoder stream(tok, /*skip_special=*/true);
    StopFilter stop(o.stop);
    TokenSink sink = nullptr;
    if (on_text || stop.active()) {
      sink = [&](int32_t id) {
        if (is_eos(id)) return true;
        std::string piece = stream.Put(id);
        if (stop.active()) piece = stop.Put(piece);
        const bool go_on = piece.empty() || !on_text || on_text(piece);
        return go_on && !stop.stopped();
      };
    }
    StatusOr<GenerationOutput> generated = Status(StatusCode::kInternal, "not run");
    if (tracer != nullptr) {
      generated = ocular::Generate(runner_, kv_, req, tracer, sink);
    } else {
      ScheduledRequest sr;
      sr.gen = req;  // the sink reads req.eos_ids
      if (opts_.image_cache_bytes > 0 && !images.empty()) {
        // One key per image the model encodes (pan-and-scan crops follow their image).
        const int64_t per_image = pixels.numel() / pixels.dim(0);
        int64_t view = 0;
        for (size_t i = 0; i < images.size(); ++i) {
          const int views = 1 + (crops.empty() ? 0 : crops[i]);
          for (int k = 0; k < views; ++k, ++view) {
            sr.image_keys.push_back(MakeFeatureKey(
                fingerprint_, r.image_sizes[i].width, r.image_sizes[i].height,
                pixels.data.data() + view * per_image, static_cast<size_t>(per_image)));
          }
        }
      }
      generated = scheduler_.Generate(sr, sink);
    }
    OCULAR_ASSIGN_OR_RETURN(GenerationOutput out, std::move(generated));
    if (sink && out.finish != FinishReason::kCancelled) {
      std::string rest = stream.Finish();
      if (stop.active()) rest = stop.Put(rest) + stop.Finish();
      if (on_text && !rest.empty()) on_text(rest);
    }
    if (tracer) tracer->Add("decode_logits", std::move(out.decode_logits));
    r.output_ids = out.generated;
    r.finish_reason = stop.stopped() ? "stop" : FinishReasonName(out.finish);
    std::vector<int32_t> answer = out.generated;
    if (!answer.empty() && is_eos(answer.back())) answer.pop_back();
    r.text = stop.Cut(tok.Decode(answer, /*skip_special=*/true));
    r.raw_text = stop.Cut(tok.Decode(answer, /*skip_special=*/false));
    r.timings.image_ms = load_ms + out.image_ms;
    r.timings.prefill_ms = out.prefill_ms;
    r.timings.decode_ms = out.decode_ms;
    r.timings.prefill_tokens = static_cast<int>(r.prompt_ids.size());
    r.timings.decode_tokens = static_cast<int>(out.generated.size());
    if (pixels_out) *pixels_out = std::move(pixels);
    return r;
  }

  // The vocabulary's bytes for constrained decoding, built at the first request that asks.
  std::shared_ptr<const grammar::TokenVocabulary> GrammarVocab() {
    std::call_once(grammar_vocab_once_, [&] {
      grammar_vocab_ = GrammarVocabulary(processor_->tokenizer(), runner_.vocab());
    });
    return grammar_vocab_;
  }

  std::unique_ptr<VlModel> model_;
  std::unique_ptr<Processor> processor_;
  const EngineOptions opts_;
  std::once_flag grammar_vocab_once_;
  std::shared_ptr<const grammar::TokenVocabulary> grammar_vocab_;
  ThreadPool pool_;
  Backend backend_;
  const Precision precision_;
  const QuantActivations quant_activations_;
  KvPool kv_;
  std::mutex run_mu_;  // one model execution at a time (the runner's arena is single-use)
  Runner runner_;
  FeatureCache feature_cache_;
  const std::string fingerprint_;  // the feature cache's model identity
  Scheduler scheduler_;            // last: its thread stops before the members above go
};

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& dir, const EngineOptions& o) {
  if (o.threads < 0) return Error(StatusCode::kInvalidArgument, "engine", "threads must be >= 0");
  if (o.max_batch < 1 || o.max_batch > 1024) {
    return Error(StatusCode::kInvalidArgument, "engine", "max_batch must be in [1, 1024], got ",
                 o.max_batch);
  }
  if (o.prefill_chunk < 1) {
    return Error(StatusCode::kInvalidArgument, "engine", "prefill_chunk must be >= 1, got ",
                 o.prefill_chunk);
  }
  OCULAR_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(dir));
  if (o.max_context < 0 || o.max_context > loaded.model->spec().max_positions) {
    return Error(StatusCode::kInvalidArgument, "engine", "max_context must be in [0, ",
                 loaded.model->spec().max_positions, "] (the model's context length), got ",
                 o.max_context);
  }
  OCULAR_ASSIGN_OR_RETURN(Precision precision, ChoosePrecision(o.precision, loaded.model->spec()));
  OCULAR_ASSIGN_OR_RETURN(KvDType kv, ChooseKv(o.kv_cache, precision));
  OCULAR_ASSIGN_OR_RETURN(QuantActivations quant, ChooseQuantActivations(o.quant_activations));
  return std::unique_ptr<Engine>(new EngineImpl(std::move(loaded), o, precision, quant, kv));
}

}  // namespace ocular

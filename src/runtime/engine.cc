// Engine: ties a model family's processor (tokenizer, image preprocessing, prompt template),
// its VlModel and the runtime behind the public API. Every generation — Generate, GenerateChat
// and Trace — takes the one path: the request's typed prompt (request_prompt.h) goes to the
// Scheduler, which batches it with whatever else runs. Bench times the Runner directly.
#include "ocular/engine.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>

#include "core/enum_names.h"
#include "core/thread_pool.h"
#include "models/registry.h"
#include "runtime/bench.h"
#include "runtime/engine_options.h"
#include "runtime/generator.h"
#include "runtime/grammar_constraint.h"
#include "runtime/recorder.h"
#include "runtime/request_prompt.h"
#include "runtime/runner.h"
#include "runtime/scheduler.h"
#include "runtime/stop_filter.h"
#include "text/tokenizer.h"

namespace ocular {

const char* StageName(Stage stage) {
  static constexpr EnumName<Stage> kNames[] = {{Stage::kImages, "images"},
                                               {Stage::kEncode, "encode"},
                                               {Stage::kPrefill, "prefill"},
                                               {Stage::kDecode, "decode"}};
  return NameOf(stage, kNames, "");
}

namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// pixel_values of a traced prompt: [n, 3, R, R] when every image is one crop of the model's
// size, else [n, floats per image] in the family's layout (mllama's tiles).
Tensor PixelValues(const Prompt& p, int R) {
  const int64_t n = static_cast<int64_t>(p.images.size());
  const int64_t per = n > 0 ? p.images[0].pixel_count : 0;
  for (const VisionInput& in : p.images) {
    if (in.pixel_count != per) return Tensor({static_cast<int64_t>(p.pixels.size())});
  }
  Tensor t = per == 3 * int64_t{R} * R ? Tensor({n, 3, R, R}) : Tensor({n, per});
  std::copy(p.pixels.begin(), p.pixels.begin() + static_cast<std::ptrdiff_t>(t.numel()),
            t.data.begin());
  return t;
}

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
        prefix_cache_(model_->spec().kv, kv, opts.prefix_cache_bytes,
                      model_->spec().image_token_id),
        scheduler_(runner_, kv_, run_mu_, opts.image_cache_bytes > 0 ? &feature_cache_ : nullptr,
                   opts.max_batch, opts.prefill_chunk,
                   opts.prefix_cache_bytes > 0 ? &prefix_cache_ : nullptr) {}

  ModelInfo Info() const override {
    const ModelSpec& s = model_->spec();
    ModelInfo i;
    i.architecture = s.architecture;
    i.image_size = s.image_size;
    i.image_tokens = s.image_tokens;
    i.vocab_size = s.vocab_size;
    i.context_length = static_cast<int>(s.max_positions);
    // A quantized file's matrices have no one dtype (spec.weight_dtype says F32 there).
    i.weight_dtype = s.quantized ? "quantized" : DTypeName(s.weight_dtype);
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

  StatusOr<GenerateResult> Generate(const std::vector<ImageInput>& images,
                                    const std::string& prompt, const GenerateOptions& o,
                                    const TokenCallback& on_text) override {
    return Run(images, prompt, nullptr, o, on_text, nullptr, nullptr);
  }

  StatusOr<GenerateResult> GenerateChat(const std::vector<ImageInput>& images,
                                        const std::vector<ChatMessage>& messages,
                                        const GenerateOptions& o,
                                        const TokenCallback& on_text) override {
    return Run(images, "", &messages, o, on_text, nullptr, nullptr);
  }

  EngineStats Stats() const override {
    EngineStats e;
    SchedulerStats s = scheduler_.stats();
    e.decode_steps_by_batch = std::move(s.decode_steps_by_batch);
    e.running = s.running;
    e.waiting = s.waiting;
    e.prefills = s.prefills;
    e.prefill_chunks = s.prefill_chunks;
    e.merged_prefills = s.merged_prefills;
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
    const PrefixCacheStats p = prefix_cache_.stats();
    e.prefix_cache_hits = p.hits;
    e.prefix_cache_misses = p.misses;
    e.prefix_cache_tokens_reused = p.tokens_reused;
    e.prefix_cache_evictions = p.evictions;
    e.prefix_cache_bytes = p.bytes;
    e.prefix_cache_entries = p.entries;
    e.prefix_cache_max_bytes = p.max_bytes;
    e.kv_bytes_in_use = kv_.bytes_in_use();
    e.kv_bytes_pooled = kv_.bytes_cached();
    return e;
  }

  // Greedy, through the scheduler like every request (its encode and prefill are traced).
  StatusOr<GenerateResult> Trace(const std::vector<ImageInput>& images, const std::string& prompt,
                                 const GenerateOptions& o, const std::string& out_path) override {
    GenerateOptions greedy = o;
    greedy.temperature = 0;
    greedy.stop_at_eos = false;
    RecordingTracer tracer;
    std::shared_ptr<const Prompt> p;
    OCULAR_ASSIGN_OR_RETURN(GenerateResult r,
                            Run(images, prompt, nullptr, greedy, nullptr, &tracer, &p));
    std::vector<int64_t> in_ids(r.prompt_ids.begin(), r.prompt_ids.end());
    std::vector<int64_t> out_ids(r.output_ids.begin(), r.output_ids.end());
    std::vector<NamedTensor> tensors;
    tensors.push_back({"input_ids", {in_ids.data(), DType::kI64, {int64_t(in_ids.size())}}});
    const Tensor pixels = PixelValues(*p, model_->spec().image_size);
    if (!pixels.data.empty()) tensors.push_back({"pixel_values", pixels.view()});
    for (const auto& [name, t] : tracer.taps()) tensors.push_back({name, t.view()});
    tensors.push_back({"generated_ids", {out_ids.data(), DType::kI64, {int64_t(out_ids.size())}}});
    // "chat": whether input_ids are a chat template's turn (ocular diff says so when only one
    // of two dumps is).
    OCULAR_RETURN_IF_ERROR(WriteSafetensors(
        out_path, tensors, {{"producer", "ocular trace"}, {"chat", o.chat ? "1" : "0"}}));
    return r;
  }

  StatusOr<BenchResult> Bench(const BenchOptions& b) override {
    std::lock_guard<std::mutex> lock(run_mu_);  // the scheduler waits between its steps
    return RunBench(runner_, kv_, *processor_, b);
  }

  StatusOr<PromptTokens> BuildPrompt(int n_images, const std::string& prompt,
                                     const GenerateOptions& o) const override {
    OCULAR_ASSIGN_OR_RETURN(Prompt p, BuildTextPrompt(*processor_, n_images, prompt, nullptr, o));
    return PromptTokens{std::move(p.ids), p.prefix_len()};
  }

  StatusOr<PromptTokens> BuildChatPrompt(int n_images, const std::vector<ChatMessage>& messages,
                                         const GenerateOptions& o) const override {
    OCULAR_ASSIGN_OR_RETURN(Prompt p, BuildTextPrompt(*processor_, n_images, "", &messages, o));
    return PromptTokens{std::move(p.ids), p.prefix_len()};
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
  // The request for the scheduler: the prompt, sampling, the end-of-generation ids (the
  // tokenizer's eos and the config's; generate() stops on any), structured output, tracing.
  StatusOr<ScheduledRequest> Request(std::shared_ptr<const Prompt> prompt, const GenerateOptions& o,
                                     RecordingTracer* tracer,
                                     const std::vector<GenerateResult::ImageSize>& sizes) {
    ScheduledRequest sr;
    GenerationRequest& req = sr.gen;
    req.prompt = std::move(prompt);
    req.max_new_tokens = o.max_tokens;
    req.sampling = {o.temperature, o.top_k, o.top_p, o.seed,
                    o.suppress_padding_tokens ? model_->spec().image_token_id : -1};
    if (o.stop_at_eos) {
      const int32_t eos = processor_->tokenizer().eos_id();
      if (eos >= 0) req.eos_ids.push_back(eos);
      for (int32_t id : model_->spec().eos_ids) {
        if (std::find(req.eos_ids.begin(), req.eos_ids.end(), id) == req.eos_ids.end()) {
          req.eos_ids.push_back(id);
        }
      }
    }
    OCULAR_ASSIGN_OR_RETURN(req.constraint, MakeGrammarConstraint(o, GrammarVocab(), req.eos_ids));
    req.tracer = tracer;
    req.record_prompt_logits = req.record_decode_logits = tracer != nullptr;
    req.progress = o.on_progress ? &o.on_progress : nullptr;
    // One key per image the model encodes (pan-and-scan crops follow their image); a traced
    // request encodes its images itself.
    if ((opts_.image_cache_bytes > 0 || opts_.prefix_cache_bytes > 0) && tracer == nullptr) {
      sr.image_keys = ImageKeys(*req.prompt, fingerprint_, sizes);
    }
    return sr;
  }

  StatusOr<GenerateResult> Run(const std::vector<ImageInput>& images, const std::string& prompt,
                               const std::vector<ChatMessage>* messages, const GenerateOptions& o,
                               const TokenCallback& on_text, RecordingTracer* tracer,
                               std::shared_ptr<const Prompt>* prompt_out) {
    OCULAR_RETURN_IF_ERROR(CheckOptions(o));
    auto t0 = std::chrono::steady_clock::now();
    GenerateResult r;
    OCULAR_ASSIGN_OR_RETURN(Prompt built, BuildRequestPrompt(*processor_, opts_, images, prompt,
                                                             messages, o, &r.image_sizes));
    const double load_ms = MsSince(t0);
    auto p = std::make_shared<const Prompt>(std::move(built));
    r.prompt_ids = p->ids;
    OCULAR_ASSIGN_OR_RETURN(const ScheduledRequest sr, Request(p, o, tracer, r.image_sizes));
    const std::vector<int32_t>& eos_ids = sr.gen.eos_ids;
    auto is_eos = [&](int32_t id) {
      return std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end();
    };
    const Tokenizer& tok = processor_->tokenizer();
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
    OCULAR_ASSIGN_OR_RETURN(GenerationOutput out, scheduler_.Generate(sr, sink));
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
    if (sr.gen.constraint) r.timings.constraint_ms = sr.gen.constraint->busy_ms();
    if (prompt_out) *prompt_out = std::move(p);
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
  PrefixCache prefix_cache_;
  Scheduler scheduler_;  // last: its thread stops before the members above go
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
  OCULAR_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(dir, o.mmproj, o.image_resize));
  if (o.max_context < 0 || o.max_context > loaded.model->spec().max_positions) {
    return Error(StatusCode::kInvalidArgument, "engine", "max_context must be in [0, ",
                 loaded.model->spec().max_positions, "] (the model's context length), got ",
                 o.max_context);
  }
  OCULAR_ASSIGN_OR_RETURN(Precision precision, ChoosePrecision(o.precision, loaded.model->spec()));
  OCULAR_ASSIGN_OR_RETURN(KvDType kv, ChooseKv(o.kv_cache, precision));
  OCULAR_ASSIGN_OR_RETURN(QuantActivations quant, ChooseQuantActivations(o.quant_activations));
  try {
    return std::unique_ptr<Engine>(new EngineImpl(std::move(loaded), o, precision, quant, kv));
  } catch (const std::system_error& e) {
    // The scheduler's thread, after a pool that took every thread the OS would give (the pool
    // itself runs with fewer: ThreadPool's warning).
    return Error(StatusCode::kResourceExhausted, "engine", "cannot start a thread (", e.what(),
                 "); HINT: lower --threads or OCULAR_THREADS");
  } catch (const std::bad_alloc&) {
    // The workspace or the KV pool did not fit in the memory the process may use (e.g. an
    // address-space limit already taken by many threads' stacks).
    return Error(StatusCode::kResourceExhausted, "engine",
                 "out of memory planning the workspace; HINT: lower --threads or OCULAR_THREADS, "
                 "or raise the memory limit");
  }
}

}  // namespace ocular

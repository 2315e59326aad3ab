// Engine: ties the tokenizer, image pipeline, model and generation loop behind the public API.
#include "ocular/engine.h"

#include <sys/resource.h>

#include <chrono>

#include "core/thread_pool.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "kernels/ops.h"
#include "models/paligemma.h"
#include "runtime/generator.h"
#include "runtime/recorder.h"
#include "text/tokenizer.h"

namespace ocular {

namespace {

size_t PeakRssBytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

class EngineImpl : public Engine {
 public:
  EngineImpl(std::unique_ptr<PaliGemma> model, std::unique_ptr<Tokenizer> tok,
             PreprocessConfig pp, const EngineOptions& opts)
      : model_(std::move(model)),
        tok_(std::move(tok)),
        pp_(std::move(pp)),
        opts_(opts),
        pool_(opts.threads > 0 ? opts.threads : ThreadPool::DefaultThreadCount()) {}

  ModelInfo Info() const override {
    const PaliGemmaConfig& c = model_->config();
    ModelInfo i;
    i.architecture = c.text.is_gemma2() ? "PaliGemma 2 (gemma2)" : "PaliGemma 1 (gemma)";
    i.image_size = c.vision.image_size;
    i.image_tokens = c.image_tokens();
    i.vocab_size = c.text.vocab_size;
    i.weight_dtype = DTypeName(model_->weight_dtype());
    i.weight_bytes = model_->weight_bytes();
    i.threads = pool_.size();
    i.isa = ActiveIsa();
    return i;
  }

  StatusOr<GenerateResult> Generate(const std::vector<std::string>& images,
                                    const std::string& prompt, const GenerateOptions& o,
                                    const TokenCallback& on_text) override {
    return Run(images, prompt, o, on_text, nullptr);
  }

  StatusOr<GenerateResult> Trace(const std::vector<std::string>& images, const std::string& prompt,
                                 const GenerateOptions& o, const std::string& out_path) override {
    GenerateOptions greedy = o;
    greedy.temperature = 0;
    greedy.stop_at_eos = false;
    RecordingTracer tracer;
    OCULAR_ASSIGN_OR_RETURN(GenerateResult r, Run(images, prompt, greedy, nullptr, &tracer));
    std::vector<int64_t> in_ids(r.prompt_ids.begin(), r.prompt_ids.end());
    std::vector<int64_t> out_ids(r.output_ids.begin(), r.output_ids.end());
    std::vector<NamedTensor> tensors;
    tensors.push_back({"input_ids", {in_ids.data(), DType::kI64, {int64_t(in_ids.size())}}});
    if (!pixels_.data.empty()) tensors.push_back({"pixel_values", pixels_.view()});
    for (const auto& [name, t] : tracer.taps()) tensors.push_back({name, t.view()});
    tensors.push_back({"generated_ids", {out_ids.data(), DType::kI64, {int64_t(out_ids.size())}}});
    OCULAR_RETURN_IF_ERROR(WriteSafetensors(out_path, tensors, {{"producer", "ocular trace"}}));
    return r;
  }

  StatusOr<BenchResult> Bench(const BenchOptions& b) override {
    if (b.prompt_tokens < 1 || b.decode_tokens < 1) {
      return Error(StatusCode::kInvalidArgument, "bench", "prompt_tokens and decode_tokens must be >= 1");
    }
    const PaliGemmaConfig& c = model_->config();
    const int R = c.vision.image_size;
    Tensor pixels({1, 3, R, R});
    for (int64_t i = 0; i < pixels.numel(); ++i) pixels.data[i] = float((i * 7919) % 2001) / 1000.0f - 1.0f;
    GenerationRequest req;
    req.ids.assign(c.image_tokens(), c.image_token_index);
    req.ids.push_back(tok_->bos_id() >= 0 ? tok_->bos_id() : 2);
    for (int i = 0; i < b.prompt_tokens - 1; ++i) req.ids.push_back(100 + i % 50);
    req.pixel_values = &pixels;
    req.max_new_tokens = b.decode_tokens;
    OCULAR_ASSIGN_OR_RETURN(GenerationOutput out, ocular::Generate(pool_, *model_, req, nullptr));
    BenchResult r;
    r.vision_ms = out.image_ms;
    {  // SigLIP: per layer 4 D×D projections + 2 D×I MLP matmuls, QKᵀ and PV; + projector.
      const double N = c.image_tokens(), D = c.vision.hidden_size, I = c.vision.intermediate_size;
      const double K = 3.0 * c.vision.patch_size * c.vision.patch_size;
      const double per_layer = 2 * N * (4 * D * D + 2 * D * I) + 2 * 2 * N * N * D;
      r.vision_gflop = (2 * N * K * D + c.vision.num_hidden_layers * per_layer +
                        2 * N * D * c.text.hidden_size) / 1e9;
    }
    r.prefill_tokens = static_cast<int>(req.ids.size());
    r.prefill_tok_s = r.prefill_tokens / (out.prefill_ms / 1000.0);
    // The first generated token comes from the prefill logits; the rest are decode steps.
    r.decode_tokens = static_cast<int>(out.generated.size()) - 1;
    r.decode_tok_s = r.decode_tokens > 0 ? r.decode_tokens / (out.decode_ms / 1000.0) : 0;
    r.text_weight_bytes = model_->text_weight_bytes();
    r.decode_weight_gb_s = r.decode_tok_s * double(r.text_weight_bytes) / 1e9;
    r.peak_rss_bytes = PeakRssBytes();
    return r;
  }

  StatusOr<std::vector<int32_t>> Tokenize(const std::string& text) const override {
    return tok_->Encode(text);
  }
  std::string TokenPiece(int32_t id) const override { return tok_->IdToPiece(id); }
  std::string Detokenize(const std::vector<int32_t>& ids, bool skip_special) const override {
    return tok_->Decode(ids, skip_special);
  }

 private:
  // HF PaliGemmaProcessor: "<image>"*N*n_images + "<bos>" + prompt + "\n", tokenized in one
  // call without BOS/EOS (processing_paligemma.py build_string_from_input).
  StatusOr<std::vector<int32_t>> BuildPrompt(size_t n_images, const std::string& prompt,
                                             bool separate_newline) const {
    const PaliGemmaConfig& c = model_->config();
    std::vector<int32_t> ids(n_images * c.image_tokens(), c.image_token_index);
    if (tok_->bos_id() < 0) return Error(StatusCode::kInvalidArgument, "prompt", "tokenizer has no BOS token");
    ids.push_back(tok_->bos_id());
    OCULAR_ASSIGN_OR_RETURN(std::vector<int32_t> body,
                            tok_->Encode(separate_newline ? prompt : prompt + "\n"));
    for (int32_t id : body) {
      if (id == c.image_token_index) {
        return Error(StatusCode::kInvalidArgument, "prompt",
                     "the prompt text contains the image token; pass images separately");
      }
    }
    ids.insert(ids.end(), body.begin(), body.end());
    if (separate_newline) {
      OCULAR_ASSIGN_OR_RETURN(std::vector<int32_t> nl, tok_->Encode("\n"));
      ids.insert(ids.end(), nl.begin(), nl.end());
    }
    return ids;
  }

  Status LoadPixels(const std::vector<std::string>& paths,
                    std::vector<GenerateResult::ImageSize>* sizes) {
    const int R = model_->config().vision.image_size;
    pixels_ = Tensor();
    sizes->clear();
    if (paths.empty()) return Status::Ok();
    Tensor all({static_cast<int64_t>(paths.size()), 3, R, R});
    DecodeOptions d;
    d.max_pixels = opts_.max_image_pixels;
    d.exif_rotate = opts_.exif_rotate;
    for (size_t i = 0; i < paths.size(); ++i) {
      OCULAR_ASSIGN_OR_RETURN(Image img, LoadImage(paths[i], d));
      sizes->push_back({img.width, img.height});
      Tensor px = Preprocess(img, pp_);
      if (px.numel() != 3 * int64_t{R} * R) {
        return Error(StatusCode::kInvalidArgument, "engine", "preprocessor_config.json resizes to ",
                     ShapeString(px.shape), " but the vision tower expects ", R, "x", R);
      }
      std::copy(px.data.begin(), px.data.end(), all.data.begin() + i * px.numel());
    }
    pixels_ = std::move(all);
    return Status::Ok();
  }

  StatusOr<GenerateResult> Run(const std::vector<std::string>& images, const std::string& prompt,
                               const GenerateOptions& o, const TokenCallback& on_text,
                               RecordingTracer* tracer) {
    if (o.max_tokens < 0) return Error(StatusCode::kInvalidArgument, "generate", "max_tokens must be >= 0");
    auto t0 = std::chrono::steady_clock::now();
    GenerateResult r;
    OCULAR_RETURN_IF_ERROR(LoadPixels(images, &r.image_sizes));
    const double load_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    OCULAR_ASSIGN_OR_RETURN(r.prompt_ids, BuildPrompt(images.size(), prompt, o.separate_newline));
    GenerationRequest req;
    req.ids = r.prompt_ids;
    req.pixel_values = images.empty() ? nullptr : &pixels_;
    req.max_new_tokens = o.max_tokens;
    req.sampling = {o.temperature, o.top_k, o.top_p, o.seed,
                    o.suppress_padding_tokens ? model_->config().image_token_index : -1};
    req.eos_id = o.stop_at_eos ? tok_->eos_id() : -1;
    req.record_prompt_logits = tracer != nullptr;
    req.record_decode_logits = tracer != nullptr;
    StreamingDecoder stream(*tok_, /*skip_special=*/true);
    TokenSink sink = nullptr;
    if (on_text) {
      sink = [&](int32_t id) {
        if (id != req.eos_id) {
          std::string piece = stream.Put(id);
          if (!piece.empty()) on_text(piece);
        }
        return true;
      };
    }
    OCULAR_ASSIGN_OR_RETURN(GenerationOutput out, ocular::Generate(pool_, *model_, req, tracer, sink));
    if (on_text) {
      std::string rest = stream.Finish();
      if (!rest.empty()) on_text(rest);
    }
    if (tracer) tracer->Add("decode_logits", std::move(out.decode_logits));
    r.output_ids = out.generated;
    std::vector<int32_t> answer = out.generated;
    if (!answer.empty() && answer.back() == tok_->eos_id() && o.stop_at_eos) answer.pop_back();
    r.text = tok_->Decode(answer, /*skip_special=*/true);
    r.raw_text = tok_->Decode(answer, /*skip_special=*/false);
    r.timings.image_ms = load_ms + out.image_ms;
    r.timings.prefill_ms = out.prefill_ms;
    r.timings.decode_ms = out.decode_ms;
    r.timings.prefill_tokens = static_cast<int>(r.prompt_ids.size());
    r.timings.decode_tokens = static_cast<int>(out.generated.size());
    return r;
  }

  std::unique_ptr<PaliGemma> model_;
  std::unique_ptr<Tokenizer> tok_;
  PreprocessConfig pp_;
  EngineOptions opts_;
  ThreadPool pool_;
  Tensor pixels_;  // the last request's pixel values (kept for Trace)
};

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& dir, const EngineOptions& o) {
  if (o.threads < 0) return Error(StatusCode::kInvalidArgument, "engine", "threads must be >= 0");
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<PaliGemma> model, PaliGemma::Load(dir));
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, Tokenizer::Load(dir));
  OCULAR_ASSIGN_OR_RETURN(PreprocessConfig pp, LoadPreprocessConfig(dir + "/preprocessor_config.json"));
  return std::unique_ptr<Engine>(new EngineImpl(std::move(model), std::move(tok), std::move(pp), o));
}

}  // namespace ocular

#include "runtime/runner.h"

#include <algorithm>

#include "core/check.h"
#include "kernels/ops.h"

namespace ocular {

Runner::Runner(const VlModel& model, const Backend& backend, Precision precision,
               const RunnerLimits& limits, QuantActivations quant_activations)
    : model_(model),
      vocab_(model.spec().vocab_size),
      hidden_(model.spec().hidden_size),
      ex_{backend, precision, arena_, quant_activations} {
  const ModelSpec& s = model.spec();
  // A typical prompt: one image and a short text, unless told more.
  const int64_t context = limits.max_context > 0
                              ? limits.max_context
                              : std::min<int64_t>(s.max_positions, s.image_tokens + 128);
  const int64_t rows = std::max<int64_t>(limits.max_batch, limits.max_context > 0 ? context : 1);
  Plan(rows, context, limits.max_images);
  logits_.resize(static_cast<size_t>(std::max<int64_t>(limits.max_batch, 1)) * vocab_);
  chunks_.reserve(static_cast<size_t>(std::max<int64_t>(limits.max_batch, 1)));
  active_.reserve(chunks_.capacity());
}

void Runner::Plan(int64_t rows, int64_t context, int64_t images) {
  WorkspaceShape want = planned_;
  want.rows = std::max(want.rows, rows);
  want.context = std::max(want.context, context);
  want.images = std::max(want.images, images);
  want.threads = ex_.pool().size();
  const size_t bytes = model_.WorkspaceBytes(want);
  if (bytes > arena_.capacity()) arena_.Reserve(bytes);
  planned_ = want;
  const size_t x = static_cast<size_t>(want.rows * hidden_);
  if (x_.size() < x) x_.resize(x);
}

void Runner::EncodeImages(const Prompt& prompt, size_t begin, size_t end, float* features,
                          Tracer* tracer) {
  OCULAR_CHECK(begin < end && end <= prompt.images.size());
  Plan(1, 1, static_cast<int64_t>(end - begin));
  const std::span<const VisionInput> images(prompt.images.data() + begin, end - begin);
  model_.EncodeImages(ex_, images, prompt.image_pixels(begin), features, tracer);
}

// The logits of the last of x's `rows` rows (the prompt's last) into logits_ (with
// prompt_logits: of every row, tapped) and the first token.
void Runner::SampleFirst(Sequence& seq, const float* x, int64_t rows, Tracer* tracer,
                         std::vector<float>* prompt_logits) {
  if (prompt_logits != nullptr) {
    OCULAR_CHECK(rows == seq.prompt().size(), "HINT: prompt logits come from a whole prefill");
    prompt_logits->resize(static_cast<size_t>(rows) * vocab_);
    model_.Logits(ex_, x, rows, prompt_logits->data());
    Tap(tracer, "logits", prompt_logits->data(), {rows, vocab_});
    std::copy_n(prompt_logits->data() + (rows - 1) * vocab_, vocab_, logits_.data());
  } else {
    model_.Logits(ex_, x + (rows - 1) * hidden_, 1, logits_.data());
  }
  if (!seq.done()) seq.SampleAndAppend(logits_.data(), vocab_);
}

Status Runner::Prefill(Sequence& seq, const float* features, Tracer* tracer,
                       std::vector<float>* prompt_logits) {
  const Prompt& prompt = seq.prompt();
  const int64_t T = prompt.size();
  if (T == 0) return Error(StatusCode::kInvalidArgument, "generate", "empty prompt");
  OCULAR_CHECK(seq.position() == 0, "HINT: Prefill runs a sequence's first pass");
  Plan(T, seq.cache()->capacity(), 0);
  OCULAR_RETURN_IF_ERROR(model_.Embed(ex_, prompt.ids, features,
                                      features != nullptr ? prompt.feature_rows() : 0, x_.data(),
                                      tracer));
  const SeqChunk chunk = seq.Chunk(0, T, features);
  model_.Forward(ex_, Batch{std::span<const SeqChunk>(&chunk, 1), T}, x_.data(), tracer);
  seq.Advance(T);
  SampleFirst(seq, x_.data(), T, tracer, prompt_logits);
  return Status::Ok();
}

Status Runner::BeginPrefill(Sequence& seq, const float* features, PrefillTask* task,
                            Tracer* tracer) {
  const Prompt& prompt = seq.prompt();
  const int64_t T = prompt.size(), start = seq.position();
  if (T == 0) return Error(StatusCode::kInvalidArgument, "generate", "empty prompt");
  OCULAR_CHECK(start < T, "HINT: a prefill runs a sequence's first pass");
  if (start > 0) features = nullptr;  // the cached rows held every image token
  const int64_t rows = T - start;
  Plan(rows, seq.cache()->capacity(), 0);
  task->x.resize(static_cast<size_t>(rows * hidden_));
  OCULAR_RETURN_IF_ERROR(model_.Embed(ex_, std::span<const int32_t>(prompt.ids).subspan(start),
                                      features, features != nullptr ? prompt.feature_rows() : 0,
                                      task->x.data(), tracer));
  task->seq = &seq;
  task->features = features;
  task->start = start;
  task->rows = rows;
  task->next_layer = 0;
  return Status::Ok();
}

int Runner::PrefillLayers(PrefillTask& task, int layers, Tracer* tracer) {
  OCULAR_CHECK(task.seq != nullptr && layers >= 1);
  Sequence& seq = *task.seq;
  const int end = std::min(num_layers(), task.next_layer + layers);
  // Prefill's single chunk: the prompt's rows from task.start (the position advances once every
  // layer has stored its K/V).
  const SeqChunk chunk = seq.Chunk(task.start, task.rows, task.features);
  Plan(task.rows, seq.cache()->capacity(), 0);
  model_.ForwardLayers(ex_, Batch{std::span<const SeqChunk>(&chunk, 1), task.rows}, task.x.data(),
                       tracer, task.next_layer, end);
  task.next_layer = end;
  return num_layers() - end;
}

int Runner::PrefillLayers(std::span<PrefillTask* const> tasks, int layers) {
  OCULAR_CHECK(!tasks.empty() && layers >= 1);
  if (tasks.size() == 1) return PrefillLayers(*tasks[0], layers);
  const int begin = tasks[0]->next_layer;
  const int end = std::min(num_layers(), begin + layers);
  int64_t rows = 0, context = 0;
  prefill_chunks_.clear();
  for (PrefillTask* t : tasks) {
    OCULAR_CHECK(t->seq != nullptr && t->next_layer == begin, "HINT: merged tasks at one layer");
    prefill_chunks_.push_back(t->seq->Chunk(t->start, t->rows, t->features));
    rows += t->rows;
    context = std::max(context, t->seq->cache()->capacity());
  }
  Plan(rows, context, 0);
  // The tasks' rows one after the other, as Batch lays them out, and back.
  int64_t r = 0;
  for (PrefillTask* t : tasks) {
    std::copy(t->x.begin(), t->x.end(), x_.begin() + r * hidden_);
    r += t->rows;
  }
  model_.ForwardLayers(ex_, Batch{prefill_chunks_, rows}, x_.data(), nullptr, begin, end);
  r = 0;
  for (PrefillTask* t : tasks) {
    std::copy_n(x_.begin() + r * hidden_, t->rows * hidden_, t->x.begin());
    r += t->rows;
    t->next_layer = end;
  }
  return num_layers() - end;
}

void Runner::FinishPrefill(PrefillTask& task, Tracer* tracer, std::vector<float>* prompt_logits) {
  OCULAR_CHECK(task.seq != nullptr && task.next_layer == num_layers());
  Sequence& seq = *task.seq;
  seq.Advance(task.rows);
  SampleFirst(seq, task.x.data(), task.rows, tracer, prompt_logits);
  task.x = {};
  task.seq = nullptr;
}

void Runner::DecodeStep(std::span<Sequence* const> batch) {
  active_.clear();
  for (Sequence* s : batch) {
    if (!s->done()) active_.push_back(s);
  }
  const int64_t B = static_cast<int64_t>(active_.size());
  if (B == 0) return;
  int64_t context = 0;
  for (Sequence* s : active_) context = std::max(context, s->position() + 1);
  Plan(B, context, 0);
  if (logits_.size() < static_cast<size_t>(B) * vocab_)
    logits_.resize(static_cast<size_t>(B) * vocab_);
  chunks_.clear();
  for (int64_t b = 0; b < B; ++b) {
    Sequence* s = active_[b];
    const int32_t token = s->last_token();
    // Ids were sampled from this model's logits, so always inside the vocabulary.
    const Status st = model_.Embed(ex_, std::span<const int32_t>(&token, 1), nullptr, 0,
                                   x_.data() + b * hidden_, nullptr);
    OCULAR_CHECK(st.ok(), "HINT: a sampled id must embed");
    chunks_.push_back(s->Chunk(s->position(), 1));
  }
  model_.Forward(ex_, Batch{chunks_, B}, x_.data(), nullptr);
  model_.Logits(ex_, x_.data(), B, logits_.data());
  for (int64_t b = 0; b < B; ++b) {
    active_[b]->Advance(1);
    active_[b]->SampleAndAppend(logits_.data() + b * vocab_, vocab_);
  }
}

}  // namespace ocular

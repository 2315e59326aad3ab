#include "support/qwen_golden.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "image/image.h"
#include "ocular/engine.h"
#include "runtime/generator.h"
#include "runtime/recorder.h"
#include "runtime/sequence.h"
#include "support/fixture.h"
#include "support/golden.h"

namespace ocular::qwen_golden {

std::vector<std::string> Cases(const std::string& checkpoint) {
  return testing_support::CaseFiles(checkpoint);
}

int64_t Differ(const std::vector<float>& mine, const TensorView& ref) {
  if (static_cast<int64_t>(mine.size()) != ref.numel()) return -1;
  int64_t n = 0;
  for (size_t k = 0; k < mine.size(); ++k) n += mine[k] != ref.as<float>()[k];
  return n;
}

std::unique_ptr<Loaded> LoadTiny(const std::string& checkpoint) {
  auto l = testing_support::LoadRunner("testdata/tiny/" + checkpoint,
                                       RunnerLimits{.max_batch = 2, .max_images = 4});
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? std::move(*l) : nullptr;
}

ImageResize CaseResize(const SafetensorsFile& g) {
  const auto& meta = g.metadata();
  if (!meta.contains("min_pixels")) return {};
  return {std::stoll(meta.at("min_pixels")), std::stoll(meta.at("max_pixels"))};
}

StatusOr<Prompt> CasePrompt(const Processor& p, const std::string& images, const std::string& text,
                            bool chat, const ImageResize& resize) {
  Prompt with_images;
  const std::vector<std::string> names = Split(images);
  ImageOptions options;
  options.resize = resize;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string dir = names[i].find('/') != std::string::npos ? "" : "inputs/";
    OCULAR_ASSIGN_OR_RETURN(Image im, LoadImage("testdata/golden/" + dir + names[i] + ".png"));
    OCULAR_RETURN_IF_ERROR(p.AddImage(im, options, static_cast<int32_t>(i), &with_images));
  }
  PromptOptions o;
  o.chat = chat;
  return p.MakePrompt(std::move(with_images), static_cast<int>(names.size()), text, nullptr, o);
}

void ExpectProcessorMatches(const Prompt& prompt, const SafetensorsFile& g) {
  ASSERT_EQ(prompt.ids, Ids(*g.Find("input_ids")));
  const std::vector<int64_t> want_pos = I64(*g.Find("position_ids"));
  const int64_t T = prompt.size();
  for (int a = 0; a < 3; ++a) {
    for (int64_t t = 0; t < T; ++t) {
      ASSERT_EQ(prompt.positions.At(a, t, T), want_pos[a * T + t]) << "axis " << a << " row " << t;
    }
  }
  EXPECT_EQ(prompt.positions.decode_offset, g.Find("rope_deltas")->as<int64_t>()[0]);
  const TensorView* pv = g.Find("pixel_values");
  if (pv == nullptr) {
    EXPECT_TRUE(prompt.images.empty());
    return;
  }
  EXPECT_EQ(Differ(prompt.pixels, *pv), 0) << "pixel values differ";
  const std::vector<int64_t> grids = I64(*g.Find("image_grid_thw"));
  ASSERT_EQ(grids.size(), 3 * prompt.images.size());
  for (size_t i = 0; i < prompt.images.size(); ++i) {
    for (int k = 0; k < 3; ++k) EXPECT_EQ(prompt.images[i].grid[k], grids[3 * i + k]);
  }
}

void ExpectCaseMatches(const Processor& processor, Runner& runner, KvPool& kv,
                       const std::string& file, double tolerance) {
  auto taps = fixture::GoldenTaps::Open(file);
  ASSERT_TRUE(taps.ok()) << taps.status().ToString();
  const SafetensorsFile& g = taps->file();
  const auto& meta = g.metadata();
  auto prompt = CasePrompt(processor, meta.at("images"), meta.at("prompt"), meta.contains("chat"),
                           CaseResize(g));
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  ExpectProcessorMatches(*prompt, g);
  // Model: every tap, the logits and the greedy continuation.
  const TensorView* gen = g.Find("generated_ids");
  GenerationRequest req;
  req.prompt = std::make_shared<Prompt>(std::move(*prompt));
  req.max_new_tokens = static_cast<int>(gen->numel());
  req.record_prompt_logits = true;
  req.record_decode_logits = true;
  RecordingTracer tracer;
  auto out = Generate(runner, kv, req, &tracer);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  tracer.Add("decode_logits", out->decode_logits);
  EXPECT_GE(testing_support::ExpectEveryTapWithin(*taps, tracer, tolerance), 7);
  EXPECT_EQ(out->generated, Ids(*gen)) << "greedy continuation differs";
}

void ExpectCasesMatchTransformers(const Checkpoint& c) {
  auto m = LoadTiny(c.name);
  ASSERT_NE(m, nullptr);
  if (c.deepstack >= 0) {  // the merger's and each DeepStack merger's rows side by side
    const ModelSpec& spec = m->m.model->spec();
    EXPECT_EQ(spec.feature_floats(), spec.hidden_size * (1 + c.deepstack));
  }
  const std::vector<std::string> cases = Cases(c.name);
  ASSERT_EQ(cases.size(), c.cases);
  for (const std::string& file : cases) {
    SCOPED_TRACE(file);
    ExpectCaseMatches(*m->m.processor, *m->runner, *m->kv, file, c.tolerance);
  }
}

void ExpectImageAndTextDecodeTogether(const std::string& checkpoint) {
  auto m = LoadTiny(checkpoint);
  ASSERT_NE(m, nullptr);
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<std::vector<int32_t>> want;
  std::vector<std::vector<float>> features;
  for (const char* c : {"two", "text_only"}) {
    auto taps =
        fixture::GoldenTaps::Open("testdata/golden/" + checkpoint + "/" + c + ".safetensors");
    ASSERT_TRUE(taps.ok()) << taps.status().ToString();
    const auto& meta = taps->file().metadata();
    auto prompt = CasePrompt(*m->m.processor, meta.at("images"), meta.at("prompt"));
    ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
    want.push_back(Ids(*taps->file().Find("generated_ids")));
    SequenceParams p;
    p.prompt = std::make_shared<const Prompt>(std::move(*prompt));
    p.max_new_tokens = static_cast<int>(want.back().size());
    const ModelSpec& spec = m->m.model->spec();
    features.emplace_back(p.prompt->feature_rows() * spec.feature_floats());
    const bool images = !p.prompt->images.empty();
    if (images) {
      m->runner->EncodeImages(*p.prompt, 0, p.prompt->images.size(), features.back().data(),
                              nullptr);
    }
    auto cache = m->kv->Acquire(p.prompt->size() + p.max_new_tokens, 0);
    ASSERT_TRUE(cache.ok());
    seqs.push_back(std::make_unique<Sequence>(std::move(p), std::move(*cache), spec.vocab_size,
                                              m->m.model->NewState()));
    ASSERT_TRUE(
        m->runner->Prefill(*seqs.back(), images ? features.back().data() : nullptr, nullptr).ok());
  }
  std::vector<Sequence*> batch = {seqs[0].get(), seqs[1].get()};
  while (!seqs[0]->done() || !seqs[1]->done()) m->runner->DecodeStep(batch);
  EXPECT_EQ(seqs[0]->generated(), want[0]);
  EXPECT_EQ(seqs[1]->generated(), want[1]);
}

void ExpectEngineRunsCase(const std::string& checkpoint, const std::string& name, EngineOptions eo,
                          const GenerateOptions& go) {
  eo.threads = 2;
  auto engine = Engine::Load("testdata/tiny/" + checkpoint, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto taps =
      fixture::GoldenTaps::Open("testdata/golden/" + checkpoint + "/" + name + ".safetensors");
  ASSERT_TRUE(taps.ok()) << taps.status().ToString();
  const auto& meta = taps->file().metadata();
  std::vector<ImageInput> images;
  for (const std::string& image : Split(meta.at("images"))) {
    images.emplace_back("testdata/golden/inputs/" + image + ".png");
  }
  GenerateOptions o = go;
  o.max_tokens = 32;
  o.stop_at_eos = false;
  auto r = (*engine)->Generate(images, meta.at("prompt"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt_ids, Ids(*taps->file().Find("input_ids")));
  EXPECT_EQ(r->output_ids, Ids(*taps->file().Find("generated_ids")));
}

void ExpectEngineRunsTwoImages(const std::string& checkpoint) {
  ExpectEngineRunsCase(checkpoint, "two", {}, {});
}

}  // namespace ocular::qwen_golden

// The Qwen-VL golden harness (Qwen2-VL, Qwen2.5-VL, Qwen3-VL; HF checkpoints and llama.cpp
// pairs): a case file of tools/reference/make_qwen2vl.py / make_qwen3vl.py /
// make_llamacpp_qwen_pair.py holds the prompt, the image names, transformers' processor outputs,
// its taps and its greedy tokens; these helpers build ocular's prompt for it and compare. The
// checkpoints and their tolerances are data: qwen_golden_test.cc's table, one row a checkpoint.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "kernels/exec.h"
#include "models/processor.h"
#include "models/registry.h"
#include "ocular/engine.h"
#include "runtime/kv_pool.h"
#include "runtime/runner.h"
#include "support/cases.h"

namespace ocular::qwen_golden {

// The case files of testdata/golden/<checkpoint>/, sorted.
std::vector<std::string> Cases(const std::string& checkpoint);
using testing_support::I64;
using testing_support::Ids;
using testing_support::Split;
// Elements of `mine` that differ from `ref` (f32); -1 when the sizes differ.
int64_t Differ(const std::vector<float>& mine, const TensorView& ref);

// A tiny checkpoint of testdata/tiny with a runner as torch runs it; 2 sequences, 4 images a
// step. Null (with a test failure) when the checkpoint does not load.
using Loaded = testing_support::LoadedRunner;
std::unique_ptr<Loaded> LoadTiny(const std::string& checkpoint);

// The processor's bounds a case was made with (its min_pixels / max_pixels metadata; empty
// when it has none).
ImageResize CaseResize(const SafetensorsFile& g);

// The processor's prompt for a case: its images (inputs/<name>.png, or a path under
// testdata/golden) through AddImage (with `resize`), then MakePrompt; `chat`: the text is one
// user turn rendered with the checkpoint's chat template (`ocular run --chat`).
StatusOr<Prompt> CasePrompt(const Processor& p, const std::string& images, const std::string& text,
                            bool chat = false, const ImageResize& resize = {});

// The processor's ids, get_rope_index positions, rope_deltas, pixel values and grids against the
// case's, exactly.
void ExpectProcessorMatches(const Prompt& prompt, const SafetensorsFile& g);

// One row of the golden table: a tiny checkpoint and its expectations.
struct Checkpoint {
  const char* name;  // testdata/tiny/<name>, testdata/golden/<name>/*.safetensors
  double tolerance;  // relative error per tap
  size_t cases;      // case files it has
  int deepstack;     // Qwen3-VL's DeepStack mergers (feature rows of H * (1 + deepstack)); -1:
                     // not checked
};

// One case file through `processor` and `runner`: the processor exactly
// (ExpectProcessorMatches), then generation with every tap within `tolerance` (at least 7
// compared), the logits and the greedy continuation.
void ExpectCaseMatches(const Processor& processor, Runner& runner, KvPool& kv,
                       const std::string& file, double tolerance);

// Every case of the checkpoint: the processor exactly, then generation with every tap within
// the tolerance, the logits and the greedy continuation.
void ExpectCasesMatchTransformers(const Checkpoint& c);

// The checkpoint's "two" (an image prompt) and "text_only" cases prefilled alone and decoded
// together in one batch (other rope_deltas, DeepStack rows): transformers' tokens each.
void ExpectImageAndTextDecodeTogether(const std::string& checkpoint);

// As `ocular run -m testdata/tiny/<checkpoint> -i ... -p "..."` runs the case `name` (its
// inputs/ images) with the engine's and the request's options `eo`, `go`: files -> processor
// -> scheduler -> model, transformers' ids and 32 tokens.
void ExpectEngineRunsCase(const std::string& checkpoint, const std::string& name, EngineOptions eo,
                          const GenerateOptions& go);
// ExpectEngineRunsCase of the "two" case (photo.png, gray.png) with the default options.
void ExpectEngineRunsTwoImages(const std::string& checkpoint);

}  // namespace ocular::qwen_golden

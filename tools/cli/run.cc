// ocular run / trace / tokenize / bench.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "ocular/engine.h"
#include "ocular/tasks.h"

namespace ocular::cli {

namespace {

struct ModelArgs {
  std::string model;
  int threads = 0;
  int64_t max_pixels = 50'000'000;
  bool exif_rotate = false;
  std::string precision = "auto";
  std::string kv_cache = "auto";
};

void AddModelArgs(CLI::App* cmd, ModelArgs* a) {
  cmd->add_option("--model,-m", a->model, "HF PaliGemma directory")->required();
  cmd->add_option("--threads,-t", a->threads, "worker threads (default: physical cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-pixels", a->max_pixels, "reject images with more pixels (default 50M)");
  cmd->add_flag("--exif-rotate", a->exif_rotate, "apply JPEG EXIF orientation (HF does not)");
  cmd->add_option("--precision", a->precision,
                  "auto (bf16 for bf16 checkpoints, else f32), f32, bf16 (as torch's bf16 run), "
                  "bf16-fast (no intermediate rounding)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "bf16-fast"}));
  cmd->add_option("--kv-cache", a->kv_cache, "KV cache storage: auto, f32, bf16")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}));
}

StatusOr<std::unique_ptr<Engine>> LoadEngine(const ModelArgs& a, int max_batch = 8) {
  EngineOptions o;
  o.max_batch = max_batch;
  o.threads = a.threads;
  o.max_image_pixels = a.max_pixels;
  o.exif_rotate = a.exif_rotate;
  o.precision = a.precision;
  o.kv_cache = a.kv_cache;
  return Engine::Load(a.model, o);
}

struct GenArgs {
  std::vector<std::string> images;
  std::string prompt;
  GenerateOptions opts;
  std::vector<ImageInput> inputs() const { return {images.begin(), images.end()}; }
};

void AddGenArgs(CLI::App* cmd, GenArgs* g) {
  cmd->add_option("--image,-i", g->images, "image file (repeatable; none = text-only)");
  cmd->add_option("--prompt,-p", g->prompt, "task prompt, e.g. \"caption en\"")->required();
  cmd->add_option("--max-tokens", g->opts.max_tokens, "generation limit")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--separate-newline", g->opts.separate_newline,
                "tokenize the prompt's trailing \\n separately (big_vision style)");
}

// Sustained read bandwidth of this machine (the decode roofline): `threads` threads sum a
// 1 GiB buffer, best of 3 passes.
double MeasureReadBandwidthGBs(int threads) {
  const size_t n = (size_t{1} << 30) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n, 1);
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<uint64_t> sums(threads);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t b = n * t / threads, e = n * (t + 1) / threads;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = b; i + 4 <= e; i += 4) {
          s0 += buf[i];
          s1 += buf[i + 1];
          s2 += buf[i + 2];
          s3 += buf[i + 3];
        }
        sums[t] = s0 + s1 + s2 + s3;
      });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (std::accumulate(sums.begin(), sums.end(), uint64_t{0}) != (n & ~size_t{3})) return 0;
    best = std::max(best, double(n * sizeof(uint64_t)) / s / 1e9);
  }
  return best;
}

nlohmann::json TimingsJson(const Timings& t) {
  return {{"image_ms", t.image_ms},
          {"prefill_ms", t.prefill_ms},
          {"decode_ms", t.decode_ms},
          {"prefill_tokens", t.prefill_tokens},
          {"decode_tokens", t.decode_tokens}};
}

}  // namespace

void AddRun(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("run", "answer a prompt about an image");
  auto m = std::make_shared<ModelArgs>();
  auto g = std::make_shared<GenArgs>();
  auto json = std::make_shared<bool>(false);
  auto draw = std::make_shared<std::string>();
  auto seg_model = std::make_shared<std::string>();
  AddModelArgs(cmd, m.get());
  AddGenArgs(cmd, g.get());
  cmd->add_option("--draw", *draw, "write the first image with the detected boxes to this PNG");
  cmd->add_option("--seg-model", *seg_model,
                  "mask model for `segment` answers: vae-oid.npz or a safetensors copy "
                  "(default: vae-oid.npz / vae.safetensors in the model directory)");
  cmd->add_option("--temperature", g->opts.temperature, "0 = greedy")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", g->opts.top_k, "sample among the k most likely (0 = off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", g->opts.top_p, "nucleus sampling mass (1 = off)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", g->opts.seed, "sampling seed");
  cmd->add_flag("--json", *json, "print answer, ids and timings as JSON");
  cmd->callback([=] {
    if (!draw->empty()) {  // checked before generating, not after
      Status s = g->images.empty()
                     ? Error(StatusCode::kInvalidArgument, "cli", "--draw needs an --image")
                     : CheckOutputIsNotAnInput("--draw", *draw, m->model, g->images);
      if (!s.ok()) {
        *rc = Fail(s);
        return;
      }
    }
    auto engine = LoadEngine(*m);
    if (!engine.ok()) {
      *rc = Fail(engine.status());
      return;
    }
    TokenCallback stream = nullptr;
    if (!*json) {
      stream = [](const std::string& piece) {
        std::cout << piece << std::flush;
        return true;
      };
    }
    auto r = (*engine)->Generate(g->inputs(), g->prompt, g->opts, stream);
    if (!r.ok()) {
      *rc = Fail(r.status());
      return;
    }
    // Boxes from <loc> tokens, in the first image's pixel coordinates (docs/models.md §3).
    std::vector<Detection> boxes;
    if (!r->image_sizes.empty()) {
      boxes = ParseDetections(r->text, r->image_sizes[0].width, r->image_sizes[0].height);
      // <seg> codes → masks (docs/segmentation.md); the mask model is loaded only for them.
      auto warning = AttachMasks(&boxes, *seg_model, m->model, r->image_sizes[0].width,
                                 r->image_sizes[0].height);
      if (!warning.ok()) {
        *rc = Fail(warning.status());
        return;
      }
      if (!warning->empty()) std::cerr << *warning << "\n";
    }
    if (*json) {
      nlohmann::json j = {{"answer", r->text},
                          {"raw", r->raw_text},
                          {"detections", nlohmann::json::parse(DetectionsJson(boxes))},
                          {"prompt_ids", r->prompt_ids},
                          {"output_ids", r->output_ids},
                          {"finish_reason", r->finish_reason},
                          {"timings", TimingsJson(r->timings)}};
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << "\n";
    }
    if (!draw->empty()) {
      if (g->images.empty()) {
        *rc = Fail(Error(StatusCode::kInvalidArgument, "cli", "--draw needs an --image"));
        return;
      }
      Status s = DrawDetectionsToPng(g->images[0], boxes, *draw);
      if (!s.ok()) {
        *rc = Fail(s);
        return;
      }
      std::cerr << "wrote " << *draw << " (" << boxes.size() << " boxes)\n";
    }
    *rc = 0;
  });
}

void AddTrace(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("trace", "dump every named activation to a safetensors file");
  auto m = std::make_shared<ModelArgs>();
  auto g = std::make_shared<GenArgs>();
  auto out = std::make_shared<std::string>();
  AddModelArgs(cmd, m.get());
  AddGenArgs(cmd, g.get());
  g->opts.max_tokens = 16;
  cmd->add_option("--out,-o", *out, "output .safetensors")->required();
  cmd->callback([=] {
    // The dump must not overwrite what is being read: the checkpoint or an input image.
    if (Status s = CheckOutputIsNotAnInput("--out", *out, m->model, g->images); !s.ok()) {
      *rc = Fail(s);
      return;
    }
    auto engine = LoadEngine(*m);
    if (!engine.ok()) {
      *rc = Fail(engine.status());
      return;
    }
    auto r = (*engine)->Trace(g->inputs(), g->prompt, g->opts, *out);
    if (!r.ok()) {
      *rc = Fail(r.status());
      return;
    }
    std::cout << "wrote " << *out << " (" << r->prompt_ids.size() << " prompt tokens, "
              << r->output_ids.size() << " generated)\n";
    *rc = 0;
  });
}

void AddEval(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("eval", "score a model on a held-out set (shapes-world format)");
  auto m = std::make_shared<ModelArgs>();
  auto o = std::make_shared<EvalOptions>();
  AddModelArgs(cmd, m.get());
  cmd->add_option("--set", o->eval_set, "held-out JSONL (e.g. models/shapes-paligemma/heldout.jsonl)")
      ->required();
  cmd->add_option("--images", o->images_dir, "folder with the set's images")->required();
  cmd->add_option("--limit", o->limit, "first N examples only")->check(CLI::NonNegativeNumber);
  cmd->add_option("--predictions", o->predictions, "write per-example predictions (JSONL)");
  cmd->add_option("--seg-model", o->seg_model,
                  "mask model for segment examples (default: vae-oid.npz / vae.safetensors in "
                  "the model directory)");
  cmd->callback([=] {
    o->model_dir = m->model;
    if (!o->predictions.empty()) {
      Status s = CheckOutputIsNotAnInput("--predictions", o->predictions, m->model,
                                         {o->eval_set});
      if (!s.ok()) {
        *rc = Fail(s);
        return;
      }
    }
    auto engine = LoadEngine(*m);
    if (!engine.ok()) {
      *rc = Fail(engine.status());
      return;
    }
    auto s = Evaluate(**engine, *o, [](int done, int total) {
      if (done % 25 == 0 || done == total) std::cerr << "eval: " << done << "/" << total << "\n";
    });
    if (!s.ok()) {
      *rc = Fail(s.status());
      return;
    }
    std::cout << EvalSummaryJson(*s) << "\n";
    *rc = 0;
  });
}

void AddTokenize(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("tokenize", "print the ids and pieces of a text");
  auto m = std::make_shared<ModelArgs>();
  auto text = std::make_shared<std::string>();
  AddModelArgs(cmd, m.get());
  cmd->add_option("text", *text, "text to tokenize (no BOS is added)")->required();
  cmd->callback([=] {
    auto engine = LoadEngine(*m);
    if (!engine.ok()) {
      *rc = Fail(engine.status());
      return;
    }
    auto ids = (*engine)->Tokenize(*text);
    if (!ids.ok()) {
      *rc = Fail(ids.status());
      return;
    }
    for (int32_t id : *ids) {
      std::cout << id << "\t" << nlohmann::json((*engine)->TokenPiece(id)).dump() << "\n";
    }
    *rc = 0;
  });
}

void AddBench(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("bench", "time vision encode, prefill and decode");
  auto m = std::make_shared<ModelArgs>();
  auto b = std::make_shared<BenchOptions>();
  auto roofline = std::make_shared<double>(0);
  AddModelArgs(cmd, m.get());
  cmd->add_option("--roofline-gbs", *roofline,
                  "memory bandwidth to compare decode against (default: measured here with a "
                  "simple read probe, which may underestimate what the hardware sustains)");
  cmd->add_option("--prompt-tokens", b->prompt_tokens, "text tokens after the image")->check(CLI::PositiveNumber);
  cmd->add_option("--decode-tokens", b->decode_tokens, "tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_option("--batch", b->batch, "sequences decoded together (aggregate tokens/s)")
      ->check(CLI::Range(1, 1024));
  cmd->callback([=] {
    auto engine = LoadEngine(*m, b->batch);
    if (!engine.ok()) {
      *rc = Fail(engine.status());
      return;
    }
    auto r = (*engine)->Bench(*b);
    if (!r.ok()) {
      *rc = Fail(r.status());
      return;
    }
    ModelInfo info = (*engine)->Info();
    const bool given = *roofline > 0;
    const double bw = given ? *roofline : MeasureReadBandwidthGBs(info.threads);
    nlohmann::json j = {{"model", m->model},
                        {"architecture", info.architecture},
                        {"weight_dtype", info.weight_dtype},
                        {"weight_bytes", info.weight_bytes},
                        {"threads", info.threads},
                        {"isa", info.isa},
                        {"precision", info.precision},
                        {"kv_cache", info.kv_cache},
                        {"batch", r->batch},
                        {"vision_encode_ms", r->vision_ms},
                        {"vision_gflop_s", r->vision_gflop / (r->vision_ms / 1000.0)},
                        {"prefill_tokens", r->prefill_tokens},
                        {"prefill_tok_s", r->prefill_tok_s},
                        {"decode_tokens", r->decode_tokens},
                        {"decode_tok_s", r->decode_tok_s},
                        {"decode_weight_gb_s", r->decode_weight_gb_s},
                        {"roofline_gb_s", bw},
                        {"roofline_source", given ? "--roofline-gbs" : "measured read probe"},
                        {"decode_roofline_ratio", r->decode_weight_gb_s / bw},
                        {"text_weight_bytes", r->text_weight_bytes},
                        {"kv_cache_bytes", r->kv_cache_bytes},
                        {"workspace_bytes", r->workspace_bytes},
                        {"peak_rss_bytes", r->peak_rss_bytes}};
    std::cout << j.dump(2) << "\n";
    *rc = 0;
  });
}

}  // namespace ocular::cli

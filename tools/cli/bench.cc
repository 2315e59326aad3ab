// ocular bench / eval: speed on synthetic inputs, accuracy on a held-out set.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>
#include <vector>

#include "commands.h"
#include "ocular/engine.h"
#include "ocular/tasks.h"
#include "options.h"

namespace ocular::cli {

namespace {

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

}  // namespace

void AddEval(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("eval", "score a model on a held-out set (shapes-world format)");
  auto m = std::make_shared<ModelArgs>();
  auto o = std::make_shared<EvalOptions>();
  AddModelArgs(cmd, m.get(), kCompute | kImages | kResize);
  cmd->add_option("--set", o->eval_set,
                  "held-out JSONL (e.g. models/shapes-paligemma/heldout.jsonl)")
      ->required();
  cmd->add_option("--images", o->images_dir, "folder with the set's images")->required();
  cmd->add_option("--limit", o->limit, "first N examples only (0 = all)")
      ->check(IntRange(0, 1 << 30));
  cmd->add_option("--max-tokens", o->max_tokens,
                  "generation limit per example (as evaluate.py --max-new-tokens; segment "
                  "answers need up to ~70)")
      ->check(IntRange(1, 4096));
  cmd->add_option("--predictions", o->predictions, "write per-example predictions (JSONL)")
      ->default_str("off");
  cmd->add_option("--seg-model", o->seg_model, "mask model for segment examples")
      ->default_str("vae-oid.npz / vae.safetensors in the model directory");
  auto quiet = std::make_shared<bool>(false);
  auto progress = std::make_shared<bool>(false);
  cmd->add_flag("--quiet,-q", *quiet, "no progress, even on a terminal");
  cmd->add_flag(
      "--progress", *progress,
      "show progress on stderr even when it is not a terminal (a line every 25 examples)");
  cmd->callback([=] {
    o->model_dir = m->model;
    if (!o->predictions.empty()) {
      Status s = CheckOutputIsNotAnInput("--predictions", o->predictions, m->model, {o->eval_set});
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
    const bool live = ::isatty(STDERR_FILENO) != 0;
    std::function<void(int, int)> report = nullptr;
    if (!*quiet && (live || *progress)) {
      report = [live](int done, int total) {
        if (live) {
          std::fprintf(stderr, "\r\033[Keval: %d/%d examples", done, total);
          if (done == total) std::fputs("\r\033[K", stderr);
          std::fflush(stderr);
        } else if (done % 25 == 0 || done == total) {
          std::fprintf(stderr, "ocular: eval %d/%d\n", done, total);
        }
      };
    }
    auto s = Evaluate(**engine, *o, report);
    if (!s.ok()) {
      *rc = Fail(s.status());
      return;
    }
    std::cout << EvalSummaryJson(*s) << "\n";
    *rc = 0;
  });
}

void AddBench(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand(
      "bench",
      "time vision encode, prefill and decode (encode and prefill after one untimed warm-up)");
  auto m = std::make_shared<ModelArgs>();
  auto b = std::make_shared<BenchOptions>();
  auto roofline = std::make_shared<double>(0);
  AddModelArgs(cmd, m.get(), kCompute | kResize);
  cmd->add_option("--roofline-gbs", *roofline,
                  "memory bandwidth to compare decode against (default: measured here with a "
                  "simple read probe, which may underestimate what the hardware sustains)");
  cmd->add_option("--prompt-tokens", b->prompt_tokens, "text tokens after the image");
  cmd->add_option("--decode-tokens", b->decode_tokens, "tokens to generate");
  cmd->add_option("--batch", b->batch, "sequences decoded together (aggregate tokens/s)")
      ->check(IntRange(1, 1024));
  auto no_warmup = std::make_shared<bool>(false);
  cmd->add_flag("--no-vision-warmup", *no_warmup,
                "time the first vision encode (no untimed one before it: for encoders whose "
                "one run takes minutes, such as Llama 3.2 Vision's)");
  cmd->callback([=] {
    b->vision_warmup = !*no_warmup;
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
                        {"weight_formats", info.weight_formats},
                        {"weight_bytes", info.weight_bytes},
                        {"threads", info.threads},
                        {"isa", info.isa},
                        {"precision", info.precision},
                        {"kv_cache", info.kv_cache},
                        {"quant_activations", info.quant_activations},
                        {"batch", r->batch},
                        {"vision_encode_ms", r->vision_ms},
                        {"vision_tiles", r->vision_tiles},
                        {"vision_ms_per_tile", r->vision_ms / r->vision_tiles},
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

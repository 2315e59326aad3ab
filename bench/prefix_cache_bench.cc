// The prompt K/V cache's time to first token (docs/server.md): the 4th turn of a 4-turn chat
// with an image, paired rounds on one engine (EngineOptions::prefix_cache_bytes on, the image
// cache off).
//   build/bench/prefix_cache_bench MODEL_DIR [ROUNDS] [IMAGE_PX]
// Each round runs, in alternating order,
//   cold: the 4th turn of a conversation the cache has not seen (a new image): the lookup
//         misses, the image is encoded and the whole prompt prefilled (then stored) — what the
//         cache-off engine does, plus the cache's own lookup and store;
//   warm: turns 1-3 of another new conversation (untimed), then its 4th turn, which starts from
//         turn 3's cached K/V.
// Printed per round: wall ms of a 1-token answer (the time to first token without HTTP), and
// the engine's image and prefill ms; then the medians of warm / cold.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ocular/chat.h"
#include "ocular/engine.h"
#include "support/pattern_image.h"

namespace {

using ocular::ChatMessage;

std::vector<ChatMessage> Chat(int turns, const std::string& marker) {
  const char* questions[] = {"What is in the image? Describe every object you can see.",
                             "What colours dominate the picture, and where are they?",
                             "Is there any text or writing visible anywhere in it?",
                             "Summarise the image in one sentence for a caption."};
  const char* answers[] = {"A pattern of stripes and squares in several shades, like a test card.",
                           "Green and purple bands run from the top left to the bottom right.",
                           "No, there is no text; only repeating geometric shapes."};
  std::vector<ChatMessage> m;
  for (int t = 0; t < turns; ++t) {
    m.push_back(ocular::UserTurn(questions[t], t == 0 ? 1 : 0, marker));
    if (t + 1 < turns) m.push_back(ChatMessage::Text("assistant", answers[t]));
  }
  return m;
}

struct Timing {
  double wall_ms = 0, image_ms = 0, prefill_ms = 0;
  int prompt_tokens = 0;
};

Timing Turn(ocular::Engine& e, int seed, int px, int turns) {
  const ocular::ImageInput image =
      ocular::ImageInput::FromBytes(ocular::testing_support::PatternBmp(px, px, seed), "round.bmp");
  ocular::GenerateOptions o;
  o.max_tokens = 1;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = e.GenerateChat({image}, Chat(turns, e.Info().image_marker), o);
  const auto t1 = std::chrono::steady_clock::now();
  if (!r.ok()) {
    std::fprintf(stderr, "prefix_cache_bench: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  return {std::chrono::duration<double, std::milli>(t1 - t0).count(), r->timings.image_ms,
          r->timings.prefill_ms, r->timings.prefill_tokens};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: prefix_cache_bench MODEL_DIR [ROUNDS] [IMAGE_PX]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  const int px = argc > 3 ? std::atoi(argv[3]) : 448;
  ocular::EngineOptions opts;
  opts.prefix_cache_bytes = size_t{2} << 30;
  auto engine = ocular::Engine::Load(argv[1], opts);
  if (!engine.ok()) {
    std::fprintf(stderr, "prefix_cache_bench: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  ocular::Engine& e = **engine;
  std::vector<double> ratio_wall, ratio_prefill;
  for (int r = 0; r < rounds; ++r) {
    Timing cold, warm;
    for (int side = 0; side < 2; ++side) {
      if ((side + r) % 2 == 0) {
        cold = Turn(e, 1000 + r, px, 4);
      } else {
        for (int t = 1; t <= 3; ++t) Turn(e, 2000 + r, px, t);
        warm = Turn(e, 2000 + r, px, 4);
      }
    }
    std::printf(
        "round %d: cold %.0f ms (image %.0f, prefill %.0f, %d tokens) | warm %.0f ms (image %.0f, "
        "prefill %.0f) | wall ratio %.2f, without the cold encode %.2f\n",
        r, cold.wall_ms, cold.image_ms, cold.prefill_ms, cold.prompt_tokens, warm.wall_ms,
        warm.image_ms, warm.prefill_ms, cold.wall_ms / warm.wall_ms,
        (cold.wall_ms - cold.image_ms) / warm.wall_ms);
    ratio_wall.push_back(cold.wall_ms / warm.wall_ms);
    ratio_prefill.push_back((cold.wall_ms - cold.image_ms) / warm.wall_ms);
  }
  const ocular::EngineStats s = e.Stats();
  std::printf("median cold/warm: %.2f (with the image encode), %.2f (without)\n",
              Median(ratio_wall), Median(ratio_prefill));
  std::printf("prefix cache: %llu hits, %llu misses, %llu tokens reused, %zu bytes\n",
              static_cast<unsigned long long>(s.prefix_cache_hits),
              static_cast<unsigned long long>(s.prefix_cache_misses),
              static_cast<unsigned long long>(s.prefix_cache_tokens_reused), s.prefix_cache_bytes);
  return 0;
}

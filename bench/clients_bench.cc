// Concurrent clients against one engine (continuous batching, merged prefills; docs/server.md):
// rounds of 1 client then N clients, each client sending `requests` text-only chat requests of
// `tokens` greedy tokens; prints tokens/s of each side, their ratio, and whether every answer
// equals its single-request answer.
//   build/bench/clients_bench MODEL_DIR [CLIENTS] [TOKENS] [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ocular/chat.h"
#include "ocular/engine.h"

namespace {

// Request i's conversation: a question of its own (more than 8 prompt tokens: merged prefills).
std::vector<ocular::ChatMessage> Question(int i) {
  return {ocular::ChatMessage::Text(
      "user", "Question " + std::to_string(i) + ": name three uses of a paper clip in an office.")};
}

// Runs `clients` threads, client c sending requests c, c + clients, ... (n in all); returns
// seconds and fills answers[i].
double Run(ocular::Engine& e, int clients, int n, int tokens,
           std::vector<std::vector<int32_t>>* answers) {
  ocular::GenerateOptions o;
  o.max_tokens = tokens;
  o.stop_at_eos = false;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int i = c; i < n; i += clients) {
        auto r = e.GenerateChat({}, Question(i), o);
        if (!r.ok()) {
          std::fprintf(stderr, "clients_bench: %s\n", r.status().ToString().c_str());
          std::exit(1);
        }
        (*answers)[static_cast<size_t>(i)] = r->output_ids;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: clients_bench MODEL_DIR [CLIENTS] [TOKENS] [ROUNDS]\n");
    return 2;
  }
  const int clients = argc > 2 ? std::atoi(argv[2]) : 8;
  const int tokens = argc > 3 ? std::atoi(argv[3]) : 16;
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 2;
  ocular::EngineOptions opts;
  opts.max_batch = clients;
  auto engine = ocular::Engine::Load(argv[1], opts);
  if (!engine.ok()) {
    std::fprintf(stderr, "clients_bench: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  ocular::Engine& e = **engine;
  const int n = clients;  // one request per client per round; the single client sends them all
  std::vector<double> ratios;
  bool equal = true;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::vector<int32_t>> alone(n), together(n);
    const double s1 = Run(e, 1, n, tokens, &alone);
    const double sn = Run(e, clients, n, tokens, &together);
    equal = equal && alone == together;
    const double t1 = n * tokens / s1, tn = n * tokens / sn;
    std::printf("round %d: 1 client %.2f tokens/s | %d clients %.2f tokens/s | %.2fx | %s\n", r, t1,
                clients, tn, tn / t1, alone == together ? "answers equal" : "ANSWERS DIFFER");
    ratios.push_back(tn / t1);
  }
  std::sort(ratios.begin(), ratios.end());
  const ocular::EngineStats s = e.Stats();
  std::printf("median %.2fx; prefills %llu, merged %llu; every answer equal: %s\n",
              ratios[ratios.size() / 2], static_cast<unsigned long long>(s.prefills),
              static_cast<unsigned long long>(s.merged_prefills), equal ? "yes" : "no");
  return equal ? 0 : 1;
}

// A scripted Engine (no model) and an in-process server on a free loopback port, shared by the
// server tests.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server.h"

namespace ocular::server::testing {

// Emits "tok" every 5 ms up to max_tokens, after waiting while `hold` is set; counts the
// generations cancelled by their callback.
class ScriptedEngine : public Engine {
 public:
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false;
  std::atomic<int> started{0}, cancelled{0};
  int context_length = 0;  // ModelInfo::context_length (0: unknown)

  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu);
      hold = false;
    }
    cv.notify_all();
  }

  ModelInfo Info() const override {
    ModelInfo i;
    i.context_length = context_length;
    return i;
  }
  StatusOr<GenerateResult> Generate(const std::vector<ImageInput>&, const std::string& prompt,
                                    const GenerateOptions& options,
                                    const TokenCallback& on_text) override {
    ++started;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !hold; });
    }
    GenerateResult r;
    r.prompt_ids.assign(prompt.size(), 7);
    r.finish_reason = "length";
    for (int i = 0; i < options.max_tokens; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      r.text += "tok";
      r.output_ids.push_back(9);
      if (on_text && !on_text("tok")) {
        ++cancelled;
        r.finish_reason = "cancelled";
        break;
      }
    }
    return r;
  }
  StatusOr<GenerateResult> Trace(const std::vector<ImageInput>&, const std::string&,
                                 const GenerateOptions&, const std::string&) override {
    return Error(StatusCode::kUnimplemented, "test", "no trace");
  }
  StatusOr<BenchResult> Bench(const BenchOptions&) override {
    return Error(StatusCode::kUnimplemented, "test", "no bench");
  }
  StatusOr<PromptTokens> BuildPrompt(int, const std::string& prompt,
                                     const GenerateOptions&) const override {
    PromptTokens p;
    p.ids.assign(prompt.size(), 7);
    return p;
  }
  StatusOr<std::vector<int32_t>> Tokenize(const std::string&) const override {
    return std::vector<int32_t>{};
  }
  std::string TokenPiece(int32_t) const override { return ""; }
  std::string Detokenize(const std::vector<int32_t>&, bool) const override { return ""; }
};

struct Running {
  explicit Running(ServerOptions o) : server(std::move(o)) {
    port = server.Bind("127.0.0.1", 0).value();
    thread = std::thread([this] { server.Run(); });
    for (int i = 0; i < 200; ++i) {
      httplib::Client c("127.0.0.1", port);
      if (auto r = c.Get("/health"); r) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~Running() {
    server.Stop();
    thread.join();
  }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    return c;
  }
  Server server;
  int port = 0;
  std::thread thread;
};

// Waits up to 5 s for `cond`.
template <typename F>
bool Eventually(F cond) {
  for (int i = 0; i < 500; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace ocular::server::testing

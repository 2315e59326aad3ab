// The server's scheduling behaviour against a scripted Engine (no model): 503 while loading,
// 429 when the queue is full, a disconnecting client cancels its generation, the deadline.
#include "server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "scripted_engine.h"
#include "test_util.h"

namespace ocular::server {
namespace {

using nlohmann::json;
using testing::ChatBody;
using testing::Eventually;
using testing::Running;
using testing::ScriptedEngine;

TEST(Server, LoadingThenReady) {
  Running s(ServerOptions{});
  auto health = s.Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  auto chat = s.Client().Post("/v1/chat/completions", ChatBody("x", ""), "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 503);
  EXPECT_EQ(json::parse(chat->body)["error"]["code"], "model_loading");
  s.server.SetEngine(std::make_unique<ScriptedEngine>());
  EXPECT_EQ(s.Client().Get("/health")->status, 200);
  auto ok = s.Client().Post("/v1/chat/completions", ChatBody("x", "", R"(,"max_tokens":3)"),
                            "application/json");
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  json j = json::parse(ok->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "toktoktok");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
}

TEST(Server, FullQueueGets429AndAdmittedRequestsFinish) {
  ServerOptions o;
  o.parallel = 1;
  o.max_queue = 1;
  Running s(o);
  auto engine = std::make_unique<ScriptedEngine>();
  ScriptedEngine* eng = engine.get();
  eng->hold = true;
  s.server.SetEngine(std::move(engine));
  int status[2] = {0, 0};
  std::thread a([&] {
    status[0] = s.Client()
                    .Post("/v1/chat/completions", ChatBody("a", "", R"(,"max_tokens":2)"),
                          "application/json")
                    ->status;
  });
  ASSERT_TRUE(Eventually([&] { return eng->started == 1; }));
  std::thread b([&] {
    status[1] = s.Client()
                    .Post("/v1/chat/completions", ChatBody("b", "", R"(,"max_tokens":2)"),
                          "application/json")
                    ->status;
  });
  ASSERT_TRUE(Eventually([&] {
    return s.Client().Get("/metrics")->body.find("ocular_queue_depth 1") != std::string::npos;
  }));
  auto full = s.Client().Post("/v1/chat/completions", ChatBody("c", ""), "application/json");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 429);
  EXPECT_EQ(full->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(full->body)["error"]["code"], "queue_full");
  eng->Release();
  a.join();
  b.join();
  EXPECT_EQ(status[0], 200);
  EXPECT_EQ(status[1], 200);
  // A request is counted when its access-log entry is written, after its response has been
  // sent: the client can see its answer before the counter moves.
  std::string metrics;
  EXPECT_TRUE(Eventually([&] {
    metrics = s.Client().Get("/metrics")->body;
    return metrics.find("ocular_requests_total{status=\"200\"} 2") != std::string::npos &&
           metrics.find("ocular_queue_depth 0") != std::string::npos &&
           metrics.find("ocular_requests_running 0") != std::string::npos;
  })) << metrics;
  EXPECT_NE(metrics.find("ocular_requests_total{status=\"429\"} 1"), std::string::npos);
}

TEST(Server, DisconnectCancelsTheGeneration) {
  Running s(ServerOptions{});
  auto engine = std::make_unique<ScriptedEngine>();
  ScriptedEngine* eng = engine.get();
  s.server.SetEngine(std::move(engine));
  // 2000 tokens at 5 ms: 10 s unless cancelled.
  const std::string body = ChatBody("x", "", R"(,"max_tokens":2000,"stream":true)");
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string req =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  char buf[4096];
  std::string got;
  while (got.find("\"content\":\"tok\"") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  const auto t0 = std::chrono::steady_clock::now();
  ::close(fd);
  ASSERT_TRUE(Eventually([&] { return eng->cancelled == 1; }));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_TRUE(Eventually([&] {
    return s.Client().Get("/metrics")->body.find("ocular_requests_running 0") != std::string::npos;
  }));
}

TEST(Server, DeadlineEndsALongRequest) {
  ServerOptions o;
  o.deadline_s = 0.2;
  Running s(o);
  auto engine = std::make_unique<ScriptedEngine>();
  ScriptedEngine* eng = engine.get();
  s.server.SetEngine(std::move(engine));
  auto r = s.Client().Post("/v1/chat/completions", ChatBody("x", "", R"(,"max_tokens":2000)"),
                           "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 504);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "deadline_exceeded");
  EXPECT_EQ(eng->cancelled, 1);
  // Streaming: the text so far, then an error event, then [DONE].
  auto st =
      s.Client().Post("/v1/chat/completions",
                      ChatBody("x", "", R"(,"max_tokens":2000,"stream":true)"), "application/json");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->status, 200);
  EXPECT_NE(st->body.find("\"deadline_exceeded\""), std::string::npos) << st->body;
  EXPECT_NE(st->body.find("data: [DONE]"), std::string::npos);
}

TEST(Server, PromptTokenLimit) {
  ServerOptions o;
  o.max_prompt_tokens = 5;  // the scripted engine: one token per prompt byte
  Running s(o);
  s.server.SetEngine(std::make_unique<ScriptedEngine>());
  auto r = s.Client().Post("/v1/chat/completions", ChatBody("abcdef", ""), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(s.Client()
                .Post("/v1/chat/completions", ChatBody("abcde", "", R"(,"max_tokens":1)"),
                      "application/json")
                ->status,
            200);
}

// max_tokens is a ceiling: on a model whose context has 10 positions a prompt of 4 tokens gets
// at most 6 new ones (finish_reason "length"), not context_length_exceeded.
TEST(Server, MaxTokensIsBoundedByTheContext) {
  Running s(ServerOptions{});
  auto engine = std::make_unique<ScriptedEngine>();
  engine->context_length = 10;
  s.server.SetEngine(std::move(engine));
  auto r = s.Client().Post("/v1/chat/completions", ChatBody("abcd", "", R"(,"max_tokens":2000)"),
                           "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  // A prompt that fills the context leaves no room at all.
  r = s.Client().Post("/v1/chat/completions", ChatBody("abcdefghij", ""), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
}

// A model with a chat template gets the whole conversation, formatted as the template does
// (the tiny Gemma 3 carries google/gemma-3-*-it's): system, assistant turns and all.
TEST(Server, ChatTemplateFormatsEveryMessage) {
  auto reference = Engine::Load("testdata/tiny/gemma3-text", {});
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  const std::vector<ChatMessage> messages = {
      ChatMessage::Text("system", "Be brief."), ChatMessage::Text("user", "what color is it?"),
      ChatMessage::Text("assistant", "red"), ChatMessage::Text("user", "and the square?")};
  GenerateOptions g;
  g.max_tokens = 3;
  auto want = (*reference)->GenerateChat({}, messages, g);
  ASSERT_TRUE(want.ok()) << want.status().ToString();

  Running s(ServerOptions{});
  auto served = Engine::Load("testdata/tiny/gemma3-text", {});
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  s.server.SetEngine(std::move(*served));
  const std::string body =
      R"({"max_tokens":3,"messages":[{"role":"developer","content":"Be brief."},)"
      R"({"role":"user","content":[{"type":"text","text":"what color is it?"}]},)"
      R"({"role":"assistant","content":"red"},{"role":"user","content":"and the square?"}]})";
  auto r = s.Client().Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], want->text);
  EXPECT_EQ(j["usage"]["prompt_tokens"], want->prompt_ids.size());

  // What the template refuses is a 400 with its reason.
  r = s.Client().Post(
      "/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]})",
      "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("Conversation roles must alternate"), std::string::npos) << r->body;
}

}  // namespace
}  // namespace ocular::server

// The HTTP layer against hostile and browser clients (scripted Engine, loopback): slow
// sockets do not starve the others, the connection cap evicts the idlest client's waiting
// connection, 413 from the headers, the Host/Origin policy and the content type, memory given
// back after large bodies, the access log.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../support/sanitizer.h"
#include "scripted_engine.h"
#include "test_util.h"

namespace ocular::server {
namespace {

using nlohmann::json;
using testing::ChatBody;
using testing::Eventually;
using testing::Running;
using testing::ScriptedEngine;
using Clock = std::chrono::steady_clock;

// A connected socket from `from` (a loopback address: 127.0.0.2 is another client); -1 on
// failure.
int Connect(int port, const char* from = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, from, &local.sin_addr);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What the server sent on `fd` until it closed it or `wait_s` passed.
std::string ReadAll(int fd, double wait_s) {
  std::string got;
  const auto end = Clock::now() + std::chrono::duration<double>(wait_s);
  char buf[4096];
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// True if the server closed `fd` (what it sent before is read and dropped).
bool Closed(int fd) {
  char buf[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

std::string Exchange(int port, const std::string& data, double wait_s) {
  const int fd = Connect(port);
  if (fd < 0) return "<connect failed>";
  (void)::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
  std::string got = ReadAll(fd, wait_s);
  ::close(fd);
  return got;
}

std::string Post(const std::string& body, const std::string& headers) {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// 200 sockets trickle one byte per second — 100 into a request head, 100 into a body — while
// 8 clients keep asking. Every normal request is answered; each slow socket is dropped at its
// deadline (head 2 s, body 2 s). The latency of the normal requests is printed (p50, p99).
TEST(Http, SlowSocketsDoNotStarveOthers) {
  ServerOptions o;
  o.read_timeout_s = 2;
  o.body_timeout_s = 2;
  Running s(o);
  s.server.SetEngine(std::make_unique<ScriptedEngine>());
  const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  const std::string body_head =
      head + "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n";
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    const int fd = Connect(s.port);
    ASSERT_GE(fd, 0);
    if (i % 2 == 1) (void)::send(fd, body_head.data(), body_head.size(), MSG_NOSIGNAL);
    slow.push_back(fd);
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    for (size_t t = 0; !done; ++t) {
      for (size_t i = 0; i < slow.size(); ++i) {
        const char c = i % 2 == 0 ? head[t % head.size()] : ' ';
        (void)::send(slow[i], &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      for (int k = 0; k < 10 && !done; ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::vector<std::vector<double>> ms(8);
  std::vector<int> failures(8, 0);
  std::vector<std::thread> clients;
  const auto end = Clock::now() + std::chrono::seconds(4);
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      auto client = s.Client();
      client.set_read_timeout(10, 0);  // the generous bound: no answer within 10 s is a failure
      while (Clock::now() < end) {
        const auto t0 = Clock::now();
        auto r = client.Post("/v1/chat/completions", ChatBody("x", "", R"(,"max_tokens":1)"),
                             "application/json");
        if (!r || r->status != 200) ++failures[c];
        ms[c].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    });
  }
  for (auto& t : clients) t.join();
  std::vector<double> all;
  for (const auto& v : ms) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  ASSERT_FALSE(all.empty());
  std::printf(
      "[ slow sockets ] %zu answers to 8 clients beside 200 slow sockets: p50 %.1f ms, "
      "p99 %.1f ms, max %.1f ms\n",
      all.size(), all[all.size() / 2], all[all.size() * 99 / 100], all.back());
  for (int c = 0; c < 8; ++c) EXPECT_EQ(failures[c], 0) << "client " << c;
  for (int c = 0; c < 8; ++c) EXPECT_GE(ms[c].size(), 2u) << "client " << c;
  // By now (4 s) every slow socket is past its 2 s deadline and closed, whatever it sent.
  EXPECT_TRUE(Eventually(
      [&] { return std::all_of(slow.begin(), slow.end(), [](int fd) { return Closed(fd); }); }));
  done = true;
  trickle.join();
  for (int fd : slow) ::close(fd);
}

// At the cap, a connection waiting for its request head makes room: the oldest of the client
// holding the most connections (here 127.0.0.2 with 6 idle sockets), not the newcomer.
TEST(Http, ConnectionCapEvictsTheIdlestClient) {
  ServerOptions o;
  o.max_connections = 6;
  o.max_connections_per_client = 4;
  Running s(o);
  s.server.SetEngine(std::make_unique<ScriptedEngine>());
  // One client: at its own cap (4), its 5th connection pushes out its first.
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(Connect(s.port, "127.0.0.2"));
  ASSERT_TRUE(Eventually([&] { return !Closed(idle[3]); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  idle.push_back(Connect(s.port, "127.0.0.2"));
  EXPECT_TRUE(Eventually([&] { return Closed(idle[0]); }));
  // Two more from 127.0.0.3: the server is at its cap of 6 (4 + 2) ...
  idle.push_back(Connect(s.port, "127.0.0.3"));
  idle.push_back(Connect(s.port, "127.0.0.3"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // ... and a request from 127.0.0.1 is still answered: 127.0.0.2's oldest waiting socket goes.
  const std::string got =
      Exchange(s.port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", 5);
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_TRUE(Eventually([&] { return Closed(idle[1]); }));
  EXPECT_FALSE(Closed(idle[5]));  // 127.0.0.3 kept its connections
  for (int fd : idle) ::close(fd);
}

// 413 is decided from the headers: a Content-Length over the limit is answered at once, before
// (and without) the body; a chunked body stops at the limit.
TEST(Http, OversizeBodiesGet413) {
  ServerOptions o;
  o.max_body_bytes = 1u << 20;
  o.read_timeout_s = 60;
  o.body_timeout_s = 60;
  Running s(o);
  s.server.SetEngine(std::make_unique<ScriptedEngine>());
  std::string got = Exchange(s.port,
                             "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             "Content-Type: application/json\r\nContent-Length: 83886080\r\n\r\n",
                             5);
  EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
  EXPECT_NE(got.find("\"request_too_large\""), std::string::npos) << got;
  std::string chunked =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20; ++i) chunked += "10000\r\n" + std::string(65536, ' ') + "\r\n";
  got = Exchange(s.port, chunked, 5);
  EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got.substr(0, 300);
  // A 431 for a head over its limit, a 400 for a malformed one; the server keeps serving.
  got = Exchange(s.port, "GET /health HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n", 5);
  EXPECT_EQ(got.rfind("HTTP/1.1 431", 0), 0u) << got.substr(0, 300);
  got = Exchange(s.port, "NOT HTTP\r\n\r\n", 5);
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got.substr(0, 300);
  EXPECT_EQ(s.Client().Get("/health")->status, 200);
}

// Without an API key, browsers' requests from elsewhere are refused (403): a foreign Host (DNS
// rebinding), a foreign Origin; the server's own page and loopback origins are served; an
// --allowed-origins entry gets CORS headers and its preflight. POST bodies must be JSON.
TEST(Http, BrowserOriginsAndContentType) {
  ServerOptions o;
  o.allowed_origins = {"https://app.example.com"};
  Running s(o);
  s.server.SetEngine(std::make_unique<ScriptedEngine>());
  const std::string body = ChatBody("x", "", R"(,"max_tokens":1)");
  const std::string json_type = "Content-Type: application/json\r\n";
  auto status = [&](const std::string& request) {
    const std::string got = Exchange(s.port, request, 5);
    return got.size() >= 12 ? std::stoi(got.substr(9, 3)) : 0;
  };
  EXPECT_EQ(status(Post(body, json_type)), 200);
  EXPECT_EQ(status("POST /v1/chat/completions HTTP/1.1\r\nHost: evil.example:8080\r\n" + json_type +
                   "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body),
            403);
  EXPECT_EQ(status(Post(body, json_type + "Origin: https://evil.example\r\n")), 403);
  EXPECT_EQ(status(Post(body, json_type + "Origin: null\r\n")), 403);
  EXPECT_EQ(status(Post(body, json_type + "Origin: http://127.0.0.1\r\n")), 200);  // own page
  EXPECT_EQ(status(Post(body, json_type + "Origin: http://localhost:3000\r\n")), 200);
  // Cross-site forms and text/plain "simple requests" need no preflight: refused by type.
  EXPECT_EQ(status(Post(body, "Content-Type: text/plain\r\n")), 415);
  EXPECT_EQ(status(Post(body, "Content-Type: application/x-www-form-urlencoded\r\n")), 415);
  EXPECT_EQ(status(Post(body, "")), 415);
  EXPECT_EQ(status(Post(body, "Content-Type: Application/JSON; charset=utf-8\r\n")), 200);
  // The configured origin: answers carry CORS headers; its preflight is answered.
  std::string got =
      Exchange(s.port, Post(body, json_type + "Origin: https://app.example.com\r\n"), 5);
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_NE(got.find("Access-Control-Allow-Origin: https://app.example.com"), std::string::npos);
  got = Exchange(s.port,
                 "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: "
                 "https://app.example.com\r\nAccess-Control-Request-Method: POST\r\n\r\n",
                 5);
  EXPECT_EQ(got.rfind("HTTP/1.1 204", 0), 0u) << got;
  EXPECT_NE(got.find("Access-Control-Allow-Headers: Authorization, Content-Type"),
            std::string::npos);
  got = Exchange(s.port,
                 "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: "
                 "https://evil.example\r\n\r\n",
                 5);
  EXPECT_EQ(got.rfind("HTTP/1.1 403", 0), 0u) << got;
  // With an API key the key is the protection: no Host/Origin policy.
  ServerOptions k;
  k.api_key = "sk-1";
  Running ks(k);
  ks.server.SetEngine(std::make_unique<ScriptedEngine>());
  got = Exchange(ks.port,
                 "GET /v1/models HTTP/1.1\r\nHost: any.example\r\nAuthorization: bearer sk-1\r\n"
                 "Connection: close\r\n\r\n",
                 5);
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
}

size_t RssBytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// After large bodies (4 × 40 MB, refused by the parser's prompt limit after being read and
// parsed) the process's RSS comes back near where it was (within 24 MiB).
TEST(Http, MemoryIsGivenBackAfterLargeBodies) {
#if OCULAR_ASAN
  // AddressSanitizer keeps freed memory in its quarantine (256 MiB): RSS says nothing there.
  GTEST_SKIP() << "RSS is not measurable under AddressSanitizer";
#endif
  Running s(ServerOptions{});
  s.server.SetEngine(std::make_unique<ScriptedEngine>());
  for (int i = 0; i < 3; ++i) (void)s.Client().Get("/health");
  const size_t before = RssBytes();
  size_t peak = before;
  for (int i = 0; i < 4; ++i) {
    std::string body = ChatBody(std::string(40u << 20, 'a'), "");
    auto r = s.Client().Post("/v1/chat/completions", body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    peak = std::max(peak, RssBytes());
  }
  ASSERT_TRUE(Eventually([&] { return RssBytes() < before + (24u << 20); }))
      << "RSS " << (before >> 20) << " MiB before, " << (RssBytes() >> 20) << " MiB after (peak "
      << (peak >> 20) << " MiB)";
  std::printf("[ memory ] RSS %zu MiB before, peak %zu MiB, %zu MiB after\n", before >> 20,
              peak >> 20, RssBytes() >> 20);
}

// One access-log line per request, JSON with --log-format json; the request id is the
// client's X-Request-Id when it is plain, and comes back in the response.
TEST(Http, AccessLog) {
  ServerOptions o;
  o.log_format = "json";
  Running s(o);
  s.server.SetEngine(std::make_unique<ScriptedEngine>());
  // stderr into a file of our own, read while the server writes: a line is logged after its
  // response is sent, so it may come after the client has the answer (and the start-up probes'
  // lines may come late too: lines are picked by request, not counted).
  std::fflush(stderr);
  const int saved = dup(2);
  FILE* file = std::tmpfile();
  ASSERT_TRUE(file != nullptr && saved >= 0);
  dup2(fileno(file), 2);
  const std::string got = Exchange(
      s.port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: trace-7\r\n\r\n", 1);
  (void)Exchange(s.port, "GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 1);
  json health, nope;
  auto read_log = [&] {
    std::string log(static_cast<size_t>(std::max<long>(0, lseek(fileno(file), 0, SEEK_END))), '\0');
    if (!log.empty() && pread(fileno(file), log.data(), log.size(), 0) < 0) log.clear();
    size_t at = 0;
    for (size_t nl; (nl = log.find('\n', at)) != std::string::npos; at = nl + 1) {
      json line = json::parse(log.substr(at, nl - at), nullptr, false);
      if (line.is_object() && line.value("request_id", "") == "trace-7") health = line;
      if (line.is_object() && line.value("path", "") == "/nope") nope = line;
    }
    return health.is_object() && nope.is_object();
  };
  const bool logged = Eventually(read_log);
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::fclose(file);
  ASSERT_TRUE(logged) << "health: " << health.dump() << " nope: " << nope.dump();
  EXPECT_NE(got.find("X-Request-Id: trace-7"), std::string::npos) << got;
  EXPECT_EQ(health["method"], "GET");
  EXPECT_EQ(health["path"], "/health");
  EXPECT_EQ(health["status"], 200);
  EXPECT_EQ(health["bytes"], 15);  // {"status":"ok"}
  EXPECT_TRUE(health["ms"].is_number());
  EXPECT_EQ(nope["status"], 404);
  EXPECT_TRUE(nope["request_id"].is_string());
}

}  // namespace
}  // namespace ocular::server

// The bad-request corpus: a live server (in process, on a free loopback port, tiny checkpoint)
// gets ≥ 60 malformed, hostile or over-limit requests; each must get its 4xx status, an OpenAI
// error body naming the field (or code) at fault, and the server must keep serving.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server.h"
#include "test_util.h"

namespace ocular::server {
namespace {

using nlohmann::json;
using testing::Base64;
using testing::ChatBody;
using testing::DataUrl;
using testing::ReadFile;

constexpr char kKey[] = "sk-test-0123456789";

class ServerFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions eo;
    eo.threads = 1;
    eo.max_image_pixels = 10'000;  // photo.png (60×40) fits, astronaut (160×160) does not
    auto engine = Engine::Load("testdata/tiny/pg2", eo);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    ServerOptions o;
    o.model_id = "pg2";
    o.api_key = kKey;
    o.parallel = 1;
    o.max_queue = 4;
    o.max_body_bytes = 2u << 20;
    o.max_prompt_tokens = 200;
    o.read_timeout_s = 1;
    o.body_timeout_s = 1;
    o.limits.max_images = 2;
    o.limits.max_image_bytes = 1u << 20;
    o.limits.max_completion_tokens = 64;
    o.local_files_root = std::filesystem::canonical("testdata/golden/inputs").string();
    server_ = new Server(o);
    auto port = server_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.ok());
    port_ = *port;
    server_->SetEngine(std::move(*engine));
    thread_ = new std::thread([] { server_->Run(); });
    // Wait until it accepts connections.
    for (int i = 0; i < 100; ++i) {
      httplib::Client c("127.0.0.1", port_);
      if (auto r = c.Get("/health"); r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "server did not come up";
  }
  static void TearDownTestSuite() {
    server_->Stop();
    thread_->join();
    delete thread_;
    delete server_;
  }

  static httplib::Client Client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c;
  }
  static httplib::Headers Auth() { return {{"Authorization", std::string("Bearer ") + kKey}}; }
  static void ExpectHealthy() {
    auto r = Client().Get("/health");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }

  static Server* server_;
  static std::thread* thread_;
  static int port_;
};
Server* ServerFixture::server_ = nullptr;
std::thread* ServerFixture::thread_ = nullptr;
int ServerFixture::port_ = 0;

struct BadCase {
  std::string name;
  std::string body;
  int status;
  std::string expect;  // a substring of error.param or error.code ("" = any)
  httplib::Headers headers = {{"Authorization", std::string("Bearer ") + kKey}};
  std::string content_type = "application/json";
};

// Malformed JSON, wrong shapes, missing or mistyped fields.
std::vector<BadCase> ShapeCases() {
  const std::string img = "messages[0].content[1].image_url.url";
  return {
      // Malformed JSON and wrong shapes.
      {"empty body", "", 400, "invalid_json"},
      {"truncated json", R"({"messages":[{"role":"user")", 400, "invalid_json"},
      {"trailing garbage", ChatBody("x", "") + "}", 400, "invalid_json"},
      {"json array", "[1,2]", 400, ""},
      {"json string", "\"hello\"", 400, ""},
      {"json null", "null", 400, ""},
      {"deep nesting", std::string(5000, '[') + std::string(5000, ']'), 400, ""},
      {"invalid utf-8 escape", R"({"messages":[{"role":"user","content":"\ud800"}]})", 400,
       "invalid_json"},
      {"NaN literal", ChatBody("x", "", R"(,"temperature":NaN)"), 400, "invalid_json"},
      {"binary body", std::string("\x00\x01\x02\xff", 4), 400, "invalid_json"},
      // Missing or mistyped fields.
      {"no messages", R"({"model":"pg2"})", 400, "messages"},
      {"messages object", R"({"messages":{"role":"user"}})", 400, "messages"},
      {"messages empty", R"({"messages":[]})", 400, "messages"},
      {"message not object", R"({"messages":["hi"]})", 400, "messages[0]"},
      {"no role", R"({"messages":[{"content":"x"}]})", 400, "messages[0].role"},
      {"role number", R"({"messages":[{"role":1,"content":"x"}]})", 400, "messages[0].role"},
      {"unknown role", R"({"messages":[{"role":"wizard","content":"x"}]})", 400,
       "messages[0].role"},
      {"tool role", R"({"messages":[{"role":"tool","content":"x"}]})", 400, "messages[0].role"},
      {"no content", R"({"messages":[{"role":"user"}]})", 400, "messages[0].content"},
      {"content number", R"({"messages":[{"role":"user","content":3}]})", 400,
       "messages[0].content"},
      {"content object", R"({"messages":[{"role":"user","content":{"text":"x"}}]})", 400,
       "messages[0].content"},
      {"empty prompt", R"({"messages":[{"role":"user","content":""}]})", 400,
       "messages[0].content"},
      {"no user message", R"({"messages":[{"role":"system","content":"x"}]})", 400, "messages"},
      {"part not object", R"({"messages":[{"role":"user","content":["x"]}]})", 400,
       "messages[0].content[0]"},
      {"part without type", R"({"messages":[{"role":"user","content":[{"text":"x"}]}]})", 400,
       "messages[0].content[0].type"},
      {"audio part", R"({"messages":[{"role":"user","content":[{"type":"input_audio"}]}]})", 400,
       "messages[0].content[0].type"},
      {"text part number", R"({"messages":[{"role":"user","content":[{"type":"text","text":2}]}]})",
       400, "messages[0].content[0].text"},
      {"image_url missing",
       R"({"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url"}]}]})",
       400, "messages[0].content[1].image_url"},
      {"image_url number",
       R"({"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":4}]}]})",
       400, "messages[0].content[1].image_url"},
      {"url missing",
       R"({"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{}}]}]})",
       400, img},
      {"model number", ChatBody("x", "", R"(,"model":1)"), 400, "model"},
      {"unknown model", ChatBody("x", "", R"(,"model":"gpt-4o")"), 404, "model_not_found"},
      {"empty model", ChatBody("x", "", R"(,"model":"")"), 400, "model"},
  };
}

// Numbers out of range, negative, non-finite or of the wrong type; unsupported options.
std::vector<BadCase> NumberCases() {
  return {
      // Numbers out of range, negative, non-finite, wrong type.
      {"max_tokens 0", ChatBody("x", "", R"(,"max_tokens":0)"), 400, "max_tokens"},
      {"max_tokens negative", ChatBody("x", "", R"(,"max_tokens":-1)"), 400, "max_tokens"},
      {"max_tokens huge", ChatBody("x", "", R"(,"max_tokens":18446744073709551615)"), 400,
       "max_tokens"},
      {"max_tokens over cap", ChatBody("x", "", R"(,"max_tokens":65)"), 400, "max_tokens"},
      {"max_tokens fraction", ChatBody("x", "", R"(,"max_tokens":1.5)"), 400, "max_tokens"},
      {"max_tokens string", ChatBody("x", "", R"(,"max_tokens":"10")"), 400, "max_tokens"},
      {"max_completion_tokens negative", ChatBody("x", "", R"(,"max_completion_tokens":-3)"), 400,
       "max_completion_tokens"},
      {"temperature negative", ChatBody("x", "", R"(,"temperature":-0.5)"), 400, "temperature"},
      {"temperature huge", ChatBody("x", "", R"(,"temperature":1e308)"), 400, "temperature"},
      {"temperature overflow", ChatBody("x", "", R"(,"temperature":1e999)"), 400, ""},
      {"temperature string", ChatBody("x", "", R"(,"temperature":"0.1")"), 400, "temperature"},
      {"top_p negative", ChatBody("x", "", R"(,"top_p":-0.1)"), 400, "top_p"},
      {"top_p above 1", ChatBody("x", "", R"(,"top_p":1.01)"), 400, "top_p"},
      {"seed string", ChatBody("x", "", R"(,"seed":"abc")"), 400, "seed"},
      {"seed fraction", ChatBody("x", "", R"(,"seed":0.5)"), 400, "seed"},
      {"pan_and_scan string", ChatBody("x", "", R"(,"pan_and_scan":"yes")"), 400, "pan_and_scan"},
      {"mm_processor_kwargs number", ChatBody("x", "", R"(,"mm_processor_kwargs":3)"), 400,
       "mm_processor_kwargs"},
      {"mm_processor_kwargs unknown key", ChatBody("x", "", R"(,"mm_processor_kwargs":{"fps":2})"),
       400, "mm_processor_kwargs"},
      {"min_pixels string", ChatBody("x", "", R"(,"mm_processor_kwargs":{"min_pixels":"a"})"), 400,
       "min_pixels"},
      {"max_pixels zero", ChatBody("x", "", R"(,"mm_processor_kwargs":{"max_pixels":0})"), 400,
       "max_pixels"},
      // PaliGemma has no min_pixels / max_pixels: the engine refuses them.
      {"min_pixels on paligemma",
       ChatBody("x", "", R"(,"mm_processor_kwargs":{"min_pixels":3136})"), 400, ""},
      {"n 2", ChatBody("x", "", R"(,"n":2)"), 400, "n"},
      {"n 0", ChatBody("x", "", R"(,"n":0)"), 400, "n"},
      {"n huge", ChatBody("x", "", R"(,"n":1000000)"), 400, "n"},
      {"stop number", ChatBody("x", "", R"(,"stop":1)"), 400, "stop"},
      {"stop list of numbers", ChatBody("x", "", R"(,"stop":[1])"), 400, "stop[0]"},
      {"too many stops", ChatBody("x", "", R"(,"stop":["a","b","c","d","e"])"), 400, "stop"},
      {"stop too long", ChatBody("x", "", R"(,"stop":")" + std::string(1000, 'a') + "\""), 400,
       "stop"},
      {"stream string", ChatBody("x", "", R"(,"stream":"true")"), 400, "stream"},
      {"stream_options array", ChatBody("x", "", R"(,"stream_options":[])"), 400, "stream_options"},
      {"tools", ChatBody("x", "", R"(,"tools":[])"), 400, "tools"},
      {"response_format type", ChatBody("x", "", R"(,"response_format":{"type":"xml"})"), 400,
       "response_format.type"},
      {"response_format no schema",
       ChatBody("x", "", R"(,"response_format":{"type":"json_schema","json_schema":{}})"), 400,
       "response_format.json_schema.schema"},
      {"response_format unsupported keyword",
       ChatBody("x", "",
                R"(,"response_format":{"type":"json_schema","json_schema":{"name":"a",)"
                R"("schema":{"type":"object","properties":{"a":{"not":{}}}}}})"),
       400, "response_format"},
  };
}

// A BMP header claiming 30000×30000 pixels with no pixel data (a decompression bomb).
std::string BmpBomb() {
  std::string bomb = "BM";
  auto le32 = [](std::string* s, uint32_t v) {
    for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  le32(&bomb, 54 + 16);
  le32(&bomb, 0);
  le32(&bomb, 54);
  le32(&bomb, 40);
  le32(&bomb, 30000);
  le32(&bomb, 30000);
  bomb += std::string("\x01\x00\x18\x00", 4);
  bomb += std::string(24, '\0') + std::string(16, '\x7f');
  return bomb;
}

// Images: encodings, sizes, counts, sources.
std::vector<BadCase> ImageCases() {
  const std::string png = ReadFile("testdata/golden/inputs/photo.png");
  const std::string url = DataUrl(png);
  const std::string img = "messages[0].content[1].image_url.url";
  const std::string root = std::filesystem::canonical("testdata/golden/inputs").string();
  const std::string bomb = BmpBomb();
  std::string many_images;
  for (int i = 0; i < 3; ++i) {
    many_images += R"(,{"type":"image_url","image_url":{"url":")" + url + R"("}})";
  }
  return {
      // Images: encodings, sizes, counts, sources.
      {"invalid base64", ChatBody("x", "data:image/png;base64,!!!notbase64!!!"), 400, img},
      {"base64 with spaces", ChatBody("x", "data:image/png;base64,aGVs bG8="), 400, img},
      {"empty data url", ChatBody("x", "data:image/png;base64,"), 400, img},
      {"data url no comma", ChatBody("x", "data:image/png;base64"), 400, img},
      {"data url not base64", ChatBody("x", "data:image/png,rawbytes"), 400, img},
      {"data url not image", ChatBody("x", "data:application/pdf;base64,JVBERi0="), 400, img},
      {"not an image", ChatBody("x", DataUrl("just some text, not pixels")), 400, "invalid_image"},
      {"truncated png", ChatBody("x", DataUrl(png.substr(0, 60))), 400, ""},
      {"corrupt png", ChatBody("x", DataUrl(png.substr(0, 33) + std::string(200, 'z'))), 400, ""},
      {"huge base64", ChatBody("x", "data:image/png;base64," + std::string(1500000, 'A')), 400,
       "image_too_large"},
      {"oversized image",
       ChatBody("x", DataUrl(ReadFile("testdata/images/inputs/astronaut_rgb.png"))), 400,
       "image_too_large"},
      {"bmp bomb", ChatBody("x", DataUrl(bomb, "image/bmp")), 400, ""},
      {"too many images",
       R"({"messages":[{"role":"user","content":[{"type":"text","text":"x"})" + many_images +
           "]}]}",
       400, "too_many_images"},
      {"image from assistant",
       R"({"messages":[{"role":"assistant","content":[{"type":"image_url","image_url":{"url":")" +
           url + R"("}}]},{"role":"user","content":"x"}]})",
       400, "messages[0].content[0]"},
      {"https url", ChatBody("x", "https://example.com/cat.png"), 400, "remote_url_refused"},
      {"http metadata url", ChatBody("x", "http://169.254.169.254/latest/meta-data"), 400,
       "remote_url_refused"},
      {"gopher url", ChatBody("x", "gopher://localhost:6379/_x"), 400, img},
      {"file traversal", ChatBody("x", "file://" + root + "/../../../README.md"), 400, img},
      {"file absolute outside", ChatBody("x", "file:///etc/passwd"), 400, img},
      {"file encoded traversal", ChatBody("x", "file://" + root + "/%2e%2e/%2e%2e/README.md"), 400,
       img},
      {"file missing", ChatBody("x", "file://" + root + "/nope.png"), 400, img},
      {"file directory", ChatBody("x", "file://" + root), 400, img},
      {"file not image", ChatBody("x", "file:///proc/self/environ"), 400, img},
      // The audit's cases (issue 33): schemes in any case are the same schemes; escapes in
      // file:// URLs are decoded before the containment check, and bad escapes are refused.
      {"uppercase http url", ChatBody("x", "HTTP://example.com/cat.png"), 400,
       "remote_url_refused"},
      {"mixed-case https url", ChatBody("x", "hTTpS://example.com/cat.png"), 400,
       "remote_url_refused"},
      {"uppercase file url outside", ChatBody("x", "FILE:///etc/passwd"), 400, img},
      {"file url escaped outside", ChatBody("x", "file://%2Fetc%2Fpasswd"), 400, img},
      {"file url nul escape", ChatBody("x", "file://" + root + "/photo.png%00.txt"), 400, img},
      {"file url malformed escape", ChatBody("x", "file://" + root + "/%zz.png"), 400, img},
      {"file url truncated escape", ChatBody("x", "file://" + root + "/photo.png%2"), 400, img},
  };
}

// Prompt limits, authentication, content types.
std::vector<BadCase> LimitAndAuthCases() {
  const httplib::Headers auth = {{"Authorization", std::string("Bearer ") + kKey}};
  std::string long_prompt;
  for (int i = 0; i < 400; ++i) long_prompt += "word ";
  return {
      // Prompt limits.
      {"prompt over token limit", ChatBody(long_prompt, ""), 400, "context_length_exceeded"},
      {"prompt over byte limit", ChatBody(std::string(70000, 'a'), ""), 400,
       "context_length_exceeded"},
      // Authentication.
      {"no api key", ChatBody("x", ""), 401, "invalid_api_key", {}},
      {"wrong api key",
       ChatBody("x", ""),
       401,
       "invalid_api_key",
       {{"Authorization", "Bearer sk-wrong"}}},
      {"key prefix",
       ChatBody("x", ""),
       401,
       "invalid_api_key",
       {{"Authorization", "Bearer sk-test"}}},
      {"key longer",
       ChatBody("x", ""),
       401,
       "invalid_api_key",
       {{"Authorization", std::string("Bearer ") + kKey + "0"}}},
      {"basic auth",
       ChatBody("x", ""),
       401,
       "invalid_api_key",
       {{"Authorization", "Basic " + Base64(std::string("u:") + kKey)}}},
      {"empty bearer", ChatBody("x", ""), 401, "invalid_api_key", {{"Authorization", "Bearer "}}},
      {"lowercase bearer wrong key",
       ChatBody("x", ""),
       401,
       "invalid_api_key",
       {{"Authorization", "bearer sk-wrong"}}},
      // Bodies a browser can send without a preflight never reach the parser.
      {"text/plain body", ChatBody("x", ""), 415, "unsupported_media_type", auth, "text/plain"},
      {"form body", ChatBody("x", ""), 415, "unsupported_media_type", auth,
       "application/x-www-form-urlencoded"},
      {"multipart body", ChatBody("x", ""), 415, "unsupported_media_type", auth,
       "multipart/form-data; boundary=x"},
  };
}

std::vector<BadCase> Corpus() {
  std::vector<BadCase> c;
  for (auto* group : {&ShapeCases, &NumberCases, &ImageCases, &LimitAndAuthCases}) {
    std::vector<BadCase> cases = group();
    c.insert(c.end(), std::make_move_iterator(cases.begin()), std::make_move_iterator(cases.end()));
  }
  return c;
}

void ExpectErrorBody(const std::string& body, const std::string& expect) {
  json j = json::parse(body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << body;
  ASSERT_TRUE(j.contains("error")) << body;
  const json& e = j["error"];
  ASSERT_TRUE(e["message"].is_string()) << body;
  EXPECT_FALSE(e["message"].get<std::string>().empty());
  ASSERT_TRUE(e["type"].is_string()) << body;
  EXPECT_TRUE(e["param"].is_null() || e["param"].is_string()) << body;
  EXPECT_TRUE(e["code"].is_string()) << body;  // never null (docs/server.md)
  if (!expect.empty()) {
    const std::string param = e["param"].is_string() ? e["param"].get<std::string>() : "";
    const std::string code = e["code"].is_string() ? e["code"].get<std::string>() : "";
    EXPECT_TRUE(param == expect || code == expect) << "expected " << expect << " in " << body;
  }
}

TEST_F(ServerFixture, BadRequestCorpus) {
  const std::vector<BadCase> corpus = Corpus();
  EXPECT_GE(corpus.size(), 60u);
  for (const BadCase& c : corpus) {
    SCOPED_TRACE(c.name);
    auto r = Client().Post("/v1/chat/completions", c.headers, c.body, c.content_type);
    ASSERT_TRUE(r) << "no response: " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, c.status) << r->body;
    ExpectErrorBody(r->body, c.expect);
    ExpectHealthy();
  }
}

TEST_F(ServerFixture, HttpLevelErrors) {
  // Over the body limit: 413 before the body is read in full.
  auto big =
      Client().Post("/v1/chat/completions", Auth(), std::string(3u << 20, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  ExpectErrorBody(big->body, "request_too_large");
  auto missing = Client().Get("/v1/nothing", Auth());
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  ExpectErrorBody(missing->body, "unknown_url");
  auto get_chat = Client().Get("/v1/chat/completions", Auth());
  ASSERT_TRUE(get_chat);
  EXPECT_GE(get_chat->status, 400);
  EXPECT_LT(get_chat->status, 500);
  // /metrics and /v1/models need the key; /health does not.
  auto metrics = Client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 401);
  ExpectHealthy();
}

// Sends `data` on a raw connection, then waits; returns what the server sent back before it
// closed the connection (or `wait_s` passed).
std::string RawExchange(int port, const std::string& data, double wait_s) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "<connect failed>";
  }
  (void)::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
  timeval tv{static_cast<time_t>(wait_s), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return got;
}

TEST_F(ServerFixture, SlowClientsAreDroppedAndOthersServed) {
  // A body that stops arriving, and headers that never end (slowloris): the server gives up
  // after its read timeout (1 s here) while serving a normal request meanwhile.
  std::thread slow_body([] {
    const std::string got = RawExchange(
        port_,
        std::string("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") +
            kKey + "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"mess",
        10);
    EXPECT_TRUE(got.empty() || got.rfind("HTTP/1.1 4", 0) == 0) << got;
  });
  std::thread slow_headers([] {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string got = RawExchange(port_, "POST /v1/chat/completions HTTP/1.1\r\nHo", 10);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(8));
    EXPECT_TRUE(got.empty() || got.rfind("HTTP/1.1 4", 0) == 0) << got;
  });
  auto r = Client().Post("/v1/chat/completions", Auth(),
                         ChatBody("caption en", "", R"(,"max_tokens":2)"), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  slow_body.join();
  slow_headers.join();
  ExpectHealthy();
}

// The web page's retry after a 401 (run without the key, type it, run again) reuses the
// connection: the refused request's unread body must not be parsed as the next request.
TEST_F(ServerFixture, RequestAfterA401OnTheSameConnection) {
  const std::string body = ChatBody("caption en", "", R"(,"max_tokens":2)");
  auto request = [&](const std::string& auth) {
    return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth +
           "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body;
  };
  const std::string got = RawExchange(
      port_, request("") + request(std::string("Authorization: Bearer ") + kKey + "\r\n"), 5);
  EXPECT_EQ(got.rfind("HTTP/1.1 401", 0), 0u) << got;
  // Either the server closed after the 401 (the client retries on a new connection) or it
  // answered the second request properly.
  EXPECT_EQ(got.find("HTTP/1.1 400"), std::string::npos) << got;
  // A lowercase scheme is the same credentials (RFC 9110).
  auto r = Client().Post("/v1/chat/completions", {{"Authorization", std::string("bearer ") + kKey}},
                         body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(ServerFixture, ServesAfterBadRequests) {
  auto bad = Client().Post("/v1/chat/completions", Auth(), "{", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  const std::string png = ReadFile("testdata/golden/inputs/photo.png");
  auto r = Client().Post("/v1/chat/completions", Auth(),
                         ChatBody("caption en", DataUrl(png), R"(,"model":"pg2","max_tokens":4)"),
                         "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "pg2");
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string());
  EXPECT_EQ(j["usage"]["completion_tokens"].get<int>() + j["usage"]["prompt_tokens"].get<int>(),
            j["usage"]["total_tokens"].get<int>());
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 16);  // the image tokens count
  // The server counts a request once its response is written (httplib's logger), so the
  // count may trail the client's read of the response by a moment.
  auto metrics = Client().Get("/metrics", Auth());
  for (int i = 0; i < 100 && metrics &&
                  metrics->body.find("ocular_requests_total{status=\"200\"}") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    metrics = Client().Get("/metrics", Auth());
  }
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("ocular_requests_total{status=\"200\"}"), std::string::npos);
  EXPECT_NE(metrics->body.find("ocular_requests_total{status=\"400\"}"), std::string::npos);
  EXPECT_NE(metrics->body.find("ocular_queue_depth 0"), std::string::npos) << metrics->body;
  auto models = Client().Get("/v1/models", Auth());
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "pg2");
}

}  // namespace
}  // namespace ocular::server
